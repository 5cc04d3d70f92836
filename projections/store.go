package projections

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
)

// Options configures Open.
type Options struct {
	// Dir holds the Pebble database.
	Dir string
	// FS overrides the file system (vfs.NewMem() in tests). Default: disk.
	FS vfs.FS
	// Logger (default: discard).
	Logger *slog.Logger
	// NoWAL turns Pebble's write-ahead log off, for a directory filled in
	// one go and kept only when complete (a replay). Close flushes what is
	// in memory; after a crash the directory holds what was flushed before,
	// a prefix of the log with its cursor.
	NoWAL bool
	// DiskReserve is the free space the file system of Dir must keep: below
	// it the store stops applying until it is free again (see space.go).
	// 0: the store pauses only when a write meets a full disk.
	DiskReserve int64
	// MemTableSize is Pebble's memtable (default: walMemTable with a
	// write-ahead log on disk, bulkMemTable otherwise).
	MemTableSize uint64

	// CacheSize is Pebble's block cache (default: cacheSize).
	CacheSize int64
	// Scratch marks a store that is thrown away after use (a copy of a
	// snapshot rebuilt to a past moment): Close does not flush it.
	Scratch bool
	// NoCompactions turns Pebble's automatic compactions off, for a
	// scratch store that takes few writes (a past moment about one
	// identity): a copy of a snapshot would otherwise spend its short life
	// compacting the tables it inherited.
	NoCompactions bool
	// Lean keeps neither the audit history (h/...) nor the fleet summary
	// (f/i, f/n and f/r: the standing of identities, its counters and the
	// report-only index) that Apply otherwise maintains: Histories,
	// History, Summary and the impact of report-only checks answer as if
	// nothing had happened. Sessions, posture, deadlines, grace windows and
	// transitions are the same as without it. It is for a throwaway
	// projection that is only compared (a backtest's): the two cost more
	// than the rest of Apply for a large fleet.
	Lean bool

	// readOnly opens the database read-only (tests: every commit fails).
	readOnly bool
}

// cacheSize is the default Pebble block cache.
const cacheSize = 128 << 20

// Memtable sizes. Pebble preallocates each write-ahead log file at 110% of
// the memtable and keeps one or two, so a 64 MiB memtable made a store of a
// few hundred events take 141 MiB on disk (and 100,000 events 288 MiB, six
// times their log): a store with a write-ahead log on disk uses 16 MiB,
// which applies as fast in BenchmarkAppendApply (4 MiB was a fifth slower).
// A store without one (a replay) or in memory keeps the large one, which a
// bulk load is faster with.
const (
	walMemTable  = 16 << 20
	bulkMemTable = 64 << 20
)

// Source is the log as the projector sees it (eventlog.Log implements it).
type Source interface {
	Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error
}

// Store is the projection database. Apply is called by one goroutine (Run);
// queries may run concurrently with it.
type Store struct {
	db      *pebble.DB
	noWAL   bool
	scratch bool
	lean    bool
	log     *slog.Logger
	graph   *graph
	hot     *hotCache
	ranges  *rangeCache

	mu           sync.Mutex
	applied      uint64
	modelSeq     uint64         // sequence of the last applied event on the model subject
	appliedAt    time.Time      // event time of the last applied event
	changed      chan struct{}  // closed and replaced on every advance
	failed       error          // set when apply stopped for good
	paused       *posture.Error // set while the disk is below the reserve (space.go)
	pausedReason string
	partial      bool      // a scratch store narrowed to one identity: gaps in the log are expected
	openCursor   uint64    // the cursor when the store was opened
	maxAt        time.Time // the latest event time applied since it was opened

	// applyMu is held by Apply for a whole batch and by Checkpoint, so
	// that a checkpoint's cursor is the one it records.
	applyMu sync.Mutex

	disk       *diskGuard
	closeOnce  sync.Once
	heldWrites atomic.Bool   // the file system holds Pebble's writes for lack of space
	dueWrites  atomic.Uint64 // writes to the deadline index (DueWrites)
	evicted    atomic.Uint64 // API sessions ended by MaxAPISessions (Evicted)
	broken     atomic.Bool   // Pebble failed a write: the database must not be used again

	// beforeCommit, when set (tests), runs just before a batch is
	// committed.
	beforeCommit func()
	// interrupt, when set (SetInterrupt), stops an apply that
	// re-evaluates many identities.
	interrupt func() error
}

// SetInterrupt makes an apply that re-evaluates many identities (a change
// of checks, policies or roles) ask fn before each, and fail with its
// error: a throwaway projection (a backtest's) can then be stopped within
// such an event. The node's own projection never sets it: its applies
// always run to the end. Call it before the first apply.
func (s *Store) SetInterrupt(fn func() error) { s.interrupt = fn }

// Open opens (or creates) the projection database and reads its cursor.
func Open(opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MemTableSize == 0 {
		opts.MemTableSize = bulkMemTable
		if opts.FS == nil && !opts.NoWAL {
			opts.MemTableSize = walMemTable
		}
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.CacheSize == 0 {
		opts.CacheSize = cacheSize
	}
	if !opts.readOnly {
		// The projection holds what the log does (its owner's alone, as
		// the data directory): Pebble would make the directory 0755.
		if err := opts.FS.MkdirAll(opts.Dir, 0o700); err != nil {
			return nil, err
		}
		// One made by an earlier version is made private too.
		if opts.FS == vfs.Default {
			if fi, err := os.Stat(opts.Dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
				if err := os.Chmod(opts.Dir, 0o700); err != nil {
					return nil, err
				}
			}
		}
	}
	s := &Store{noWAL: opts.NoWAL, scratch: opts.Scratch, lean: opts.Lean, log: opts.Logger, graph: newGraph(), hot: &hotCache{}, ranges: &rangeCache{}, changed: make(chan struct{})}
	s.disk = &diskGuard{fs: opts.FS, dir: opts.Dir, reserve: opts.DiskReserve,
		resume: max(opts.DiskReserve, int64(opts.MemTableSize)*11/10), closing: make(chan struct{})}
	s.disk.measure()
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref() // the DB holds its own reference
	po := &pebble.Options{
		FS:           vfs.OnDiskFull(opts.FS, s.diskFull),
		Logger:       quietLogger{log: opts.Logger},
		Cache:        cache,
		MemTableSize: opts.MemTableSize,
		DisableWAL:   opts.NoWAL,

		DisableAutomaticCompactions: opts.NoCompactions,
		ReadOnly:                    opts.readOnly,
	}
	// Point reads dominate (entities, posture, API sessions by token): bloom
	// filters spare them the data blocks of the tables without the key.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		po.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(opts.Dir, po)
	if err != nil {
		return nil, fmt.Errorf("projections: open %s: %w", opts.Dir, err)
	}
	s.db = db
	if err := s.checkLayout(); err != nil {
		db.Close()
		return nil, err
	}
	data, closer, err := db.Get(cursorKey)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		db.Close()
		return nil, fmt.Errorf("projections: read cursor: %w", err)
	default:
		s.applied = binary.BigEndian.Uint64(data)
		closer.Close()
	}
	s.openCursor = s.applied
	if data, closer, err := db.Get(modelKey); err == nil {
		s.modelSeq = binary.BigEndian.Uint64(data)
		closer.Close()
	}
	if err := s.graph.load(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("projections: load the role graph: %w", err)
	}
	return s, nil
}

// checkLayout discards a projection of another layout (the log rebuilds
// it) and records the current layout in a new or emptied one.
func (s *Store) checkLayout() error {
	version := uint64(0) // no projection yet
	data, closer, err := s.db.Get(layoutKey)
	switch {
	case err == nil:
		version = binary.BigEndian.Uint64(data)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("projections: read the layout: %w", err)
	default:
		if _, closer, err := s.db.Get(cursorKey); err == nil {
			closer.Close()
			version = 1
		}
	}
	if version == layout {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if version != 0 {
		s.log.Warn("the projection has another layout: discarding it, it is rebuilt from the log", "layout", version, "want", layout)
		if err := b.DeleteRange([]byte{0}, []byte{0xff}, nil); err != nil {
			return err
		}
	}
	if err := putSeq(b, layoutKey, layout); err != nil {
		return err
	}
	wo := pebble.Sync
	if s.noWAL {
		wo = pebble.NoSync // no log to sync
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("projections: record the layout: %w", err)
	}
	return nil
}

// r reads committed state through the hot cache, one key at a time: two
// reads may see two different cursors. A query that reads several keys
// that must agree uses view.
func (s *Store) r() reader { return hotReader{hot: s.hot, r: s.db} }

// view calls fn with a reader of committed state at one cursor. It holds
// the hot cache's read lock for the length of fn: no commit starts and no
// batch is published meanwhile, so the cache and the database agree; when
// a commit is in flight, fn reads a Pebble snapshot and not the cache. fn
// reads through r only (calling s.r() inside it may deadlock) and is short:
// apply publishes its next batch after it. The in-memory role graph is not
// part of the view.
func (s *Store) view(fn func(r reader) error) error {
	s.hot.mu.RLock()
	defer s.hot.mu.RUnlock()
	if s.hot.inflight {
		snap := s.db.NewSnapshot()
		defer snap.Close()
		return fn(snap)
	}
	return fn(hotReader{hot: s.hot, r: s.db, locked: true})
}

// Flush writes what the database holds in memory to disk.
func (s *Store) Flush() error {
	if err := s.db.Flush(); err != nil {
		return fmt.Errorf("projections: flush: %w", err)
	}
	return nil
}

// Close closes the database, first flushing a store without a write-ahead
// log.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.disk.closing) })
	if s.broken.Load() {
		// Pebble's own state is unusable after the failed write (closing
		// could wait on it); what it committed is on disk, and a restart
		// resumes from there.
		return s.Err()
	}
	if s.heldWrites.Load() {
		// A write is held for lack of space: closing would wait for it
		// (or fail it, which Pebble does not survive). What the store
		// committed is in its write-ahead log, or replayed from the log,
		// so nothing is lost: a warning, not an error that would make a
		// requested stop look like a failure.
		s.log.Warn("projections: closed without flushing: the disk is full; the next start replays what was not applied")
		return nil
	}
	if s.noWAL && !s.scratch {
		if err := s.Flush(); err != nil {
			s.db.Close()
			return err
		}
	}
	return s.db.Close()
}

// Cursor is the sequence of the last applied event (0 for an empty store).
func (s *Store) Cursor() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

// Apply applies events in one batch together with the new cursor. Events at
// or below the cursor are skipped. An event of an unknown type, or one that
// does not decode, fails the whole batch and stops the store: nothing of the
// batch is written and WaitFor returns the error from then on.
func (s *Store) Apply(events []posture.Event) error {
	return s.applyBatch(events, nil, nil)
}

// applyBatch is Apply; with derived (Overlay), every event is applied at
// the cursor, which stays where it is, and the transitions go to derived.
//
// With rewrite (ApplyEach), each event of the log is first given to
// rewrite, which sees the state the events before it left.
func (s *Store) applyBatch(events []posture.Event, derived *[]posture.Transition, rewrite Rewrite) error {
	overlay := derived != nil
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	cursor, failed, partial := s.applied, s.failed, s.partial
	s.mu.Unlock()
	if failed != nil {
		return failed
	}
	if err := s.checkSpace(); err != nil {
		return err
	}
	b := s.db.NewIndexedBatch()
	defer b.Close()
	tx := newTx(b, s)
	tx.derived = derived
	var last posture.Event
	modelSeq := uint64(0)
	maxAt := time.Time{}
	// The events of a message (several in a batch of the log's, which
	// share its sequence) are applied together: those of a message at or
	// below the cursor were.
	start := cursor
	for _, e := range events {
		if overlay {
			e.Seq = cursor
			if err := apply(tx, e); err != nil {
				return s.fail(err)
			}
			last = e
			continue
		}
		if e.Seq <= start {
			continue
		}
		sameMessage := e.Seq == cursor && cursor > start
		if !sameMessage && e.Seq != cursor+1 && cursor != 0 && !partial {
			// A gap means the source skipped events: refusing keeps the
			// projection a faithful function of the log.
			return s.fail(fmt.Errorf("projections: event %d follows %d: gap in the log (messages %d..%d are missing: deleted, or damaged and dropped by the NATS server; "+
				"postured audit verify names them; restore the log from a backup)", e.Seq, cursor, cursor+1, e.Seq-1))
		}
		if rewrite != nil {
			seq, part := e.Seq, e.Part
			var err error
			if e, err = rewrite(View{tx: tx, s: s, cursor: cursor}, e); err != nil {
				return s.fail(err)
			}
			e.Seq, e.Part = seq, part
		}
		if err := apply(tx, e); err != nil {
			return s.fail(err)
		}
		cursor, last = e.Seq, e
		if e.At.After(maxAt) {
			maxAt = e.At
		}
		if e.Subject == posture.SubjectModel {
			modelSeq = e.Seq
		}
	}
	if last.Seq == 0 && !overlay || len(events) == 0 {
		return nil
	}
	if err := tx.writeStaged(); err != nil {
		return s.fail(err)
	}
	if err := putSeq(b, cursorKey, cursor); err != nil {
		return s.fail(err)
	}
	if modelSeq != 0 {
		if err := putSeq(b, modelKey, modelSeq); err != nil {
			return s.fail(err)
		}
	}
	// The batch's hot keys are published only once it is committed:
	// nothing of a batch whose commit failed is ever seen. While the commit
	// is in flight, views read a snapshot instead of the cache (view).
	if s.beforeCommit != nil {
		s.beforeCommit()
	}
	s.hot.begin()
	err := s.commit(b)
	s.hot.end(tx.staged, err == nil)
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	s.applied = cursor
	if !overlay {
		s.appliedAt = last.At
		if maxAt.After(s.maxAt) {
			s.maxAt = maxAt
		}
	}
	if modelSeq != 0 {
		s.modelSeq = modelSeq
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

// commit commits a batch without waiting for a sync. Pebble panics when it
// cannot write (its write-ahead log on a full disk): the panic becomes an
// error that stops the store for good, with what to do.
func (s *Store) commit(b *pebble.Batch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.broken.Store(true)
			err = fmt.Errorf("projections: the store failed to write (%v): it stops; free disk space and restart postured, "+
				"which resumes from the last event committed", r)
			s.log.Error(err.Error())
		}
	}()
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("projections: commit: %w", err)
	}
	return nil
}

func putSeq(b *pebble.Batch, key []byte, seq uint64) error {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], seq)
	return b.Set(key, buf[:], nil)
}

// LastModelSeq is the sequence of the last applied event on the model
// subject: the expectation for the next optimistic model change.
func (s *Store) LastModelSeq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.modelSeq
}

// Resumed sets the event time of the last applied event of a store opened
// again (which knows its cursor, not that time), read from the log; an
// event applied since wins.
func (s *Store) Resumed(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appliedAt.IsZero() {
		s.appliedAt = at
	}
}

// AppliedAt is the event time of the last applied event.
func (s *Store) AppliedAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appliedAt
}

func (s *Store) fail(err error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed == nil {
		s.failed = err
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return err
}

// Err is the error that stopped the store, if any.
func (s *Store) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// WaitFor blocks until the event at seq has been applied, ctx ends, or the
// store stopped on an error.
func (s *Store) WaitFor(ctx context.Context, seq uint64) error {
	return s.WaitForOr(ctx, seq, nil)
}

// ErrWaitStopped is WaitForOr's answer when its stop channel closed first.
var ErrWaitStopped = errors.New("projections: the wait was stopped")

// WaitForOr is WaitFor that also gives up, with ErrWaitStopped, when stop
// is closed (a nil stop never is).
func (s *Store) WaitForOr(ctx context.Context, seq uint64, stop <-chan struct{}) error {
	for {
		s.mu.Lock()
		applied, failed, paused, changed := s.applied, s.failed, s.paused, s.changed
		s.mu.Unlock()
		if applied >= seq {
			return nil
		}
		if failed != nil {
			return failed
		}
		if paused != nil {
			return paused
		}
		select {
		case <-changed:
		case <-stop:
			return ErrWaitStopped
		case <-ctx.Done():
			return fmt.Errorf("projections: waiting for event %d (applied %d): %w", seq, applied, ctx.Err())
		}
	}
}

// Run applies the log from cursor+1 until ctx ends or an event cannot be
// applied.
//
// When the disk falls below the reserve, Run waits until it has it again and
// goes on from the cursor.
func (s *Store) Run(ctx context.Context, src Source) error {
	for {
		from := s.Cursor() + 1
		s.log.Info("projection catching up", "from", from)
		err := src.Consume(ctx, from, s.Apply)
		if ctx.Err() != nil {
			return nil
		}
		if !errors.Is(err, posture.ErrOutOfSpace) {
			return err
		}
		if err := s.waitForSpace(ctx, s.disk.closing); err != nil {
			return nil
		}
	}
}

// Dump writes every key and value in key order, one pair per line, with
// non-printable bytes escaped. Two stores with equal dumps hold the same
// state; it is how rebuilds are compared.
func (s *Store) Dump(w io.Writer) error {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if bytes.HasPrefix(it.Key(), transitionPrefix) {
			continue // a queue, not state (transitions.go)
		}
		if _, err := fmt.Fprintf(w, "%q %q\n", it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Error()
}

// quietLogger drops Pebble's informational logging; fatal errors still
// panic as Pebble expects (commit turns the panic of a commit into an
// error).
type quietLogger struct{ log *slog.Logger }

func (quietLogger) Infof(string, ...any) {}
func (l quietLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf("pebble: "+format, args...))
}
func (l quietLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("pebble: fatal: " + msg)
	panic(msg)
}
