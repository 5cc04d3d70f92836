package projections

import "container/heap"

// waiter is a caller of WaitFor: its channel is closed once the event at
// seq is applied (or the store stops or pauses).
type waiter struct {
	seq   uint64
	ch    chan struct{}
	index int // in the heap; -1 once woken or removed
}

// waiters are the callers of WaitFor, earliest sequence first. An advance
// wakes only the waiters it satisfies: under load many requests wait for
// their own writes, and waking every one of them on each commit sent most
// of them through the scheduler for nothing (the runnable goroutines that
// delay every other request, reads included).
type waiters []*waiter

func (w waiters) Len() int           { return len(w) }
func (w waiters) Less(i, j int) bool { return w[i].seq < w[j].seq }
func (w waiters) Swap(i, j int) {
	w[i], w[j] = w[j], w[i]
	w[i].index, w[j].index = i, j
}
func (w *waiters) Push(x any) {
	v := x.(*waiter)
	v.index = len(*w)
	*w = append(*w, v)
}
func (w *waiters) Pop() any {
	old := *w
	v := old[len(old)-1]
	old[len(old)-1] = nil
	*w = old[:len(old)-1]
	v.index = -1
	return v
}

// wakeLocked wakes the waiters the applied sequence satisfies, or all of
// them (the store stopped or paused: they must look). s.mu is held.
func (s *Store) wakeLocked(all bool) {
	for len(s.waiting) > 0 && (all || s.waiting[0].seq <= s.applied) {
		close(heap.Pop(&s.waiting).(*waiter).ch)
	}
}

// waitLocked registers a waiter for seq. s.mu is held.
func (s *Store) waitLocked(seq uint64) *waiter {
	w := &waiter{seq: seq, ch: make(chan struct{})}
	heap.Push(&s.waiting, w)
	return w
}

// forget removes a waiter that stops waiting (its ctx ended).
func (s *Store) forget(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w.index >= 0 {
		heap.Remove(&s.waiting, w.index)
	}
}
