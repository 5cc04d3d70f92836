package projections

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
)

// SnapshotOptions configures OpenSnapshots.
type SnapshotOptions struct {
	// Dir holds the snapshots; it must be on the file system of the
	// store's directory (checkpoints hard-link its tables).
	Dir string
	// Keep is the most snapshots kept (default 48). Beyond it, the one
	// whose removal leaves the smallest gap (in events) between its
	// neighbours goes: the snapshots stay spread over the whole history,
	// the newest is always kept.
	Keep int
	// Every is the number of events between two snapshots taken by Run
	// (default 10,000).
	Every uint64
	// Interval is the longest time Run lets new events wait for a
	// snapshot (default 10 minutes).
	Interval time.Duration
	// MaxOpen is how many copies OpenAt keeps open at once (default 2);
	// beyond it OpenAt fails at once with a 429 that says when to retry.
	MaxOpen int
	// OpenMemTable and OpenCache size the Pebble memtable and block cache
	// of a copy (defaults 16 MiB and 8 MiB): with Pebble's two memtables,
	// a copy holds at most 2*OpenMemTable+OpenCache in Pebble's memory,
	// plus the role graph of the model.
	OpenMemTable uint64
	OpenCache    int64
	// OpenInMemory copies a snapshot's files into memory for OpenAt
	// instead of hard-linking them into a directory beside it. It costs
	// the snapshot's size in memory and time per open; it exists to be
	// measured against the default.
	OpenInMemory bool
	// Taken, when set, is called after each snapshot Run takes.
	Taken func(Snapshot)
	// Clock drives Run's interval (default: the real clock) and stamps
	// TakenAt.
	Clock clockwork.Clock
	// Logger (default: discard).
	Logger *slog.Logger
}

// Snapshot is a Pebble checkpoint of the projection at a log sequence.
type Snapshot struct {
	// Seq is the cursor of the checkpoint: the log up to Seq is applied.
	Seq uint64 `json:"seq"`
	// LastAt is the time of the event at Seq.
	LastAt time.Time `json:"lastEventAt"`
	// MaxAt is the latest event time of the events 1..Seq (event times
	// need not grow with sequences): the snapshot serves the moments at or
	// after it.
	MaxAt time.Time `json:"maxEventAt"`
	// TakenAt is when the snapshot was taken (the node's clock).
	TakenAt time.Time `json:"takenAt"`
	// Layout is the projection layout of the checkpoint.
	Layout uint64 `json:"layout"`
}

// Snapshots keeps checkpoints of a live Store under one directory and
// rebuilds past moments from them. Each snapshot is a directory
// snap-<seq>/ with the checkpoint in db/ and its Snapshot in meta.json,
// written last: a directory without a valid meta.json, or whose checkpoint
// does not open at its recorded cursor, is partial or broken and removed.
// Work in progress lives in tmp-* (a snapshot being taken) and open-* (a
// copy being queried) and is removed when found at open.
type Snapshots struct {
	opts SnapshotOptions
	sem  chan struct{}

	takeMu sync.Mutex // one Take at a time
	// mu guards list; the read lock is held while a snapshot's files are
	// copied, the write lock while one is removed.
	mu   sync.RWMutex
	list []Snapshot // by Seq

	// prefix is the latest event time of the events 1..prefixTo, read
	// from the log once when the store's history since its open does not
	// reach back to a snapshot.
	prefixTo  uint64
	prefixMax time.Time
	prefixOK  bool
}

const (
	snapPrefix = "snap-"
	tmpPrefix  = "tmp-"
	openPrefix = "open-"
	metaFile   = "meta.json"
	dbDir      = "db"

	defaultKeep         = 48
	defaultEvery        = 10_000
	defaultInterval     = 10 * time.Minute
	defaultMaxOpen      = 2
	defaultOpenMemTable = 16 << 20
	defaultOpenCache    = 8 << 20

	// busyRetry is the Retry-After of a refused OpenAt.
	busyRetry = time.Second
)

// ErrBusy is wrapped by the error of OpenAt when MaxOpen copies are open.
var ErrBusy = errors.New("projections: too many past moments are being rebuilt")

// OpenSnapshots opens (creating it) the snapshot directory, removes what
// is partial or broken in it and lists the rest.
func OpenSnapshots(opts SnapshotOptions) (*Snapshots, error) {
	if opts.Dir == "" {
		return nil, errors.New("projections: snapshots need a directory")
	}
	if opts.Keep <= 0 {
		opts.Keep = defaultKeep
	}
	if opts.Every == 0 {
		opts.Every = defaultEvery
	}
	if opts.Interval <= 0 {
		opts.Interval = defaultInterval
	}
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = defaultMaxOpen
	}
	if opts.OpenMemTable == 0 {
		opts.OpenMemTable = defaultOpenMemTable
	}
	if opts.OpenCache == 0 {
		opts.OpenCache = defaultOpenCache
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("projections: snapshots: %w", err)
	}
	s := &Snapshots{opts: opts, sem: make(chan struct{}, opts.MaxOpen)}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("projections: snapshots: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) || strings.HasPrefix(e.Name(), openPrefix) {
			path := filepath.Join(opts.Dir, e.Name())
			if err := os.RemoveAll(path); err != nil {
				return nil, fmt.Errorf("projections: snapshots: remove %s: %w", path, err)
			}
		}
	}
	list, broken, err := InspectSnapshots(opts.Dir)
	if err != nil {
		return nil, err
	}
	for _, b := range broken {
		opts.Logger.Warn("projections: removing a broken snapshot", "dir", b.Dir, "err", b.Err)
		if err := os.RemoveAll(b.Dir); err != nil {
			return nil, fmt.Errorf("projections: snapshots: remove %s: %w", b.Dir, err)
		}
	}
	s.list = list
	return s, nil
}

// BrokenSnapshot is a snapshot directory that does not load, and why.
type BrokenSnapshot struct {
	Dir string
	Seq uint64 // the sequence its name gives (0: none)
	Err error
}

// InspectSnapshots lists the snapshots under dir, oldest first, and the
// snapshot directories that are partial or broken, changing nothing (what
// verifies them must not repair them).
func InspectSnapshots(dir string) ([]Snapshot, []BrokenSnapshot, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("projections: snapshots: %w", err)
	}
	var list []Snapshot
	var broken []BrokenSnapshot
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), snapPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		snap, err := loadSnapshot(path)
		if err != nil {
			seq, _ := seqOfDir(path)
			broken = append(broken, BrokenSnapshot{Dir: path, Seq: seq, Err: err})
			continue
		}
		list = append(list, snap)
	}
	slices.SortFunc(list, func(a, b Snapshot) int { return cmpSeq(a.Seq, b.Seq) })
	return list, broken, nil
}

// SnapshotDBDir is the directory of the checkpoint of the snapshot at seq
// under dir.
func SnapshotDBDir(dir string, seq uint64) string { return filepath.Join(snapshotDir(dir, seq), dbDir) }

// snapshotDir is the directory of the snapshot at seq under dir; seqOfDir
// reads the sequence back from its name.
func snapshotDir(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%020d", snapPrefix, seq))
}

func seqOfDir(path string) (uint64, bool) {
	seq, err := strconv.ParseUint(strings.TrimPrefix(filepath.Base(path), snapPrefix), 10, 64)
	return seq, err == nil
}

// EventTimes are the times a snapshot of this store taken now would
// record, for a store opened empty and applied from the log's start: the
// time of the last event applied and the latest time of all of them.
func (s *Store) EventTimes() (lastAt, maxAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appliedAt, s.maxAt
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// LayoutError is why a snapshot of another projection layout does not
// load: one a node of an earlier build took, or one edited.
type LayoutError struct{ Have, Want uint64 }

func (e *LayoutError) Error() string { return fmt.Sprintf("layout %d, want %d", e.Have, e.Want) }

// loadSnapshot reads a snapshot's meta.json and checks that its checkpoint
// opens at the recorded cursor, with the current layout.
func loadSnapshot(dir string) (Snapshot, error) {
	var snap Snapshot
	data, err := os.ReadFile(filepath.Join(dir, metaFile))
	if err != nil {
		return snap, err
	}
	if err := json.Unmarshal(data, &snap); err != nil {
		return snap, fmt.Errorf("%s: %w", metaFile, err)
	}
	if seq, ok := seqOfDir(dir); !ok || seq != snap.Seq {
		return snap, fmt.Errorf("the directory's name does not match sequence %d", snap.Seq)
	}
	if snap.Layout != layout {
		return snap, &LayoutError{Have: snap.Layout, Want: layout}
	}
	// Copies of a snapshot (OpenAt) take its regular files only: anything
	// else (a directory or a link named as Pebble's manifest marker) would
	// let this check and the copy read two different states.
	entries, err := os.ReadDir(filepath.Join(dir, dbDir))
	if err != nil {
		return snap, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return snap, fmt.Errorf("%s holds %s, which is not a regular file", dbDir, e.Name())
		}
	}
	cursor, err := AppliedThrough(filepath.Join(dir, dbDir))
	if err != nil {
		return snap, fmt.Errorf("read the cursor: %w", err)
	}
	if cursor == 0 || cursor != snap.Seq { // 0: no database or no cursor in it
		return snap, fmt.Errorf("the checkpoint's cursor is not its recorded sequence %d", snap.Seq)
	}
	return snap, nil
}

// openReadOnly opens the projection a stopped node left at dir (or a
// snapshot's) read-only, without Pebble's informational logging.
func openReadOnly(dir string) (*pebble.DB, error) {
	return pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietLogger{log: slog.New(slog.DiscardHandler)}})
}

// AppliedThrough is the cursor of the projection at dir, opened read-only:
// the last sequence of the log it applied (0 when there is none).
func AppliedThrough(dir string) (uint64, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	db, err := openReadOnly(dir)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	v, closer, err := db.Get(cursorKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("projections: %s: a cursor of %d bytes", dir, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// List returns the snapshots kept, oldest first.
func (s *Snapshots) List() []Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.list)
}

// Dir is the directory of the snapshots.
func (s *Snapshots) Dir() string { return s.opts.Dir }

func (s *Snapshots) snapDir(seq uint64) string {
	return snapshotDir(s.opts.Dir, seq)
}

// Take checkpoints store at its cursor, unless a snapshot at or beyond it
// exists. r reads the log when the latest event time before the store's
// own history must be found (once per store). It reports whether it took
// one.
func (s *Snapshots) Take(ctx context.Context, store *Store, r Reader) (Snapshot, bool, error) {
	s.takeMu.Lock()
	defer s.takeMu.Unlock()
	cursor := store.Cursor()
	if cursor == 0 || s.newestSeq() >= cursor {
		return Snapshot{}, false, nil
	}
	// Most of the memtable goes to tables first, outside the apply lock:
	// the checkpoint's write-ahead log stays short, and so do its opens.
	if err := store.Flush(); err != nil {
		return Snapshot{}, false, err
	}
	tmp := filepath.Join(s.opts.Dir, tmpPrefix+randomName())
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return Snapshot{}, false, fmt.Errorf("projections: snapshot: %w", err)
	}
	st, err := store.checkpoint(filepath.Join(tmp, dbDir))
	if err != nil {
		return Snapshot{}, false, err
	}
	snap := Snapshot{Seq: st.cursor, LastAt: st.lastAt, TakenAt: s.opts.Clock.Now().UTC(), Layout: layout}
	if snap.MaxAt, err = s.prefixMaxAt(ctx, r, st); err != nil {
		return Snapshot{}, false, err
	}
	if snap.LastAt.IsZero() {
		// Nothing applied since the store opened: the log says when.
		if err := r.Read(ctx, st.cursor, st.cursor, func(b []posture.Event) error {
			snap.LastAt = b[len(b)-1].At
			return nil
		}); err != nil {
			return Snapshot{}, false, fmt.Errorf("projections: snapshot: read event %d: %w", st.cursor, err)
		}
	}
	if err := writeFileSync(filepath.Join(tmp, metaFile), snap); err != nil {
		return Snapshot{}, false, err
	}
	final := s.snapDir(snap.Seq)
	if err := os.Rename(tmp, final); err != nil {
		return Snapshot{}, false, fmt.Errorf("projections: snapshot: %w", err)
	}
	if d, err := os.Open(s.opts.Dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, _ := slices.BinarySearchFunc(s.list, snap.Seq, func(a Snapshot, seq uint64) int { return cmpSeq(a.Seq, seq) })
	s.list = slices.Insert(s.list, i, snap)
	s.thin()
	return snap, true, nil
}

// thin removes snapshots beyond Keep, each time the one whose removal
// leaves the smallest gap between its neighbours (the empty store at
// sequence 0 counts as the first), never the newest. Called with mu held.
func (s *Snapshots) thin() {
	for len(s.list) > s.opts.Keep {
		best, bestGap := -1, uint64(0)
		for i := 0; i < len(s.list)-1; i++ {
			prev := uint64(0)
			if i > 0 {
				prev = s.list[i-1].Seq
			}
			if gap := s.list[i+1].Seq - prev; best < 0 || gap < bestGap {
				best, bestGap = i, gap
			}
		}
		dir := s.snapDir(s.list[best].Seq)
		if err := os.RemoveAll(dir); err != nil {
			s.opts.Logger.Warn("projections: removing a snapshot", "dir", dir, "err", err)
		}
		s.list = slices.Delete(s.list, best, best+1)
	}
}

func (s *Snapshots) newestSeq() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.list) == 0 {
		return 0
	}
	return s.list[len(s.list)-1].Seq
}

// prefixMaxAt is the latest event time of the events 1..st.cursor: the
// store knows it for the events it applied since it opened; before that, a
// snapshot at or after the store's open cursor knows it, or else the log
// between the newest snapshot before it and that cursor is read (once).
func (s *Snapshots) prefixMaxAt(ctx context.Context, r Reader, st checkpointState) (time.Time, error) {
	latest := func(a, b time.Time) time.Time {
		if a.After(b) {
			return a
		}
		return b
	}
	if st.openCursor == 0 {
		return st.maxSince, nil
	}
	s.mu.RLock()
	var base *Snapshot
	for i := len(s.list) - 1; i >= 0; i-- {
		if s.list[i].Seq <= st.cursor {
			base = &s.list[i]
			break
		}
	}
	s.mu.RUnlock()
	if base != nil && base.Seq >= st.openCursor {
		return latest(base.MaxAt, st.maxSince), nil
	}
	if !s.prefixOK || s.prefixTo != st.openCursor {
		from, maxAt := uint64(1), time.Time{}
		if base != nil {
			from, maxAt = base.Seq+1, base.MaxAt
		}
		if r == nil {
			return time.Time{}, errors.New("projections: snapshot: no log to read the event times before the store's cursor")
		}
		if err := r.Read(ctx, from, st.openCursor, func(b []posture.Event) error {
			for _, e := range b {
				maxAt = latest(maxAt, e.At)
			}
			return nil
		}); err != nil {
			return time.Time{}, fmt.Errorf("projections: snapshot: read the event times %d..%d: %w", from, st.openCursor, err)
		}
		s.prefixTo, s.prefixMax, s.prefixOK = st.openCursor, maxAt, true
	}
	return latest(s.prefixMax, st.maxSince), nil
}

// Run takes a snapshot of store whenever Every events were applied since
// the newest one, and every Interval when any was, until ctx ends. A failed
// snapshot is logged and retried at the next occasion.
func (s *Snapshots) Run(ctx context.Context, store *Store, r Reader) error {
	tick := s.opts.Clock.NewTicker(s.opts.Interval)
	defer tick.Stop()
	for {
		changed := store.advanced()
		if cursor := store.Cursor(); cursor >= s.newestSeq()+s.opts.Every {
			s.take(ctx, store, r)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.Chan():
			s.take(ctx, store, r)
		}
	}
}

func (s *Snapshots) take(ctx context.Context, store *Store, r Reader) {
	start := time.Now()
	snap, ok, err := s.Take(ctx, store, r)
	switch {
	case err != nil && ctx.Err() == nil:
		s.opts.Logger.Warn("projections: snapshot failed", "err", err)
	case ok:
		s.opts.Logger.Debug("projections: snapshot taken", "seq", snap.Seq, "lastEventAt", snap.LastAt, "took", time.Since(start))
		if s.opts.Taken != nil {
			s.opts.Taken(snap)
		}
	}
}

// Nearest is the snapshot OpenAt starts from for m: the newest one at or
// before m's sequence whose events are all at or before m's time.
func (s *Snapshots) Nearest(m Moment) (Snapshot, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nearest(m)
}

func (s *Snapshots) nearest(m Moment) (Snapshot, bool) {
	// MaxAt grows with Seq, so the snapshots that fit are a prefix.
	n, _ := slices.BinarySearchFunc(s.list, m, func(a Snapshot, m Moment) int {
		if (m.Seq == 0 || a.Seq <= m.Seq) && (m.At.IsZero() || !a.MaxAt.After(m.At)) {
			return -1
		}
		return 1
	})
	if n == 0 {
		return Snapshot{}, false
	}
	return s.list[n-1], true
}

// OpenAt rebuilds the projection at moment m: a private, writable copy of
// the nearest snapshot (Nearest; an empty store when none fits) with the
// events of r after it, up to m, applied. The caller queries the store and
// then calls release, which closes and removes it. At most MaxOpen copies
// are open at once: beyond it OpenAt fails at once with a 429
// (posture.CodeTooManyRequests, wrapping ErrBusy, with a RetryAfter).
func (s *Snapshots) OpenAt(ctx context.Context, r Reader, m Moment) (_ *Store, release func(), err error) {
	select {
	case s.sem <- struct{}{}:
	default:
		return nil, nil, &posture.Error{Code: posture.CodeTooManyRequests, RetryAfter: busyRetry, Err: ErrBusy,
			Message: fmt.Sprintf("%d past moments are being rebuilt, the most at once; retry later", s.opts.MaxOpen)}
	}
	store, closeCopy, err := s.openAt(ctx, r, m, CopyOptions{NoCompactions: m.Identity != ""})
	if err != nil {
		<-s.sem
		return nil, nil, err
	}
	var once sync.Once
	return store, func() {
		once.Do(func() {
			closeCopy()
			<-s.sem
		})
	}, nil
}

// CopyOptions configures OpenCopyAt.
type CopyOptions struct {
	// Lean opens the copy with Options.Lean.
	Lean bool
	// NoCompactions opens the copy with Options.NoCompactions.
	NoCompactions bool
	// MemTableSize and CacheSize size the copy's Pebble memtable and block
	// cache (defaults: SnapshotOptions.OpenMemTable and OpenCache).
	MemTableSize uint64
	CacheSize    int64
}

// OpenCopyAt is OpenAt for a long batch job (a backtest), with the copy
// opened as o says, and outside OpenAt's MaxOpen: the caller bounds how
// many it opens at once (a node runs one backtest at a time), and the
// short past-moment queries are not refused while it runs.
func (s *Snapshots) OpenCopyAt(ctx context.Context, r Reader, m Moment, o CopyOptions) (_ *Store, release func(), err error) {
	return s.openAt(ctx, r, m, o)
}

func (s *Snapshots) openAt(ctx context.Context, r Reader, m Moment, o CopyOptions) (_ *Store, release func(), err error) {
	for {
		store, cleanup, snap, ok, err := s.openCopy(m, o)
		if err != nil {
			return nil, nil, err
		}
		if ok && store.Cursor() != snap.Seq {
			store.Close()
			cleanup()
			s.drop(snap, fmt.Errorf("the copy opened at cursor %d", store.Cursor()))
			continue
		}
		if _, err := store.ReplayTo(ctx, r, m, nil); err != nil {
			store.Close()
			cleanup()
			return nil, nil, err
		}
		var once sync.Once
		return store, func() {
			once.Do(func() {
				if err := store.Close(); err != nil {
					s.opts.Logger.Warn("projections: closing a past moment", "err", err)
				}
				cleanup()
			})
		}, nil
	}
}

// openCopy opens a copy of the nearest snapshot for m (ok), or an empty
// store. A snapshot that does not open is dropped and the next one tried.
func (s *Snapshots) openCopy(m Moment, o CopyOptions) (_ *Store, cleanup func(), _ Snapshot, ok bool, _ error) {
	for {
		s.mu.RLock()
		snap, ok := s.nearest(m)
		var (
			fs  vfs.FS = scratchFS{vfs.Default}
			dir string
			err error
		)
		if s.opts.OpenInMemory {
			fs, dir = vfs.NewMem(), dbDir
			if ok {
				err = copyToFS(filepath.Join(s.snapDir(snap.Seq), dbDir), fs, dir)
			}
		} else {
			dir = filepath.Join(s.opts.Dir, openPrefix+randomName())
			if ok {
				err = linkCopy(filepath.Join(s.snapDir(snap.Seq), dbDir), dir)
			}
		}
		s.mu.RUnlock()
		cleanup := func() {
			if !s.opts.OpenInMemory {
				os.RemoveAll(dir)
			}
		}
		var store *Store
		if err == nil {
			store, err = Open(Options{Dir: dir, FS: fs, NoWAL: true, Scratch: true, Logger: s.opts.Logger,
				MemTableSize: cmp.Or(o.MemTableSize, s.opts.OpenMemTable), CacheSize: cmp.Or(o.CacheSize, s.opts.OpenCache),
				NoCompactions: o.NoCompactions, Lean: o.Lean})
		}
		if err == nil {
			return store, cleanup, snap, ok, nil
		}
		cleanup()
		if !ok {
			return nil, nil, snap, false, fmt.Errorf("projections: open a past moment: %w", err)
		}
		s.drop(snap, err)
	}
}

// drop removes a snapshot found broken.
func (s *Snapshots) drop(snap Snapshot, why error) {
	s.opts.Logger.Warn("projections: removing a broken snapshot", "seq", snap.Seq, "err", why)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = slices.DeleteFunc(s.list, func(a Snapshot) bool { return a.Seq == snap.Seq })
	os.RemoveAll(s.snapDir(snap.Seq))
}

// checkpointState is what a checkpoint holds, read under the apply lock.
type checkpointState struct {
	cursor     uint64
	lastAt     time.Time
	openCursor uint64
	maxSince   time.Time
}

// checkpoint writes a Pebble checkpoint of the store into dir (which must
// not exist). No batch is applied meanwhile, so the checkpoint's cursor is
// the returned one.
func (s *Store) checkpoint(dir string) (checkpointState, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.mu.Lock()
	st := checkpointState{cursor: s.applied, lastAt: s.appliedAt, openCursor: s.openCursor, maxSince: s.maxAt}
	failed := s.failed
	s.mu.Unlock()
	if failed != nil {
		return st, failed
	}
	if err := s.db.Checkpoint(dir, pebble.WithFlushedWAL()); err != nil {
		return st, fmt.Errorf("projections: checkpoint: %w", err)
	}
	return st, nil
}

// advanced is closed when the store next applies a batch (or stops).
func (s *Store) advanced() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// linkCopy makes dst a copy of the checkpoint in src: its tables (never
// written after they are made) hard-linked, the rest copied.
func linkCopy(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if ext := filepath.Ext(e.Name()); ext == ".sst" || ext == ".blob" {
			if err := os.Link(from, to); err == nil {
				continue
			}
		}
		if err := copyFile(from, vfs.Default, to); err != nil {
			return err
		}
	}
	return nil
}

// copyToFS copies the checkpoint in src into dir of fs.
func copyToFS(src string, fs vfs.FS, dir string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := copyFile(filepath.Join(src, e.Name()), fs, fs.PathJoin(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(from string, fs vfs.FS, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := fs.Create(to, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFileSync(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
