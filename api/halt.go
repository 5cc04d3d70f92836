package api

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seed-0809debe/posture"
)

// Halt is the projection consumer's stop at a message of the log that is
// not an event: until an operator records a decision to skip it, the
// projection stays at the sequence before, readiness names the message,
// and the metrics count it. Safe for concurrent use; the zero value is not
// halted.
type Halt struct {
	mu      sync.Mutex
	seq     uint64
	reason  string
	total   uint64
	stopped chan struct{} // closed and replaced by Stop
}

// Stop records that the consumer stopped at seq, and why.
func (h *Halt) Stop(seq uint64, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seq != seq {
		h.total++
	}
	h.seq, h.reason = seq, reason
	if h.stopped != nil {
		close(h.stopped)
		h.stopped = nil
	}
}

// Resume records that the consumer went on.
func (h *Halt) Resume() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq, h.reason = 0, ""
}

// At is the sequence the consumer is stopped at (0 when it is not) and why.
func (h *Halt) At() (seq uint64, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seq, h.reason
}

// Total counts the messages the consumer stopped at.
func (h *Halt) Total() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// describe is the readiness reason of a halt.
func (h *Halt) describe() (uint64, string) {
	seq, reason := h.At()
	if seq == 0 {
		return 0, ""
	}
	return seq, fmt.Sprintf("the projection is stopped at sequence %d, which is not an event (%s): "+
		"inspect it with `postured events inspect --seq %d`; an operator's `postured events skip --seq %d --reason ...` lets every node go on "+
		"(while a node runs, give both commands its log with --nats-url and postured's NATS credentials, not its --data-dir)",
		seq, reason, seq, seq)
}

// blocking returns the error of a wait for seq while the consumer is
// stopped before it, and the channel closed at the next stop.
func (h *Halt) blocking(seq uint64) (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seq != 0 && h.seq <= seq {
		return nil, haltedAnswer(h.seq, true)
	}
	if h.stopped == nil {
		h.stopped = make(chan struct{})
	}
	return h.stopped, nil
}

// haltedAnswer is the answer to a request held up by the consumer stopped
// at seq: written says whether the request's events are in the log.
func haltedAnswer(seq uint64, written bool) error {
	what := "what was written is in the log and will be applied then"
	if !written {
		what = "nothing of this request was written: send it again once the projection goes on"
	}
	return &posture.Error{Code: posture.CodeUnavailable, Err: haltedError{seq}, Message: fmt.Sprintf(
		"this node's projection is stopped at sequence %d, a message of the log that is not an event, until an operator decides; %s", seq, what)}
}

// haltedError marks haltedAnswer's errors.
type haltedError struct{ seq uint64 }

func (e haltedError) Error() string {
	return fmt.Sprintf("the projection is stopped at sequence %d", e.seq)
}

// unwrittenHalt is err, or, when err is a stopped consumer's answer, that
// answer for a request that wrote nothing: a wait before a write (a change
// catching up with the state it decides on) is held up as a write's wait is.
func unwrittenHalt(err error) error {
	var h haltedError
	if errors.As(err, &h) {
		return haltedAnswer(h.seq, false)
	}
	return err
}

// StoppableBarrier is a Barrier whose wait also ends, with
// projections.ErrWaitStopped or any other error, when stop is closed
// (projections.Store).
type StoppableBarrier interface {
	Barrier
	WaitForOr(ctx context.Context, seq uint64, stop <-chan struct{}) error
}

// Barrier wraps b so that a wait for an event at or beyond the message the
// consumer is stopped at fails at once with 503 SERVICE_UNAVAILABLE, rather
// than holding the request until it gives up.
func (h *Halt) Barrier(b StoppableBarrier) Barrier { return haltBarrier{StoppableBarrier: b, h: h} }

type haltBarrier struct {
	StoppableBarrier
	h *Halt
}

func (hb haltBarrier) WaitFor(ctx context.Context, seq uint64) error {
	for {
		stopped, err := hb.h.blocking(seq)
		if err != nil {
			return err
		}
		err = hb.WaitForOr(ctx, seq, stopped)
		if err == nil || ctx.Err() != nil {
			return err
		}
		select {
		case <-stopped: // look again: stopped before seq, or after it
		default:
			return err
		}
	}
}
