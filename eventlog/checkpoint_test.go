package eventlog_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/highwayhash"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
)

// testKey signs and verifies checkpoints as the CA does, with a P-256 key.
type testKey struct{ k *ecdsa.PrivateKey }

func newTestKey(t testing.TB) testKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{k}
}

func (k testKey) sign(msg []byte) ([]byte, error) {
	sum := sha256.Sum256(msg)
	return ecdsa.SignASN1(rand.Reader, k.k, sum[:])
}

func (k testKey) verify(msg, sig []byte) error {
	sum := sha256.Sum256(msg)
	if !ecdsa.VerifyASN1(&k.k.PublicKey, sum[:], sig) {
		return errors.New("bad signature")
	}
	return nil
}

// runCheckpointer runs a Checkpointer on l until the test ends.
func runCheckpointer(t *testing.T, l *eventlog.Log, key testKey, every int, interval time.Duration) *eventlog.Checkpointer {
	t.Helper()
	c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: every, Interval: interval, Sign: key.sign, Verify: key.verify, KeyID: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("checkpointer: %v", err)
		}
	})
	return c
}

func appendN(t *testing.T, l *eventlog.Log, subject string, n int) (last uint64) {
	t.Helper()
	for i := range n {
		seq, err := l.Append(context.Background(), event(subject, i))
		if err != nil {
			t.Fatal(err)
		}
		last = seq
	}
	return last
}

func waitCovered(t *testing.T, c *eventlog.Checkpointer, seq uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, seq); err != nil {
		t.Fatalf("no checkpoint covers %d (covered: %d): %v", seq, c.Covered(), err)
	}
}

func verify(t *testing.T, l *eventlog.Log, key testKey) *eventlog.Verification {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := l.Verify(ctx, eventlog.VerifyOptions{Verify: key.verify})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deleteMsg deletes the message at seq through the JetStream API, as an
// administrator of the stream can.
func deleteMsg(t *testing.T, l *eventlog.Log, seq uint64) {
	t.Helper()
	ctx := context.Background()
	s, err := l.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
}

func wantProblem(t *testing.T, v *eventlog.Verification, kind eventlog.ProblemKind, seq uint64) eventlog.Problem {
	t.Helper()
	if v.OK() {
		t.Fatalf("verification passed: %s", v.Summary())
	}
	p := v.Problems[0]
	if p.Kind != kind || p.Seq != seq || p.Checkpoint == 0 || p.From > seq || p.To < seq {
		t.Fatalf("first problem %+v (%s), want sequence %d %s proven by a checkpoint covering it; all: %v", p, p, seq, kind, v.Problems)
	}
	return p
}

// A log with checkpoints verifies; deleting one message through the
// JetStream API, or replacing one with an altered copy, fails and names its
// sequence and the checkpoint that proves it.
func TestCheckpointsVerify(t *testing.T) {
	key := newTestKey(t)
	l := openLog(t, t.TempDir())
	defer l.Close()
	c := runCheckpointer(t, l, key, 5, time.Hour)
	last := appendN(t, l, "a", 23)
	waitCovered(t, c, 20)

	v := verify(t, l, key)
	if !v.OK() {
		t.Fatalf("untouched log: %s %v", v.Summary(), v.Problems)
	}
	if v.Covered < 20 || v.Checkpoints < 4 || v.Messages != v.Last || v.Last < last {
		t.Fatalf("untouched log: %+v", v)
	}
	if !strings.HasPrefix(v.Summary(), "OK: verified messages 1..") {
		t.Errorf("summary %q", v.Summary())
	}

	// A checkpoint's signature covers its fingerprints: a range is named
	// even when the deleted message is itself a checkpoint.
	deleteMsg(t, l, 7)
	v = verify(t, l, key)
	p := wantProblem(t, v, eventlog.Deleted, 7)
	t.Log(v.Summary(), v.Problems)
	if want := "sequence 7 deleted or damaged (checkpoint at seq"; !strings.HasPrefix(p.String(), want) {
		t.Errorf("problem %q, want it to start with %q", p, want)
	}
	if !strings.HasPrefix(v.Summary(), "FAIL: sequence 7 deleted or damaged") {
		t.Errorf("summary %q", v.Summary())
	}
}

func TestCheckpointsRepublishedAltered(t *testing.T) {
	key := newTestKey(t)
	l := openLog(t, t.TempDir())
	defer l.Close()
	appendN(t, l, "a", 12) // before the checkpoints: 8 is an event
	c := runCheckpointer(t, l, key, 5, time.Hour)
	waitCovered(t, c, 10)

	// Message 8 deleted and published again with one field changed: the
	// copy lands at the end of the stream, and 8 is gone.
	ctx := context.Background()
	s, err := l.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, 8)
	if err != nil {
		t.Fatal(err)
	}
	altered := strings.Replace(string(m.Data), `"n":`, `"n":1`, 1)
	if altered == string(m.Data) {
		t.Fatalf("nothing to alter in %s", m.Data)
	}
	if err := s.DeleteMsg(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if _, err := l.JetStream().PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Data: []byte(altered)}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, verify(t, l, key), eventlog.Deleted, 8)
}

// A checkpoint signed with another key is named, and does not stand in for
// the real one.
func TestCheckpointForged(t *testing.T) {
	key := newTestKey(t)
	l := openLog(t, t.TempDir())
	defer l.Close()
	appendN(t, l, "a", 3)
	c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 3, Sign: newTestKey(t).sign})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := errgroup.Group{}
	g.Go(func() error { return c.Run(ctx) })
	waitCovered(t, c, 3)
	cancel()
	if err := g.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	v := verify(t, l, key)
	if v.OK() || v.Problems[0].Kind != eventlog.BadCheckpoint || v.Problems[0].Seq != 4 {
		t.Fatalf("forged checkpoint: %s %+v", v.Summary(), v.Problems)
	}
}

// Checkpoints every interval cover a quiet log's last events; several
// checkpointers on a three-server cluster land one checkpoint per range.
func TestCheckpointsClusterOnePerRange(t *testing.T) {
	key := newTestKey(t)
	cl := natstest.Start(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var logs []*eventlog.Log
	var cps []*eventlog.Checkpointer
	for i := range 3 {
		l, err := eventlog.Open(ctx, eventlog.Options{URLs: []string{cl.URLs[i]}, Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		logs = append(logs, l)
		cps = append(cps, runCheckpointer(t, l, key, 50, 200*time.Millisecond))
	}
	g := errgroup.Group{}
	for i, l := range logs {
		g.Go(func() error {
			for n := range 60 {
				if _, err := l.Append(ctx, event("n"+string(rune('a'+i)), n)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	last, err := logs[0].LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cps {
		waitCovered(t, c, 180) // the interval covers what the count does not
	}
	v := verify(t, logs[0], key)
	t.Log(v.Summary())
	if !v.OK() {
		t.Fatalf("%s %v", v.Summary(), v.Problems)
	}
	// Every checkpoint message in the log is in the chain: none was a
	// second one for the same range.
	var onSubject int
	if err := logs[0].Read(ctx, 1, 0, func(b []posture.Event) error {
		for _, e := range b {
			if e.Type == posture.TypeLogCheckpointed {
				onSubject++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if onSubject != v.Checkpoints || v.Covered < 180 || last < 180 {
		t.Fatalf("%d checkpoints in the log, %d in the chain (covered %d, last %d)", onSubject, v.Checkpoints, v.Covered, last)
	}
}

// A message whose bytes are edited in the store's files, its sequence kept,
// is named too.
func TestCheckpointsEditedOnDisk(t *testing.T) {
	key := newTestKey(t)
	dir := t.TempDir()
	l := openLog(t, dir)
	appendN(t, l, "a", 10)
	func() {
		c := runCheckpointer(t, l, key, 10, time.Hour)
		waitCovered(t, c, 10)
	}()
	l.Close()

	var blocks []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".blk") {
			blocks = append(blocks, path)
		}
		return err
	})
	if err != nil || len(blocks) != 1 {
		t.Fatalf("message blocks %v: %v", blocks, err)
	}
	data, err := os.ReadFile(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	// The sixth event's data is {"n":5}: make it {"n":6}, and set the
	// record's checksum as the store computes it, as someone who edits
	// the files on purpose would.
	i := bytes.Index(data, []byte(`{"n":5}`))
	if i < 0 || bytes.Count(data, []byte(`{"n":5}`)) != 1 {
		t.Fatal("the sixth event is not in the block once")
	}
	data[i+5] = '6'
	index := strings.TrimSuffix(filepath.Base(blocks[0]), ".blk")
	fixChecksum(t, data, i, "POSTURED-"+index)
	if err := os.WriteFile(blocks[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir)
	defer l.Close()
	if e, err := l.Get(context.Background(), 6); err != nil || !strings.Contains(string(e.Data), `"n":6`) {
		t.Fatalf("the store does not serve the edited message: %v %s", err, e.Data)
	}
	v := verify(t, l, key)
	t.Log(v.Summary())
	if v.OK() || v.Problems[0].Seq != 6 || v.Problems[0].Kind != eventlog.Altered {
		t.Fatalf("edited on disk: %s %+v", v.Summary(), v.Problems)
	}
}

// fixChecksum recomputes the checksum of the JetStream file store record
// of a message block that holds offset at: records are total_len(4, high
// bit: has headers) seq(8) ts(8) subj_len(2) subj [hdr_len(4) hdr] msg
// hash(8), the hash a HighwayHash-64 keyed with the SHA-256 of
// "<stream>-<block index>".
func fixChecksum(t *testing.T, data []byte, at int, hashKey string) {
	t.Helper()
	const hbit = 1 << 31
	le := binary.LittleEndian
	for off := 0; off+22 <= len(data); {
		l := le.Uint32(data[off:])
		rl := int(l &^ hbit)
		if rl < 30 || off+rl > len(data) {
			t.Fatalf("record at %d: length %d", off, rl)
		}
		if at < off || at >= off+rl {
			off += rl
			continue
		}
		rec := data[off : off+rl]
		slen := int(le.Uint16(rec[20:]))
		key := sha256.Sum256([]byte(hashKey))
		hh, err := highwayhash.New64(key[:])
		if err != nil {
			t.Fatal(err)
		}
		hh.Write(rec[4:20])
		hh.Write(rec[22 : 22+slen])
		body := rec[22+slen : rl-8]
		if l&hbit != 0 {
			hlen := int(le.Uint32(body))
			hh.Write(body[4 : 4+hlen])
			body = body[4+hlen:]
		}
		hh.Write(body)
		copy(rec[rl-8:], hh.Sum(nil))
		return
	}
	t.Fatalf("no record holds offset %d", at)
}

// A Checkpointer fed by a consumer (as the projection's feeds it in
// postured) covers the log whether that consumer starts before the last
// checkpoint's end, after it (the sequences between are read once), or at
// the end of an idle log.
func TestCheckpointerFed(t *testing.T) {
	key := newTestKey(t)
	l := openLog(t, t.TempDir())
	defer l.Close()
	// run runs a fed Checkpointer with a consumer from seq until it covers
	// upTo.
	run := func(from, upTo uint64) {
		t.Helper()
		c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 10, Interval: 50 * time.Millisecond,
			Sign: key.sign, Verify: key.verify, Fed: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var g errgroup.Group
		g.Go(func() error { return c.Run(ctx) })
		g.Go(func() error { return c.Consume(ctx, from, func([]posture.Event) error { return nil }) })
		waitCovered(t, c, upTo)
		cancel()
		if err := g.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	run(1, appendN(t, l, "a", 25))
	last := appendN(t, l, "a", 7)
	run(last-3, last) // ahead of the last checkpoint
	last = appendN(t, l, "a", 3)
	run(last+1, last) // at the end, nothing delivered
	v := verify(t, l, key)
	if !v.OK() || v.Covered < last {
		t.Fatalf("%s %v", v.Summary(), v.Problems)
	}
}

// A forged checkpoint after the real ones does not stop checkpoints: a
// Checkpointer that starts after it goes on from the last valid one, and
// verification names only the forgeries (the forger's checkpoint of 6..10,
// and the last one it appends as it stops, of 11..12).
func TestCheckpointerSkipsForgery(t *testing.T) {
	key := newTestKey(t)
	l := openLog(t, t.TempDir())
	defer l.Close()
	runFor := func(k testKey, verify bool, upTo uint64) {
		t.Helper()
		opts := eventlog.CheckpointOptions{Every: 5, Interval: time.Hour, Sign: k.sign}
		if verify {
			opts.Verify = k.verify
		}
		c, err := eventlog.NewCheckpointer(l, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var g errgroup.Group
		g.Go(func() error { return c.Run(ctx) })
		waitCovered(t, c, upTo)
		cancel()
		if err := g.Wait(); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	appendN(t, l, "a", 5)
	runFor(key, true, 5) // a real checkpoint of 1..5 at 6
	appendN(t, l, "a", 5)
	runFor(newTestKey(t), false, 10) // forged ones of 6..10 at 12 and of 11..12 at 13
	appendN(t, l, "a", 5)
	runFor(key, true, 15) // 6..10 again, then 11..15
	v := verify(t, l, key)
	t.Log(v.Summary())
	if len(v.Problems) != 2 || v.Problems[0].Kind != eventlog.BadCheckpoint || v.Problems[0].Seq != 12 ||
		v.Problems[1].Kind != eventlog.BadCheckpoint || v.Problems[1].Seq != 13 || v.Covered < 15 {
		t.Fatalf("%s %+v", v.Summary(), v.Problems)
	}
}
