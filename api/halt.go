package api

import (
	"fmt"
	"sync"
)

// Halt is the projection consumer's stop at a message of the log that is
// not an event: until an operator records a decision to skip it, the
// projection stays at the sequence before, readiness names the message,
// and the metrics count it. Safe for concurrent use; the zero value is not
// halted.
type Halt struct {
	mu     sync.Mutex
	seq    uint64
	reason string
	total  uint64
}

// Stop records that the consumer stopped at seq, and why.
func (h *Halt) Stop(seq uint64, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seq != seq {
		h.total++
	}
	h.seq, h.reason = seq, reason
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
		"inspect it with `postured events inspect --seq %d`; an operator's `postured events skip --seq %d --reason ...` lets every node go on",
		seq, reason, seq, seq)
}
