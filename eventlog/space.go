package eventlog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sys/unix"

	"github.com/seed-0809debe/posture"
)

// A full disk under the embedded server is handled in two ways:
//
//   - a reserve: an append is refused (503, SERVICE_UNAVAILABLE, out of
//     disk space) while the store's file system has less than
//     Options.DiskReserve free, before anything is written. The
//     projection, which stops at a lower mark, still has room for what the
//     log holds, and nats-server does not meet ENOSPC;
//   - should it meet ENOSPC anyway (another process filled the disk in
//     between, or no reserve), nats-server marks the stream with a write
//     error for good: it answers no publish any more until it is
//     restarted. The guard hears of it from the server's error log, refuses
//     appends at once, and once the reserve (at least minRestartFree) is
//     free again restarts JetStream on the same store: the stream is
//     recovered from its files, with every acknowledged write (each is
//     written to the file before it is acknowledged), and appends resume.
//
// An external server's "insufficient resources" and "no space left" answers
// are out of space too, retried for outOfSpaceGrace (another server of the
// cluster may take over) and then answered 503.

// Space is the state of the log's disk.
type Space struct {
	Dir     string // the store directory (empty for an external server)
	Free    int64  // bytes free for an unprivileged writer (-1 when unknown)
	Reserve int64  // bytes kept free: appends stop below it
	Full    bool   // appends are refused for lack of space
	Reason  string // why, when Full
}

// spaceCheck is how long a measure of the free space is trusted.
const spaceCheck = 100 * time.Millisecond

// spaceWatch is how often the watcher looks at the server and the disk.
const spaceWatch = time.Second

// minRestartFree is the least free space the guard waits for before it
// restarts JetStream after a write error for lack of space.
const minRestartFree = 1 << 20

// guard is the reserve and JetStream watch of an embedded log.
type guard struct {
	dir     string
	reserve int64
	ns      *server.Server
	jsCfg   server.JetStreamConfig
	log     *slog.Logger

	mu       sync.Mutex
	checked  time.Time
	free     int64
	storeErr string // the server's write error for lack of space, until restarted
	full     bool   // the state last reported, for the transitions' log lines
}

// freeBytes is the space an unprivileged writer may use on dir's file
// system.
func freeBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, fmt.Errorf("eventlog: statfs %s: %w", dir, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// serverError hears the embedded server's error lines: one that says the
// disk is full means the stream stopped writing.
func (g *guard) serverError(msg string) {
	if !strings.Contains(msg, "no space left") {
		return
	}
	g.mu.Lock()
	if g.storeErr == "" {
		g.storeErr = msg
	}
	g.mu.Unlock()
	g.state(time.Now())
}

// state measures the free space (at most every spaceCheck) and returns the
// log's Space.
func (g *guard) state(now time.Time) Space {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.Sub(g.checked) >= spaceCheck {
		if free, err := freeBytes(g.dir); err == nil {
			g.free = free
		}
		g.checked = now
	}
	sp := Space{Dir: g.dir, Free: g.free, Reserve: g.reserve}
	switch {
	case g.storeErr != "" || (g.ns != nil && !g.ns.JetStreamEnabled()):
		sp.Full = true
		sp.Reason = fmt.Sprintf("the event log is out of disk space: its store failed to write (%s); %s free in %s, writes resume once %s are free",
			g.storeErr, mib(g.free), g.dir, mib(max(g.reserve, minRestartFree)))
	case g.reserve > 0 && g.free < g.reserve:
		sp.Full = true
		sp.Reason = fmt.Sprintf("the event log is out of disk space: %s free in %s, less than the %s reserve; writes resume once space is freed",
			mib(g.free), g.dir, mib(g.reserve))
	}
	if sp.Full != g.full {
		g.full = sp.Full
		if sp.Full {
			g.log.Error("eventlog: refusing writes: "+sp.Reason, "dir", g.dir, "free", sp.Free, "reserve", sp.Reserve)
		} else {
			g.log.Info("eventlog: disk space is back: writes resume", "dir", g.dir, "free", sp.Free, "reserve", sp.Reserve)
		}
	}
	return sp
}

// watch restarts JetStream after its store failed for lack of space, once
// space is free again. It runs until done is closed.
func (g *guard) watch(done <-chan struct{}) {
	t := time.NewTicker(spaceWatch)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			g.step(now)
		}
	}
}

func (g *guard) step(now time.Time) {
	sp := g.state(now)
	g.mu.Lock()
	failed := g.storeErr != ""
	g.mu.Unlock()
	enabled := g.ns.JetStreamEnabled()
	if (!failed && enabled) || sp.Free < max(g.reserve, minRestartFree) {
		return
	}
	// What a restart of the process would do: the stream is loaded from
	// its files again, without the write error.
	g.log.Warn("eventlog: restarting JetStream on its store after the disk was full", "dir", g.dir, "free", sp.Free)
	if enabled {
		if err := g.ns.ShutdownJetStream(); err != nil {
			g.log.Error("eventlog: JetStream could not be stopped", "dir", g.dir, "err", err)
			return
		}
	}
	cfg := g.jsCfg
	if err := g.ns.EnableJetStream(&cfg); err != nil {
		g.log.Error("eventlog: JetStream could not be restarted", "dir", g.dir, "err", err)
		return
	}
	g.mu.Lock()
	g.storeErr = ""
	g.mu.Unlock()
	g.state(now.Add(spaceCheck))
}

// Space reports the state of the log's disk. For an external server it is
// never Full: the server answers for itself.
func (l *Log) Space() Space {
	if l.guard == nil {
		return Space{Free: -1}
	}
	return l.guard.state(time.Now())
}

// checkSpace fails with an out-of-space error when the embedded log may not
// write.
func (l *Log) checkSpace() error {
	if l.guard == nil {
		return nil
	}
	if sp := l.guard.state(time.Now()); sp.Full {
		return outOfSpace(sp.Reason, nil)
	}
	return nil
}

// outOfSpace is the error of an append refused for lack of space. Callers
// see a short message; the details (paths, sizes, the server's error) are
// in the ERROR line the guard logs, in Space and in the wrapped error.
func outOfSpace(detail string, err error) error {
	cause := fmt.Errorf("%w: %s", posture.ErrOutOfSpace, detail)
	if err != nil {
		cause = errors.Join(cause, err)
	}
	return &posture.Error{Code: posture.CodeUnavailable, Err: cause,
		Message: "the event log is out of disk space: the write was not stored; writes resume once space is freed, try again later"}
}

// isOutOfSpace reports a server's refusal for lack of storage:
// insufficient resources, storage resources exceeded, or a store failure
// that says "no space left".
func isOutOfSpace(err error) bool {
	if err == nil {
		return false // without a target for errors.As, which would escape
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case jsErrInsufficientResources, jsErrStorageResourcesExceeded:
		return true
	case jsErrStreamStoreFailed:
		return strings.Contains(apiErr.Description, "no space left")
	}
	return false
}

// Error codes of nats-server (server.JSInsufficientResourcesErr and so on).
const (
	jsErrInsufficientResources    = jetstream.ErrorCode(server.JSInsufficientResourcesErr)
	jsErrStorageResourcesExceeded = jetstream.ErrorCode(server.JSStorageResourcesExceededErr)
	jsErrStreamStoreFailed        = jetstream.ErrorCode(server.JSStreamStoreFailedF)
)

func mib(b int64) string {
	if b < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}
