package eventlog

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/seed-0809debe/posture"
)

// VerifyOptions configures Verify.
type VerifyOptions struct {
	// Verify checks a checkpoint's signature (required): in postured,
	// pki.VerifyStatement with the CA certificate and CheckpointPurpose.
	Verify func(statement, sig []byte) error
	// MaxProblems bounds the problems reported (default 100); the first
	// ones in sequence order are kept.
	MaxProblems int
}

// ProblemKind says what is wrong at a sequence.
type ProblemKind string

const (
	// Deleted: a checkpoint covers the sequence, and it is no longer in
	// the stream.
	Deleted ProblemKind = "deleted"
	// Altered: the message at the sequence is not the one the checkpoint
	// covers.
	Altered ProblemKind = "altered"
	// Inserted: the checkpoint records the sequence as missing, and the
	// stream holds a message there.
	Inserted ProblemKind = "inserted"
	// Missing: the stream has a gap at the sequence that no checkpoint
	// proves was ever filled (it was missing when the checkpoint was
	// written, or no checkpoint covers it yet). JetStream leaves gaps only
	// where messages were deleted.
	Missing ProblemKind = "missing"
	// BadCheckpoint: the message at the sequence is a checkpoint that
	// does not parse or whose signature does not verify.
	BadCheckpoint ProblemKind = "bad checkpoint"
	// BrokenChain: the checkpoint at the sequence does not chain to the
	// one before it: a checkpoint is missing or was replaced.
	BrokenChain ProblemKind = "broken chain"
	// LostEnd: the sequences are missing at the end of the log, which a
	// reader that applied them (a node's projection) knows it held.
	LostEnd ProblemKind = "lost"
)

// Problem is one finding of Verify. Seq..Last is a run of sequences with the
// same finding, proven by the checkpoint at Checkpoint (0: none), which
// covers From..To.
type Problem struct {
	Kind       ProblemKind `json:"kind"`
	Seq        uint64      `json:"seq"`
	Last       uint64      `json:"last"`
	Checkpoint uint64      `json:"checkpoint,omitempty"`
	From       uint64      `json:"from,omitempty"`
	To         uint64      `json:"to,omitempty"`
	Detail     string      `json:"detail,omitempty"`
}

func (p Problem) String() string {
	what := fmt.Sprintf("sequence %d", p.Seq)
	if p.Last > p.Seq {
		what = fmt.Sprintf("sequences %d..%d", p.Seq, p.Last)
	}
	proof := ""
	if p.Checkpoint != 0 {
		proof = fmt.Sprintf(" (checkpoint at seq %d covering %d..%d)", p.Checkpoint, p.From, p.To)
	}
	switch p.Kind {
	case Deleted:
		// The NATS server drops a message whose stored bytes no longer
		// match their checksum: it shows as deleted.
		return fmt.Sprintf("%s deleted or damaged%s", what, proof)
	case Altered, Inserted:
		return fmt.Sprintf("%s %s%s", what, p.Kind, proof)
	case Missing:
		if p.Checkpoint != 0 {
			return fmt.Sprintf("%s missing: already missing when the checkpoint at seq %d covering %d..%d was written", what, p.Checkpoint, p.From, p.To)
		}
		return fmt.Sprintf("%s missing: a gap in the stream (deleted) that no checkpoint covers yet", what)
	case BadCheckpoint:
		return fmt.Sprintf("checkpoint at seq %d is not valid: %s", p.Seq, p.Detail)
	case LostEnd:
		return fmt.Sprintf("%s lost: %s", what, p.Detail)
	default:
		return fmt.Sprintf("checkpoint at seq %d covering %d..%d: %s", p.Seq, p.From, p.To, p.Detail)
	}
}

// Verification is what Verify found.
type Verification struct {
	// Last is the stream's last sequence when verification began; the
	// messages after it are not read.
	Last uint64 `json:"last"`
	// Messages is the number of messages read.
	Messages uint64 `json:"messages"`
	// Checkpoints is the number of valid checkpoints in the chain.
	Checkpoints int `json:"checkpoints"`
	// Covered is the To of the last valid checkpoint: every sequence
	// 1..Covered is checked when Problems is empty.
	Covered uint64 `json:"covered"`
	// Uncovered is the number of messages after Covered.
	Uncovered uint64 `json:"uncovered"`
	// Head is the hex digest of the last valid checkpoint: compare it with
	// one kept elsewhere to detect a log cut back to an older checkpoint.
	Head string `json:"head,omitempty"`
	// Problems are the findings in sequence order; none means the log is
	// the one the checkpoints vouch for.
	Problems []Problem `json:"problems,omitempty"`
	// Truncated is set when more problems were found than reported.
	Truncated bool `json:"truncated,omitempty"`
}

// OK reports whether nothing was found.
func (v *Verification) OK() bool { return len(v.Problems) == 0 }

// Summary is a one-line account.
func (v *Verification) Summary() string {
	if !v.OK() {
		more := ""
		if n := len(v.Problems) - 1; n > 0 || v.Truncated {
			more = " (and " + posture.Count(n, "more problem", "more problems")
			if v.Truncated {
				more += " at least"
			}
			more += ")"
		}
		return "FAIL: " + v.Problems[0].String() + more
	}
	head := ""
	if v.Head != "" {
		head = ", head " + v.Head[:16]
	}
	covered := "no checkpoint yet"
	if v.Covered > 0 {
		covered = fmt.Sprintf("verified messages 1..%d in %s", v.Covered, posture.Count(v.Checkpoints, "checkpoint", "checkpoints"))
	}
	return fmt.Sprintf("OK: %s, %s after the last checkpoint not yet covered%s", covered, posture.Count(v.Uncovered, "message", "messages"), head)
}

// Verify reads the whole log as it is stored and checks it against its
// checkpoints: each checkpoint's signature, the chain from the first one to
// the last, and every sequence each one covers. It reads the checkpoints
// first (a filtered read of their subject), then every message once, and
// keeps only one checkpoint's fingerprints at a time.
//
// Verify fails only when the log cannot be read; what it finds is in the
// Verification.
func (l *Log) Verify(ctx context.Context, opts VerifyOptions) (*Verification, error) {
	if opts.Verify == nil {
		return nil, errors.New("eventlog: Verify needs a signature check")
	}
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = 100
	}
	var msgs uint64
	v := &Verification{}
	err := retry(ctx, func(ctx context.Context) error {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return err
		}
		v.Last, msgs = info.State.LastSeq, info.State.Msgs
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: verify: %w", err)
	}
	r := &verifier{v: v, max: opts.MaxProblems}
	chain, err := l.verifyChain(ctx, opts, r)
	if err != nil {
		return nil, err
	}
	if len(chain) > 0 {
		last := chain[len(chain)-1]
		d := last.digest()
		v.Checkpoints, v.Covered, v.Head = len(chain), last.to, hex.EncodeToString(d[:])
	}
	r.chain = chain
	if msgs > 0 {
		lh := newLeafHasher()
		err = l.readRaw(ctx, 1, "", func(m rawMsg) error {
			if m.seq > v.Last {
				return errStopRead
			}
			v.Messages++
			r.upTo(m.seq - 1)
			l := lh.leaf(m.seq, m.subject, m.data)
			r.visit(m.seq, &l)
			if m.seq == v.Last || m.pending == 0 {
				return errStopRead
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("eventlog: verify: %w", err)
		}
	}
	r.upTo(v.Last)
	r.sort()
	return v, nil
}

// verifyChain reads the checkpoints in order and returns the chain of
// valid ones, reporting those that are not and the breaks in the chain. A
// break re-anchors the chain at the next valid checkpoint, so that the
// ranges after it are still checked.
func (l *Log) verifyChain(ctx context.Context, opts VerifyOptions, r *verifier) ([]*checkpointAt, error) {
	last, err := l.LastSubjectSeq(ctx, posture.SubjectCheckpoint)
	if err != nil || last == 0 {
		return nil, err
	}
	var chain []*checkpointAt
	from, prev := uint64(1), [sha256.Size]byte{}
	err = l.readRaw(ctx, 1, l.prefix+posture.SubjectCheckpoint, func(m rawMsg) error {
		if m.seq > r.v.Last {
			return errStopRead
		}
		cp, err := parseCheckpoint(m.seq, m.data)
		if err == nil {
			if err = opts.Verify(cp.statement(), cp.sig); err != nil {
				err = fmt.Errorf("signature does not verify with the CA certificate: %w", err)
			}
		}
		switch {
		case err != nil:
			r.add(Problem{Kind: BadCheckpoint, Seq: m.seq, Last: m.seq, Detail: err.Error()})
		case cp.from < from:
			r.add(Problem{Kind: BadCheckpoint, Seq: m.seq, Last: m.seq,
				Detail: fmt.Sprintf("covers %s, which an earlier checkpoint covers already", cp.rangeString())})
		default:
			if cp.from > from {
				r.add(Problem{Kind: BrokenChain, Seq: m.seq, Last: m.seq, From: cp.from, To: cp.to,
					Detail: fmt.Sprintf("no valid checkpoint covers %d..%d before it (one was deleted or replaced)", from, cp.from-1)})
			} else if cp.prev != prev {
				r.add(Problem{Kind: BrokenChain, Seq: m.seq, Last: m.seq, From: cp.from, To: cp.to,
					Detail: "it chains to a checkpoint that is not the one before it in the log (one was deleted or replaced)"})
			}
			chain = append(chain, &checkpointAt{checkpoint: cp, seq: m.seq})
			from, prev = cp.to+1, cp.digest()
		}
		if m.seq >= last || m.pending == 0 {
			return errStopRead
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: verify checkpoints: %w", err)
	}
	return chain, nil
}

// checkpointAt is a checkpoint of the chain and where it is stored.
type checkpointAt struct {
	*checkpoint
	seq  uint64
	root rootHash // accumulated while its range is read
	bad  bool     // a fingerprint of its range differed
}

// verifier checks each sequence, in order, against the checkpoint that
// covers it.
type verifier struct {
	v     *Verification
	max   int
	chain []*checkpointAt
	i     int    // the checkpoint of the next sequence, or the first after it
	next  uint64 // the next sequence to visit
}

// upTo visits the sequences before a message that the stream does not
// hold, up to and including seq.
func (r *verifier) upTo(seq uint64) {
	if r.next == 0 {
		r.next = 1
	}
	for r.next <= seq {
		r.visit(r.next, nil)
	}
}

// visit checks sequence seq, whose leaf is l (nil: not in the stream).
func (r *verifier) visit(seq uint64, l *leaf) {
	r.next = seq + 1
	for r.i < len(r.chain) && seq > r.chain[r.i].to {
		r.i++
	}
	if r.i == len(r.chain) || seq < r.chain[r.i].from {
		// Not covered: after the last checkpoint, or in a break of the
		// chain (reported with the checkpoint after it).
		if l == nil {
			r.add(Problem{Kind: Missing, Seq: seq, Last: seq})
		} else if r.v.Covered < seq {
			r.v.Uncovered++
		}
		return
	}
	c := r.chain[r.i]
	if seq == c.from {
		c.root = newRootHash(c.prev)
	}
	var got []byte
	if l != nil {
		c.root.add(*l)
		got = l[:fingerprintSize]
	} else {
		c.root.add(leaf{})
		got = make([]byte, fingerprintSize)
	}
	want := c.fingerprint(seq)
	wantAbsent := bytes.Equal(want, make([]byte, fingerprintSize))
	p := Problem{Seq: seq, Last: seq, Checkpoint: c.seq, From: c.from, To: c.to}
	switch {
	case l == nil && wantAbsent:
		p.Kind = Missing
	case l == nil:
		p.Kind = Deleted
	case wantAbsent:
		p.Kind = Inserted
	case !bytes.Equal(got, want):
		p.Kind = Altered
	}
	if p.Kind != "" {
		c.bad = c.bad || p.Kind != Missing
		r.add(p)
	}
	if seq == c.to && !c.bad {
		if c.root.sum() != c.checkpoint.root {
			// Every fingerprint matches and the root does not: a change
			// that collides in 64 bits. The range is wrong, somewhere.
			r.add(Problem{Kind: Altered, Seq: c.from, Last: c.to, Checkpoint: c.seq, From: c.from, To: c.to,
				Detail: "the range's root does not match although each fingerprint does"})
		}
	}
}

// add records a problem, merging it into the previous one when it extends
// the same run.
func (r *verifier) add(p Problem) {
	ps := r.v.Problems
	if n := len(ps); n > 0 {
		q := &ps[n-1]
		if q.Kind == p.Kind && q.Checkpoint == p.Checkpoint && q.Last+1 == p.Seq && p.Detail == "" && q.Detail == "" {
			q.Last = p.Last
			return
		}
	}
	if len(ps) >= r.max {
		r.v.Truncated = true
		return
	}
	r.v.Problems = append(ps, p)
}

// sort orders the problems by sequence: the chain's come first, when
// they are found, ahead of the sequences read afterwards.
func (r *verifier) sort() {
	slices.SortStableFunc(r.v.Problems, func(a, b Problem) int { return cmp.Compare(a.Seq, b.Seq) })
}
