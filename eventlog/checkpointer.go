package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// CheckpointOptions configures a Checkpointer.
type CheckpointOptions struct {
	// Every is the number of sequences after which a checkpoint is
	// written (default 10,000, at most MaxCheckpointEvents).
	Every int
	// Interval is the longest an event waits to be covered by a
	// checkpoint (default one minute). A range that holds nothing but
	// checkpoints is not checkpointed, so an idle log stays quiet.
	Interval time.Duration
	// Sign signs a checkpoint's statement (required): in postured, the
	// CA key (pki.CA.SignStatement with CheckpointPurpose).
	Sign func(statement []byte) ([]byte, error)
	// KeyID names the key Sign uses (recorded in each checkpoint).
	KeyID string
	// Verify, when set, checks the signature of the checkpoints the
	// Checkpointer reads back (its own and other nodes').
	Verify func(statement, sig []byte) error
	// Now is the clock of the checkpoint events' time (default time.Now).
	Now func() time.Time
	// Logger receives what the Checkpointer finds (default: discard).
	Logger *slog.Logger
	// Fed: the Checkpointer takes in the messages that a consumer reads
	// through its Consume (the projection's, in postured), hashing each on
	// that consumer's delivery goroutine, instead of reading the log a
	// second time. A reader of its own costs about 6.5 µs of CPU per event
	// (BenchmarkCheckpointer/reader); fed, about 0.3 µs (the hash and the
	// message's metadata, in a CPU profile of BenchmarkCheckpointer/fed).
	Fed bool
}

// Checkpointer appends signed checkpoints to the log (see checkpoint.go):
// it reads every stored message as it is, hashes it, and every Every
// sequences or Interval appends a checkpoint covering what follows the last
// one. Every node may run one: a checkpoint is appended only if the last
// checkpoint is still the one it chains to (optimistic concurrency on the
// checkpoint subject), so one checkpoint per range lands and the others are
// dropped. A Checkpointer adopts a checkpoint only when it has read it back
// from the log and found it agrees with its own reading of the range; one
// that does not is logged at error level.
type Checkpointer struct {
	l       *Log
	opts    CheckpointOptions
	log     *slog.Logger
	subject string // the checkpoint subject, in full
	q       feedQueue
	stopped atomic.Bool // Run returned: nothing is fed any more

	covered atomic.Uint64 // To of the last checkpoint adopted
	lastAt  atomic.Uint64 // sequence of that checkpoint's message

	mu      sync.Mutex
	changed chan struct{} // closed and replaced when covered moves
}

// NewCheckpointer returns a Checkpointer of l; Run runs it.
func NewCheckpointer(l *Log, opts CheckpointOptions) (*Checkpointer, error) {
	if opts.Sign == nil {
		return nil, errors.New("eventlog: a Checkpointer needs Sign")
	}
	if opts.Every <= 0 {
		opts.Every = 10_000
	}
	if opts.Every > MaxCheckpointEvents {
		return nil, fmt.Errorf("eventlog: checkpoints of %d events: at most %d", opts.Every, MaxCheckpointEvents)
	}
	if opts.Interval <= 0 {
		opts.Interval = time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Checkpointer{l: l, opts: opts, log: opts.Logger, subject: l.prefix + posture.SubjectCheckpoint,
		changed: make(chan struct{})}, nil
}

// WaitFor returns once a checkpoint covering seq has been read back, or when
// ctx ends.
func (c *Checkpointer) WaitFor(ctx context.Context, seq uint64) error {
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		if c.covered.Load() >= seq {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// moved records the last checkpoint adopted and wakes WaitFor.
func (c *Checkpointer) moved(to, at uint64) {
	c.mu.Lock()
	c.covered.Store(to)
	c.lastAt.Store(at)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Covered is the last sequence covered by a checkpoint this Checkpointer
// has read back (0 before the first).
func (c *Checkpointer) Covered() uint64 { return c.covered.Load() }

// LastCheckpointSeq is the sequence of that checkpoint's message.
func (c *Checkpointer) LastCheckpointSeq() uint64 { return c.lastAt.Load() }

// cpState is the Checkpointer's position: what the next checkpoint covers
// and chains to, and the leaves read since the last one.
type cpState struct {
	from    uint64 // the first sequence the next checkpoint covers
	prev    [sha256.Size]byte
	lastSeq uint64 // sequence of the newest message on the checkpoint subject
	leaves  []leaf // sequences from, from+1, ... read so far

	// Time trigger: the newest non-checkpoint message read, and when the
	// oldest one not yet covered was read.
	lastEvent  uint64
	firstSince time.Time

	inflight      bool // a candidate was appended and is not read back yet
	inflightSince time.Time
}

// Run appends checkpoints until ctx ends, then one last checkpoint of what
// it read and did not yet cover (see last). It returns ctx's error, or an
// error reading the log.
func (c *Checkpointer) Run(ctx context.Context) error {
	defer c.stopped.Store(true)
	st, err := c.start(ctx)
	if err != nil {
		return err
	}
	readErr := make(chan error, 1)
	if !c.opts.Fed {
		rctx, cancel := context.WithCancel(ctx)
		go func() {
			readErr <- c.l.readRaw(rctx, st.from, "", func(m rawMsg) error {
				c.feed(m.seq, m.subject, m.data)
				return nil
			})
		}()
		defer func() { cancel(); <-readErr }()
	}
	backfilled := !c.opts.Fed
	tick := time.NewTicker(max(c.opts.Interval/4, 10*time.Millisecond))
	defer tick.Stop()
	// The queue is drained every drainEvery, not at each message: a
	// goroutine woken per event would cost more than hashing it.
	drain := time.NewTicker(drainEvery)
	defer drain.Stop()
	var items []fed
	for {
		select {
		case <-ctx.Done():
			if backfilled {
				c.last(st, items)
			}
			return ctx.Err()
		case err := <-readErr:
			readErr <- err // for the deferred wait
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("eventlog: checkpointer: %w", err)
		case <-tick.C:
			if !backfilled && c.q.empty() {
				// Nothing fed yet (the consumer is idle): cover what the
				// log holds now; what it delivers later follows on.
				last, err := c.l.LastSeq(ctx)
				if err != nil {
					c.log.Warn("eventlog: checkpointer: the log's position", "err", err)
					continue
				}
				if err := c.backfill(ctx, st, last+1); err != nil {
					return err
				}
				backfilled = true
			}
			if st.inflight && time.Since(st.inflightSince) > 5*time.Minute {
				// Never read back (deleted?): propose again.
				st.inflight = false
			}
			if !st.inflight && st.lastEvent >= st.from && !st.firstSince.IsZero() && time.Since(st.firstSince) >= c.opts.Interval {
				if err := c.propose(ctx, st, len(st.leaves)); err != nil {
					return err
				}
			}
		case <-drain.C:
			items = c.q.take(items)
			if len(items) == 0 {
				continue
			}
			if !backfilled {
				// The consumer that feeds us started where its reader
				// resumed, not where the last checkpoint ended: read
				// what lies between once.
				if err := c.backfill(ctx, st, items[0].seq); err != nil {
					return err
				}
				backfilled = true
			}
			for _, f := range items {
				if err := c.read(ctx, st, f); err != nil {
					return err
				}
			}
		}
	}
}

// lastWait bounds the last checkpoint of a Checkpointer that stops.
const lastWait = 5 * time.Second

// last covers, as the Checkpointer stops, what it read and no checkpoint
// covers yet: a node that stops gracefully leaves no tail of its log
// unsigned, which could be edited in its files while it is down and signed
// as it is on the next start. A crash still leaves one (up to Every events
// or Interval). It waits at most lastWait, and does not wait for the
// checkpoint to be read back.
func (c *Checkpointer) last(st *cpState, items []fed) {
	ctx, cancel := context.WithTimeout(context.Background(), lastWait)
	defer cancel()
	for _, f := range c.q.take(items) {
		if err := c.read(ctx, st, f); err != nil {
			return
		}
	}
	if st.inflight || st.lastEvent < st.from || len(st.leaves) == 0 {
		return
	}
	if err := c.propose(ctx, st, len(st.leaves)); err != nil {
		c.log.Warn("eventlog: the last checkpoint before stopping", "err", err)
	}
}

// backfill reads the log from the next sequence to cover up to (not
// including) upTo, when a fed Checkpointer's consumer started after it.
func (c *Checkpointer) backfill(ctx context.Context, st *cpState, upTo uint64) error {
	if upTo <= st.from {
		return nil
	}
	lh := newLeafHasher()
	err := c.l.readRaw(ctx, st.from, "", func(m rawMsg) error {
		if m.seq >= upTo {
			return errStopRead
		}
		if err := c.read(ctx, st, c.fedOf(lh, m.seq, m.subject, m.data)); err != nil {
			return err
		}
		if m.seq+1 >= upTo || m.pending == 0 {
			return errStopRead
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("eventlog: checkpointer: read %d..%d: %w", st.from, upTo-1, err)
	}
	return nil
}

// drainEvery is how often Run takes in what was fed.
const drainEvery = 20 * time.Millisecond

// fed is a stored message as the Checkpointer takes it in: its leaf hash,
// and its data if it is a checkpoint.
type fed struct {
	seq  uint64
	leaf leaf
	ck   bool   // on the checkpoint subject
	data []byte // a checkpoint's data
}

func (c *Checkpointer) fedOf(lh *leafHasher, seq uint64, subject string, data []byte) fed {
	f := fed{seq: seq, leaf: lh.leaf(seq, subject, data)}
	if subject == c.subject {
		f.ck, f.data = true, data
	}
	return f
}

var hashers = sync.Pool{New: func() any { return newLeafHasher() }}

// feed hashes a stored message and queues it for Run.
func (c *Checkpointer) feed(seq uint64, subject string, data []byte) {
	if c.stopped.Load() || seq <= c.q.newest() {
		return // a replaced consumer's leftovers
	}
	lh := hashers.Get().(*leafHasher)
	f := c.fedOf(lh, seq, subject, data)
	hashers.Put(lh)
	c.q.push(f)
}

// Consume is the log's Consume, with every message it delivers also taken
// in by the Checkpointer: hashed on the consumer's delivery goroutine, so
// that with CheckpointOptions.Fed the log is not read a second time. A
// node's projection consumes through it.
func (c *Checkpointer) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	return c.l.Consume(context.WithValue(ctx, tapKey{}, c.tap), from, fn)
}

// tapKey marks a Consume whose messages a Checkpointer takes in.
type tapKey struct{}

// tapFrom is the tap of a Consume (nil: none). Consume calls it with every
// message delivered, in order, on the delivery goroutine.
func tapFrom(ctx context.Context) func(jetstream.Msg) {
	tap, _ := ctx.Value(tapKey{}).(func(jetstream.Msg))
	return tap
}

func (c *Checkpointer) tap(m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return // the consumer reports it
	}
	c.feed(md.Sequence.Stream, m.Subject(), m.Data())
}

// feedQueue hands fed messages from the consumer to Run without ever
// blocking the consumer: a checkpoint append that waits must not hold up
// the projection.
type feedQueue struct {
	mu    sync.Mutex
	items []fed
	last  uint64 // newest sequence queued
}

func (q *feedQueue) empty() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == 0
}

func (q *feedQueue) newest() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.last
}

func (q *feedQueue) push(f fed) {
	q.mu.Lock()
	if f.seq <= q.last {
		q.mu.Unlock()
		return
	}
	q.items = append(q.items, f)
	q.last = f.seq
	q.mu.Unlock()
}

// take returns what is queued, reusing buf.
func (q *feedQueue) take(buf []fed) []fed {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = buf[:0]
	return out
}

// start finds the last checkpoint in the log: the next one covers what
// follows it.
func (c *Checkpointer) start(ctx context.Context) (*cpState, error) {
	st := &cpState{from: 1}
	last, err := c.l.LastSubjectSeq(ctx, posture.SubjectCheckpoint)
	if err != nil {
		return nil, fmt.Errorf("eventlog: checkpointer: last checkpoint: %w", err)
	}
	if last == 0 {
		return st, nil
	}
	st.lastSeq = last
	cp, at, err := c.valid(ctx, last)
	if err != nil {
		// A message on the checkpoint subject that is not a valid
		// checkpoint (audit verify names it) must not stop checkpoints:
		// go on from the last one that is.
		c.log.Error("eventlog: the last message on the checkpoint subject is not a valid checkpoint; going on from the last valid one",
			"seq", last, "err", err)
		if cp, at, err = c.lastValid(ctx, last); err != nil {
			return nil, err
		}
		if cp == nil {
			return st, nil
		}
	}
	st.from, st.prev = cp.to+1, cp.digest()
	c.moved(cp.to, at)
	return st, nil
}

// valid reads the checkpoint stored at seq and checks it.
func (c *Checkpointer) valid(ctx context.Context, seq uint64) (*checkpoint, uint64, error) {
	m, err := c.l.stream.GetMsg(ctx, seq)
	if err != nil {
		return nil, 0, fmt.Errorf("read checkpoint at seq %d: %w", seq, err)
	}
	return c.check(seq, m.Data)
}

func (c *Checkpointer) check(seq uint64, data []byte) (*checkpoint, uint64, error) {
	cp, err := parseCheckpoint(seq, data)
	if err != nil {
		return nil, 0, err
	}
	if c.opts.Verify != nil {
		if err := c.opts.Verify(cp.statement(), cp.sig); err != nil {
			return nil, 0, fmt.Errorf("checkpoint at seq %d: %w", seq, err)
		}
	}
	return cp, seq, nil
}

// lastValid reads the checkpoint subject up to seq last and returns its
// last valid checkpoint (nil if none).
func (c *Checkpointer) lastValid(ctx context.Context, last uint64) (cp *checkpoint, at uint64, err error) {
	err = c.l.readRaw(ctx, 1, c.subject, func(m rawMsg) error {
		if m.seq >= last {
			return errStopRead
		}
		if v, seq, err := c.check(m.seq, m.data); err == nil {
			cp, at = v, seq
		}
		if m.pending == 0 {
			return errStopRead
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("eventlog: checkpointer: read the checkpoints: %w", err)
	}
	return cp, at, nil
}

// read takes in one stored message.
func (c *Checkpointer) read(ctx context.Context, st *cpState, f fed) error {
	next := st.from + uint64(len(st.leaves))
	if f.seq < next {
		return nil
	}
	if f.seq > next {
		c.log.Error("eventlog: sequences are missing from the log (deleted?); the next checkpoint records them as missing",
			"from", next, "to", f.seq-1)
		for ; next < f.seq; next++ {
			st.leaves = append(st.leaves, leaf{})
		}
	}
	st.leaves = append(st.leaves, f.leaf)
	if f.ck {
		st.lastSeq = max(st.lastSeq, f.seq)
		if !c.adopt(st, f) {
			// Not the next checkpoint, or not a valid one: if a
			// candidate of ours lost to it, propose again (a candidate
			// that did land conflicts, harmlessly).
			st.inflight = false
		}
	} else {
		st.lastEvent = f.seq
		if st.firstSince.IsZero() {
			st.firstSince = time.Now()
		}
	}
	if !st.inflight && len(st.leaves) >= c.opts.Every {
		return c.propose(ctx, st, c.opts.Every)
	}
	return nil
}

// adopt moves the state past a checkpoint read back from the log, if it is
// the next one and agrees with what this node read. It reports whether it
// did.
func (c *Checkpointer) adopt(st *cpState, m fed) bool {
	cp, err := parseCheckpoint(m.seq, m.data)
	if err != nil {
		c.log.Error("eventlog: a message on the checkpoint subject is not a valid checkpoint", "seq", m.seq, "err", err)
		return false
	}
	if cp.to < st.from {
		return false // the one start began after, or an older one appended again
	}
	if cp.from != st.from || cp.to >= m.seq {
		c.log.Error("eventlog: a checkpoint does not follow the last one; ignored", "seq", m.seq, "range", cp.rangeString(), "expectedFrom", st.from)
		return false
	}
	mine := newCheckpoint(st.from, st.prev, st.leaves[:cp.to-st.from+1])
	if cp.prev != mine.prev || cp.root != mine.root {
		c.log.Error("eventlog: a checkpoint disagrees with this node's reading of the log; ignored",
			"seq", m.seq, "range", cp.rangeString(), "root", hex.EncodeToString(cp.root[:]), "computed", hex.EncodeToString(mine.root[:]))
		return false
	}
	if c.opts.Verify != nil {
		if err := c.opts.Verify(cp.statement(), cp.sig); err != nil {
			c.log.Error("eventlog: a checkpoint's signature does not verify; ignored", "seq", m.seq, "range", cp.rangeString(), "err", err)
			return false
		}
	}
	n := cp.to - st.from + 1
	st.leaves = append(st.leaves[:0], st.leaves[n:]...)
	st.from, st.prev = cp.to+1, cp.digest()
	st.inflight = false
	if st.lastEvent >= st.from {
		st.firstSince = time.Now()
	} else {
		st.firstSince = time.Time{}
	}
	c.moved(cp.to, m.seq)
	c.log.Debug("eventlog: checkpoint", "seq", m.seq, "range", cp.rangeString())
	return true
}

// propose appends a checkpoint of the first n leaves read. Losing the race
// to another node is not an error: its checkpoint is read back and adopted.
func (c *Checkpointer) propose(ctx context.Context, st *cpState, n int) error {
	cp := newCheckpoint(st.from, st.prev, st.leaves[:n])
	if err := cp.sign(c.opts.Sign, c.opts.KeyID); err != nil {
		return err
	}
	e, err := posture.NewEvent(cp.payload, c.opts.Now())
	if err != nil {
		return err
	}
	// The event keeps its fresh ID: one derived from the checkpoint would
	// let anyone who publishes the same range first (a forger) have ours
	// dropped as a duplicate.
	st.inflight, st.inflightSince = true, time.Now()
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = c.l.AppendIfLast(actx, e, st.lastSeq)
	var perr *posture.Error
	switch {
	case err == nil:
	case errors.As(err, &perr) && perr.Code == posture.CodeConflict:
		c.log.Debug("eventlog: another checkpoint landed first", "range", cp.rangeString())
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		c.log.Warn("eventlog: append checkpoint; trying again later", "range", cp.rangeString(), "err", err)
		st.inflight = false
	}
	return nil
}
