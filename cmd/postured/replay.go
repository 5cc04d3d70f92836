package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/cmd/postured/datadir"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// logFlags name the event log of the ops commands: the embedded log of a
// stopped node's data directory, or a running cluster.
type logFlags struct {
	DataDir        string   `default:"./data" help:"Data directory of a stopped node (its embedded log is opened)."`
	NatsURL        []string `name:"nats-url" sep:"," help:"NATS JetStream server or cluster URLs of a running deployment (or a node's --nats-listen)."`
	StreamReplicas int      `default:"1" hidden:""`
	natsFlags
}

func (f logFlags) open(ctx context.Context) (*offlineLog, error) {
	return f.openStore(ctx, false, false)
}

// openToWrite is open for a command that appends to the log.
func (f logFlags) openToWrite(ctx context.Context) (*offlineLog, error) {
	return f.openStore(ctx, false, true)
}

// hasEmbeddedLog fails, saying where it looked, when --data-dir holds no
// embedded log.
func (f logFlags) hasEmbeddedLog() error {
	dir := filepath.Join(f.DataDir, "nats")
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("no event log at %s (use --data-dir of a stopped node, or --nats-url): %w", dir, err)
	}
	return nil
}

// openStore is open; with copyStore, a stopped node's embedded store is
// copied into the data directory and the copy opened (and removed on
// Close): the embedded server repairs a damaged store as it opens it, which
// can drop messages, and what verifies the log must not change it. writes
// says the command appends (for the hint when a running node owns the
// directory).
func (f logFlags) openStore(ctx context.Context, copyStore, writes bool) (*offlineLog, error) {
	opts := eventlog.Options{URLs: f.NatsURL, Dir: filepath.Join(f.DataDir, "nats"), Replicas: f.StreamReplicas,
		Auth: f.clientAuth(), Existing: true}
	if len(f.NatsURL) != 0 {
		if err := f.checkFiles(); err != nil {
			return nil, usageError{err}
		}
		l, err := eventlog.Open(ctx, opts)
		if err != nil {
			return nil, f.connectHint(err)
		}
		return &offlineLog{Log: l}, nil
	}
	if err := f.hasEmbeddedLog(); err != nil {
		return nil, err
	}
	// The embedded store of a running node is its own: a second JetStream
	// server on the same files would corrupt it. Hold the directory's lock
	// for as long as the log is open, so that no node starts on it either.
	lock, err := datadir.Acquire(f.DataDir)
	var inUse *datadir.InUseError
	if errors.As(err, &inUse) {
		return nil, fmt.Errorf("%w: a running node owns it; %s", err, askNode(inUse.Notes, writes))
	}
	if err != nil {
		return nil, err
	}
	var scratch string
	if copyStore {
		// A copy left by a verification that was killed: no other one
		// runs while this one holds the lock.
		stale, _ := filepath.Glob(filepath.Join(f.DataDir, ".verify-*"))
		for _, d := range stale {
			os.RemoveAll(d)
		}
		if scratch, err = os.MkdirTemp(f.DataDir, ".verify-"); err == nil {
			err = os.CopyFS(filepath.Join(scratch, "nats"), ctxFS{ctx: ctx, FS: os.DirFS(opts.Dir)})
		}
		if err != nil {
			os.RemoveAll(scratch)
			lock.Release()
			return nil, fmt.Errorf("copy the event log to verify it: %w", err)
		}
		opts.Dir = filepath.Join(scratch, "nats")
	}
	l, err := eventlog.Open(ctx, opts)
	if err != nil {
		os.RemoveAll(scratch)
		lock.Release()
		return nil, err
	}
	ol := &offlineLog{Log: l, lock: lock, scratch: scratch}
	// The node's snapshots, when it kept some, spare past moments a
	// replay from the start. Opening them removes broken ones: not when
	// verifying, which reports them (InspectSnapshots) and changes nothing.
	if dir := filepath.Join(f.DataDir, "snapshots"); dirExists(dir) && !copyStore {
		if ol.snapshots, err = projections.OpenSnapshots(projections.SnapshotOptions{Dir: dir}); err != nil {
			ol.Close()
			return nil, err
		}
	}
	return ol, nil
}

// ctxFS is a file system whose reads fail once ctx ends, so that copying
// a large store stops at Ctrl-C.
type ctxFS struct {
	ctx context.Context
	fs.FS
}

func (c ctxFS) Open(name string) (fs.File, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return ctxFile{File: f, ctx: c.ctx}, nil
}

func (c ctxFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := c.ctx.Err(); err != nil {
		return nil, err
	}
	return fs.ReadDir(c.FS, name)
}

type ctxFile struct {
	fs.File
	ctx context.Context
}

func (f ctxFile) Read(p []byte) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func dirExists(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir()
}

// offlineLog is the log an ops command opened, with the data directory's
// lock and its snapshots when it opened a stopped node's store.
type offlineLog struct {
	*eventlog.Log
	lock      *datadir.Lock
	snapshots *projections.Snapshots // nil: none (or a running deployment's log)
	scratch   string                 // a copy of the store, removed on Close ("": none)
}

// Close closes the log, removes its copy, then releases the lock.
func (l *offlineLog) Close() error {
	err := l.Log.Close()
	if l.scratch != "" {
		err = errors.Join(err, os.RemoveAll(l.scratch))
	}
	l.lock.Release()
	return err
}

// cutoff says where a replay stops: after sequence toSeq (0: the end of the
// log when the replay starts), and before the first event later than until
// (zero: no time limit).
type cutoff struct {
	toSeq uint64
	until time.Time
}

// replay applies the log from the store's cursor up to the cutoff,
// calling progress after each batch. It returns the number of events
// applied.
func replay(ctx context.Context, l *eventlog.Log, store *projections.Store, c cutoff, progress func(applied, total uint64)) (uint64, error) {
	last, err := l.LastSeq(ctx)
	if err != nil {
		return 0, err
	}
	to := last
	if c.toSeq != 0 && c.toSeq < to {
		to = c.toSeq
	}
	applied, err := store.ReplayTo(ctx, l, projections.Moment{Seq: to, At: c.until}, func(cursor uint64) {
		if progress != nil {
			progress(cursor, to)
		}
	})
	return applied, explainBad(err)
}

// rebuild is replay as the replay command runs it, as a batch job into a
// store opened with openRebuilt, which it leaves flushed to disk.
func rebuild(ctx context.Context, l *eventlog.Log, store *projections.Store, c cutoff, progress func(applied, total uint64)) (uint64, error) {
	defer batchGC()()
	n, err := replay(ctx, l, store, c, progress)
	if err != nil {
		return n, err
	}
	return n, store.Flush()
}

// openRebuilt opens the fresh projection directory of a replay. It has no
// write-ahead log: a replay is kept only when complete.
func openRebuilt(dir string) (*projections.Store, error) {
	return projections.Open(projections.Options{Dir: dir, NoWAL: true})
}

// batchGC lets the heap of a batch job grow to batchHeap, or to three times
// what it holds live when that is more, before the garbage collector runs
// (by default it runs when the heap doubles): a rebuild allocates briskly
// and keeps little. Settings given in GOGC or GOMEMLIMIT are left as they
// are. It returns the function that restores the settings.
func batchGC() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	return heapAhead(-1, batchHeap, 3)
}

// batchHeap is the heap a batch job may use before it collects garbage.
const batchHeap = 1 << 30

// heapAhead sets the proportional collector's percent (-1: off) and keeps
// the memory limit at least floor and at least factor times the live heap
// (measured every heapCheck), so that the limit grows with what the process
// keeps and the collector never chases it. The returned function restores
// the settings.
func heapAhead(percent int, floor, factor int64) (restore func()) {
	oldLimit := debug.SetMemoryLimit(floor)
	oldPercent := debug.SetGCPercent(percent)
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(heapCheck)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(live)
			debug.SetMemoryLimit(max(floor, factor*int64(live[0].Value.Uint64())))
		}
	}()
	return func() {
		close(done)
		<-stopped
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	}
}

const heapCheck = 100 * time.Millisecond

// replayInMemory rebuilds the projection as it stood at the cutoff, in
// memory. The caller closes the store.
func replayInMemory(ctx context.Context, l *eventlog.Log, c cutoff) (*projections.Store, error) {
	// A write-ahead log in memory costs little, and a flush at Close would
	// be wasted on a store that is thrown away.
	store, err := projections.Open(projections.Options{Dir: "replay", FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	if _, err := replay(ctx, l, store, c, nil); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

type replayCmd struct {
	logFlags
	Out   string `help:"Directory of the rebuilt projection (default <data-dir>/replay); it must not exist or be empty, and is made 0700, as the node's data directory is (it holds the identities' history and token hashes)."`
	ToSeq uint64 `name:"to-seq" xor:"cut" help:"Stop after this sequence (0, the default: the log's end)."`
	Until string `xor:"cut" help:"Stop before the first event later than this time (RFC 3339, taken to the end of its last digit, so 10:32:00Z includes 10:32:00.5; or a duration from now such as -2h)."`
}

func (r *replayCmd) Run(ctx context.Context, s streams) error {
	until, err := parseTime("until", r.Until, true, time.Now())
	if err != nil {
		return err
	}
	c := cutoff{toSeq: r.ToSeq, until: until}
	out := r.Out
	if out == "" {
		out = filepath.Join(r.DataDir, "replay")
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: choose another --out or remove it", out)
	}
	l, err := r.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	// The projection holds every identity's history, token hashes and
	// sealed tokens: the directory is the node's own, as its data
	// directory is, whatever the umask or an empty one's mode.
	if err := os.MkdirAll(out, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(out, 0o700); err != nil {
		return fmt.Errorf("make %s 0700: %w", out, err)
	}
	store, err := openRebuilt(out)
	if err != nil {
		return err
	}
	defer store.Close()
	bar := newProgress(s.err)
	start := time.Now()
	n, err := rebuild(ctx, l.Log, store, c, bar.update)
	bar.done()
	if err != nil {
		return err
	}
	secs := time.Since(start).Seconds()
	_, err = fmt.Fprintf(s.out, "replayed %s (cursor %d) into %s in %.2fs: %.0f events/s\n", posture.Count(n, "event", "events"), store.Cursor(), out, secs, float64(n)/max(secs, 1e-9))
	switch {
	case r.ToSeq > store.Cursor():
		fmt.Fprintf(s.err, "postured: the log ends at sequence %d, before --to-seq %d: replayed all of it\n", store.Cursor(), r.ToSeq)
	case n == 0 && !until.IsZero():
		fmt.Fprintf(s.err, "postured: no event of the log is at or before --until %s: the projection in %s is empty\n", r.Until, out)
	}
	return err
}

// progress draws a progress bar on a terminal and nothing otherwise.
type progress struct {
	w    io.Writer
	tty  bool
	last time.Time
	t0   time.Time
}

func newProgress(w io.Writer) *progress {
	return &progress{w: w, tty: terminal(w), t0: time.Now()}
}

func (p *progress) update(done, total uint64) {
	if !p.tty || time.Since(p.last) < 100*time.Millisecond || total == 0 {
		return
	}
	p.last = time.Now()
	const width = 40
	filled := int(float64(width) * float64(done) / float64(total))
	rate := float64(done) / max(time.Since(p.t0).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%-*s] %3d%% %d/%d events %.0f/s", width, strings.Repeat("=", filled), 100*done/total, done, total, rate)
}

func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
