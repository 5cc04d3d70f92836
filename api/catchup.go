package api

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Coalescer shares reads of the log's last sequence (one JetStream stream
// info request each) between concurrent callers, so that a flood of
// requests that must catch up with the log (unknown API session tokens)
// costs at most one read in flight and one read per Every, however many
// requests there are.
//
// A caller always gets a value read after it called: it joins the next read
// that has not started yet, never one in flight, so that an event appended
// before the call (a token issued through another node) is covered.
type Coalescer struct {
	// Read reads the log's last sequence.
	Read func(ctx context.Context) (uint64, error)
	// Every is the least time between the starts of two reads (default
	// 20 ms).
	Every time.Duration
	// Timeout bounds one read (default 1 s); the read does not end with the
	// context of the caller that starts it, since others wait for it.
	Timeout time.Duration

	mu        sync.Mutex
	busy      bool          // a read is in flight
	idle      chan struct{} // closed when the read in flight ends
	pending   *read         // the next read, joined by new callers
	lastStart time.Time
	reads     atomic.Uint64
}

type read struct {
	started bool
	waiters int
	done    chan struct{}
	seq     uint64
	err     error
}

// Last returns the log's last sequence as read after the call.
func (c *Coalescer) Last(ctx context.Context) (uint64, error) {
	c.mu.Lock()
	if c.pending == nil {
		c.pending = &read{done: make(chan struct{})}
	}
	r := c.pending
	r.waiters++
	c.mu.Unlock()
	for {
		c.mu.Lock()
		if r.started {
			c.mu.Unlock()
			break
		}
		if !c.busy {
			// Lead this read: no other is in flight.
			c.busy, r.started, c.pending = true, true, nil
			c.idle = make(chan struct{})
			wait := time.Until(c.lastStart.Add(c.every()))
			c.mu.Unlock()
			c.run(r, wait)
			break
		}
		idle := c.idle
		c.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	select {
	case <-r.done:
		return r.seq, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Pending is the number of callers that joined the next read (not started
// yet).
func (c *Coalescer) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return 0
	}
	return c.pending.waiters
}

// Reads is the number of reads made so far.
func (c *Coalescer) Reads() uint64 { return c.reads.Load() }

func (c *Coalescer) every() time.Duration {
	if c.Every <= 0 {
		return 20 * time.Millisecond
	}
	return c.Every
}

// run makes the read r, after wait, and hands the turn on.
func (c *Coalescer) run(r *read, wait time.Duration) {
	if wait > 0 {
		t := time.NewTimer(wait)
		<-t.C
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c.mu.Lock()
	c.lastStart = time.Now()
	c.mu.Unlock()
	c.reads.Add(1)
	r.seq, r.err = c.Read(ctx)
	close(r.done)
	c.mu.Lock()
	c.busy = false
	close(c.idle)
	c.mu.Unlock()
}
