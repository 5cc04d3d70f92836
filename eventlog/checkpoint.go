package eventlog

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"

	"github.com/seed-0809debe/posture"
)

// Verifiable history.
//
// Every stored message has a leaf hash: SHA-256 over its stream sequence,
// its subject and its data, each length-prefixed after a fixed tag, so that
// no two different messages share an encoding. A checkpoint covers the
// sequences From..To that follow the previous checkpoint's To. Its root is
// SHA-256 over a tag, the previous checkpoint's digest and the leaves of
// From..To in order, a sequence missing from the stream counting as a leaf of
// zeros; its digest is SHA-256 over a tag, From, To, the previous digest,
// the root and the hash of its fingerprints. The digest is what is signed
// (pki.CA.SignStatement, purpose CheckpointPurpose) and what the next
// checkpoint chains to, so that a checkpoint vouches for every message
// before it: rewriting one means rewriting every later checkpoint, which
// takes the CA key.
//
// The root alone proves that a range changed; the fingerprints (the first 8
// bytes of each leaf) say which sequence did, and whether it was deleted,
// altered or inserted. They cost 8 bytes per message (about 107 KB of base64
// for 10,000), which keeps a checkpoint well under the NATS payload limit.
//
// Headers are not hashed: the one header postured writes, Nats-Msg-Id, is
// the event's ID, which is in the data.

// CheckpointPurpose is the purpose under which checkpoint digests are signed.
const CheckpointPurpose = "log checkpoint"

// MaxCheckpointEvents bounds the sequences one checkpoint covers, so that
// its fingerprints (8 bytes each, base64) stay well under the 1 MiB payload
// limit of NATS.
const MaxCheckpointEvents = 50_000

const fingerprintSize = 8

var (
	leafTag   = []byte("postured leaf v1\x00")
	rootTag   = []byte("postured root v1\x00")
	digestTag = []byte("postured checkpoint v1\x00")
)

// leaf is the hash of one stored message; the zero leaf stands for a
// sequence missing from the stream.
type leaf [sha256.Size]byte

// leafHasher computes leaf hashes, reusing its state between messages. It
// is not safe for concurrent use.
type leafHasher struct {
	h   hash.Hash
	buf [8]byte
	sum []byte
}

func newLeafHasher() *leafHasher {
	return &leafHasher{h: sha256.New(), sum: make([]byte, 0, sha256.Size)}
}

// leaf is the leaf hash of the message stored at seq on subject (the full
// NATS subject) with data.
func (lh *leafHasher) leaf(seq uint64, subject string, data []byte) leaf {
	h := lh.h
	h.Reset()
	h.Write(leafTag)
	binary.BigEndian.PutUint64(lh.buf[:], seq)
	h.Write(lh.buf[:])
	binary.BigEndian.PutUint64(lh.buf[:], uint64(len(subject)))
	h.Write(lh.buf[:])
	h.Write([]byte(subject))
	binary.BigEndian.PutUint64(lh.buf[:], uint64(len(data)))
	h.Write(lh.buf[:])
	h.Write(data)
	var out leaf
	copy(out[:], h.Sum(lh.sum[:0]))
	return out
}

// rootHash accumulates a checkpoint's root over its leaves in order.
type rootHash struct{ h hash.Hash }

func newRootHash(prev [sha256.Size]byte) rootHash {
	h := sha256.New()
	h.Write(rootTag)
	h.Write(prev[:])
	return rootHash{h}
}

func (r rootHash) add(l leaf) { r.h.Write(l[:]) }

func (r rootHash) sum() (out [sha256.Size]byte) {
	copy(out[:], r.h.Sum(nil))
	return out
}

// checkpoint is a decoded LogCheckpointed with its binary fields.
type checkpoint struct {
	from, to uint64
	prev     [sha256.Size]byte // zero for the first checkpoint
	root     [sha256.Size]byte
	leaves   []byte // fingerprintSize bytes per sequence from..to
	sig      []byte
	payload  posture.LogCheckpointed
}

// statement is the digest's input: the bytes that are signed.
func (c *checkpoint) statement() []byte {
	fps := sha256.Sum256(c.leaves)
	out := make([]byte, 0, len(digestTag)+16+3*sha256.Size)
	out = append(out, digestTag...)
	out = binary.BigEndian.AppendUint64(out, c.from)
	out = binary.BigEndian.AppendUint64(out, c.to)
	out = append(out, c.prev[:]...)
	out = append(out, c.root[:]...)
	return append(out, fps[:]...)
}

// digest is what the next checkpoint chains to.
func (c *checkpoint) digest() [sha256.Size]byte { return sha256.Sum256(c.statement()) }

// fingerprint is the fingerprint of sequence seq, within from..to.
func (c *checkpoint) fingerprint(seq uint64) []byte {
	i := (seq - c.from) * fingerprintSize
	return c.leaves[i : i+fingerprintSize]
}

// rangeString names the checkpoint's range as reports do.
func (c *checkpoint) rangeString() string { return fmt.Sprintf("%d..%d", c.from, c.to) }

// newCheckpoint builds the checkpoint of leaves (sequences from on) after
// prev.
func newCheckpoint(from uint64, prev [sha256.Size]byte, leaves []leaf) *checkpoint {
	c := &checkpoint{from: from, to: from + uint64(len(leaves)) - 1, prev: prev,
		leaves: make([]byte, 0, len(leaves)*fingerprintSize)}
	r := newRootHash(prev)
	for _, l := range leaves {
		r.add(l)
		c.leaves = append(c.leaves, l[:fingerprintSize]...)
	}
	c.root = r.sum()
	return c
}

// sign signs c and fills in its payload.
func (c *checkpoint) sign(sign func([]byte) ([]byte, error), keyID string) error {
	sig, err := sign(c.statement())
	if err != nil {
		return fmt.Errorf("eventlog: sign checkpoint %s: %w", c.rangeString(), err)
	}
	c.sig = sig
	c.payload = posture.LogCheckpointed{
		From: c.from, To: c.to, Root: hex.EncodeToString(c.root[:]),
		Leaves: base64.StdEncoding.EncodeToString(c.leaves), KeyID: keyID,
		Signature: base64.StdEncoding.EncodeToString(sig),
	}
	if c.prev != ([sha256.Size]byte{}) {
		c.payload.Prev = hex.EncodeToString(c.prev[:])
	}
	return nil
}

// parseCheckpoint reads a stored checkpoint message. It checks the shape
// (the fields decode, the fingerprints cover the range, the message comes
// after its range), not the signature.
func parseCheckpoint(seq uint64, data []byte) (*checkpoint, error) {
	e, err := decode(data, seq)
	if err != nil {
		return nil, err
	}
	p, err := e.Decode()
	if err != nil {
		return nil, err
	}
	cp, ok := p.(posture.LogCheckpointed)
	if !ok {
		return nil, fmt.Errorf("message %d is a %s event, not a checkpoint", seq, e.Type)
	}
	c := &checkpoint{from: cp.From, to: cp.To, payload: cp}
	if c.from == 0 || c.to < c.from || c.to >= seq {
		return nil, fmt.Errorf("checkpoint at seq %d covers %d..%d: not a range before it", seq, c.from, c.to)
	}
	if c.to-c.from >= MaxCheckpointEvents {
		return nil, fmt.Errorf("checkpoint at seq %d covers %d sequences (at most %d)", seq, c.to-c.from+1, MaxCheckpointEvents)
	}
	if cp.Prev != "" {
		if err := decodeHash(&c.prev, cp.Prev); err != nil {
			return nil, fmt.Errorf("checkpoint at seq %d: prev: %w", seq, err)
		}
	}
	if err := decodeHash(&c.root, cp.Root); err != nil {
		return nil, fmt.Errorf("checkpoint at seq %d: root: %w", seq, err)
	}
	if c.leaves, err = base64.StdEncoding.DecodeString(cp.Leaves); err != nil {
		return nil, fmt.Errorf("checkpoint at seq %d: leaves: %w", seq, err)
	}
	if uint64(len(c.leaves)) != (c.to-c.from+1)*fingerprintSize {
		return nil, fmt.Errorf("checkpoint at seq %d: %d bytes of fingerprints for %d sequences", seq, len(c.leaves), c.to-c.from+1)
	}
	if c.sig, err = base64.StdEncoding.DecodeString(cp.Signature); err != nil {
		return nil, fmt.Errorf("checkpoint at seq %d: signature: %w", seq, err)
	}
	return c, nil
}

func decodeHash(dst *[sha256.Size]byte, s string) error {
	b, err := hex.DecodeString(s)
	if err != nil {
		return err
	}
	if len(b) != sha256.Size {
		return errors.New("not a SHA-256")
	}
	copy(dst[:], b)
	return nil
}
