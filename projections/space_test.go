package projections_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// fakeDisk is a file system in memory that says how much space is free,
// and answers ENOSPC to writes of write-ahead log files while full is on.
type fakeDisk struct {
	*errorfs.FS
	free atomic.Int64
	full *errorfs.Toggle
}

func newFakeDisk(free int64) *fakeDisk {
	d := &fakeDisk{full: &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && op.Kind != errorfs.OpFileClose {
			return syscall.ENOSPC
		}
		return nil
	})}}
	d.FS = errorfs.Wrap(vfs.NewMem(), d.full)
	d.free.Store(free)
	return d
}

func (d *fakeDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: uint64(d.free.Load()), TotalBytes: 1 << 40}, nil
}

// sliceSource is a log in memory: it delivers its events one at a time,
// then waits for ctx.
type sliceSource []posture.Event

func (l sliceSource) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	for _, e := range l {
		if e.Seq < from {
			continue
		}
		if err := fn([]posture.Event{e}); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return ctx.Err()
}

// eventsToFill are the recorded events and then setting changes, enough to
// fill blocks of the write-ahead log (its writes are asynchronous).
func eventsToFill(t *testing.T) (events []posture.Event, recorded int) {
	events = readEvents(t, "foundation.events.jsonl")
	recorded = len(events)
	for i := range 3000 {
		e := events[0]
		e.ID, e.Seq = fmt.Sprintf("setting-%d", i), uint64(len(events)+1)
		e.Data = []byte(fmt.Sprintf(`{"mfaGraceSeconds":%d,"apiSessionTimeoutSeconds":1800}`, 300+i))
		events = append(events, e)
	}
	return events, recorded
}

func wantDump(t *testing.T, events []posture.Event) string {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	replay(t, s, events, 64)
	return dump(t, s)
}

// expectPaused checks that a barrier on an event not applied yet answers at
// once with a 503 out-of-space error, and that Space says so.
func expectPaused(t *testing.T, s *projections.Store, seq uint64) {
	t.Helper()
	start := time.Now()
	err := s.WaitFor(context.Background(), seq)
	if posture.CodeOf(err) != posture.CodeUnavailable || !errors.Is(err, posture.ErrOutOfSpace) {
		t.Fatalf("WaitFor on a paused store: %v, want SERVICE_UNAVAILABLE out of space", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("WaitFor on a paused store took %v", took)
	}
	if sp := s.Space(); !sp.Full || !strings.Contains(sp.Reason, "out of disk space") {
		t.Fatalf("Space of a paused store: %+v", sp)
	}
	t.Logf("paused: %v", err)
}

// TestPauseBelowReserve: below the reserve the store stops applying before
// it writes, answers barriers with 503 at once, and resumes by itself from
// its cursor once space is back.
func TestPauseBelowReserve(t *testing.T) {
	events, recorded := eventsToFill(t)
	disk := newFakeDisk(1 << 30)
	s, err := projections.Open(projections.Options{Dir: "db", FS: disk, DiskReserve: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	replay(t, s, events[:recorded], 1)

	disk.free.Store(10 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sliceSource(events)) }()
	last := uint64(len(events))
	waitUntil(t, func() bool { return s.Space().Full })
	expectPaused(t, s, last)
	if c := s.Cursor(); c != uint64(recorded) {
		t.Fatalf("cursor %d: a store below its reserve applied events", c)
	}

	disk.free.Store(1 << 30)
	expectResumed(t, s, events, cancel, done)
}

// TestHoldWritesOnENOSPC: without a reserve, a write of Pebble's
// write-ahead log meets ENOSPC (a fault-injecting file system). Pebble must
// not see it (it panics on a failed log write): the write is held, the
// store pauses and answers barriers with 503, and once space is back the
// write goes through and the store catches up, nothing lost.
func TestHoldWritesOnENOSPC(t *testing.T) {
	events, recorded := eventsToFill(t)
	disk := newFakeDisk(1 << 30)
	s, err := projections.Open(projections.Options{Dir: "db", FS: disk})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, s, events[:recorded], 1)

	disk.free.Store(0)
	disk.full.On()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, sliceSource(events)) }()
	last := uint64(len(events))
	waitUntil(t, func() bool { return s.Space().Full })
	expectPaused(t, s, last)

	disk.full.Off()
	disk.free.Store(1 << 30)
	expectResumed(t, s, events, cancel, done)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
	}
}

// expectResumed waits, once space is back, until the store running events
// leaves its pause and applies them all, stops it (cancel, then its Run's
// error from done), and compares its state with a store that never paused.
func expectResumed(t *testing.T, s *projections.Store, events []posture.Event, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	waitUntil(t, func() bool { return !s.Space().Full })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if err := s.WaitFor(wctx, uint64(len(events))); err != nil {
		t.Fatalf("after the space came back: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if dump(t, s) != wantDump(t, events) {
		t.Fatal("the state after the pause differs from a store that never met a full disk")
	}
}
