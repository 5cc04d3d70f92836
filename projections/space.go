package projections

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
)

// A full disk under the projection is met in two ways, and in neither does
// Pebble see an error (a write error is fatal to a Pebble database: it
// panics, and the process dies):
//
//   - a reserve (Options.DiskReserve): while the file system of the store
//     has less free, Apply commits nothing and the store pauses. Run waits
//     until the space is back, then resumes from the cursor: nothing is
//     skipped, and the log (which stops taking writes at a higher mark, see
//     eventlog) keeps what was not applied yet;
//   - should a write meet ENOSPC anyway (another process filled the disk in
//     between, or no reserve), the store's file system (vfs.OnDiskFull)
//     holds that write, and every later one, until the space is back, and
//     then retries it. Pebble stalls instead of failing; queries keep
//     answering from what was applied.
//
// While paused, WaitFor answers at once with a 503 out-of-space error
// instead of waiting, and Space says why.

// Space is the state of the projection's disk.
type Space struct {
	Dir     string
	Free    int64 // bytes free for an unprivileged writer (-1 when unknown)
	Reserve int64 // bytes kept free: the store pauses below it
	Full    bool  // the store pauses for lack of space
	Reason  string
}

// spaceWait is how often a paused store looks at the disk again.
const spaceWait = time.Second

// diskGuard measures the free space of a store's file system.
type diskGuard struct {
	fs      vfs.FS
	dir     string
	reserve int64 // pause below it (0: only on ENOSPC)
	resume  int64 // resume at or above it (at least room for a write-ahead log file)
	free    atomic.Int64
	closing chan struct{} // closed by Close: Run stops waiting
}

// measure reads the free space (-1 when the file system cannot tell).
func (g *diskGuard) measure() int64 {
	du, err := g.fs.GetDiskUsage(g.dir)
	if err != nil {
		g.free.Store(-1)
		return -1
	}
	g.free.Store(int64(du.AvailBytes))
	return int64(du.AvailBytes)
}

// short reports whether the disk is below the reserve.
func (g *diskGuard) short() bool {
	if g.reserve <= 0 {
		return false
	}
	free := g.measure()
	return free >= 0 && free < g.reserve
}

// enough reports whether a paused store may resume.
func (g *diskGuard) enough() bool {
	free := g.measure()
	return free < 0 || free >= g.resume
}

// checkSpace pauses the store when its disk is below the reserve.
func (s *Store) checkSpace() error {
	if !s.disk.short() {
		return nil
	}
	return s.pause(fmt.Sprintf("the projection is out of disk space: %s free in %s, less than the %s reserve; it resumes applying the log once %s are free",
		mib(s.disk.free.Load()), s.disk.dir, mib(s.disk.reserve), mib(s.disk.resume)))
}

// pause marks the store paused for lack of space and wakes the waiters.
// Callers of WaitFor get a short message; the reason, with paths and sizes,
// is logged and in Space.
func (s *Store) pause(reason string) *posture.Error {
	err := &posture.Error{Code: posture.CodeUnavailable, Err: fmt.Errorf("%w: %s", posture.ErrOutOfSpace, reason),
		Message: "the projection is out of disk space: it applies no event until space is freed (a write of this request may be in the log, not applied yet); try again later"}
	msg := reason
	s.mu.Lock()
	first := s.paused == nil
	s.paused, s.pausedReason = err, reason
	s.wakeLocked(true)
	s.mu.Unlock()
	if first {
		s.log.Error("projections: stopped applying the log: "+msg, "dir", s.disk.dir, "free", s.disk.free.Load(), "reserve", s.disk.reserve)
	}
	return err
}

// waitForSpace waits until a paused store's disk has room again (or ctx
// ends, or stop is closed), then lifts the pause.
func (s *Store) waitForSpace(ctx context.Context, stop <-chan struct{}) error {
	t := time.NewTicker(spaceWait)
	defer t.Stop()
	for !s.disk.enough() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return errors.New("projections: closed")
		case <-t.C:
		}
	}
	s.mu.Lock()
	s.paused = nil
	s.mu.Unlock()
	s.log.Info("projections: disk space is back: applying the log again", "dir", s.disk.dir, "free", s.disk.free.Load())
	return nil
}

// diskFull is called by the file system when a write met ENOSPC; every
// write waits until it returns, and the failed one is retried once after.
// It holds them until the space is back, even past Close (failing them
// would crash the process; Close leaves the database alone meanwhile).
func (s *Store) diskFull() {
	s.heldWrites.Store(true)
	defer s.heldWrites.Store(false)
	s.disk.measure()
	s.pause(fmt.Sprintf("the projection is out of disk space: a write in %s failed (no space left on device, %s free); its writes wait and resume once %s are free",
		s.disk.dir, mib(s.disk.free.Load()), mib(s.disk.resume)))
	_ = s.waitForSpace(context.Background(), nil)
}

// Space reports the state of the projection's disk, measured now.
func (s *Store) Space() Space {
	s.disk.measure()
	sp := Space{Dir: s.disk.dir, Free: s.disk.free.Load(), Reserve: s.disk.reserve}
	s.mu.Lock()
	if s.paused != nil {
		sp.Full, sp.Reason = true, s.pausedReason
	}
	s.mu.Unlock()
	return sp
}

func mib(b int64) string {
	if b < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
