package projections

import "testing"

func TestAnAdvanceWakesOnlyTheWaitersItSatisfies(t *testing.T) {
	s := &Store{}
	ws := map[uint64]*waiter{}
	for _, seq := range []uint64{5, 2, 9, 3} {
		ws[seq] = s.waitLocked(seq)
	}
	woken := func(seq uint64) bool {
		select {
		case <-ws[seq].ch:
			return true
		default:
			return false
		}
	}
	s.applied = 3
	s.wakeLocked(false)
	for seq, want := range map[uint64]bool{2: true, 3: true, 5: false, 9: false} {
		if got := woken(seq); got != want {
			t.Errorf("applied 3: waiter for %d woken %v, want %v", seq, got, want)
		}
	}
	// A waiter whose ctx ends is removed, not woken later.
	s.forget(ws[9])
	if len(s.waiting) != 1 || ws[9].index != -1 {
		t.Fatalf("after forget: %d waiting, index %d", len(s.waiting), ws[9].index)
	}
	s.forget(ws[9]) // twice is harmless
	// A stop or a pause wakes everyone, satisfied or not.
	s.wakeLocked(true)
	if !woken(5) || woken(9) || len(s.waiting) != 0 {
		t.Fatalf("wake all: 5 woken %v, 9 woken %v, %d left", woken(5), woken(9), len(s.waiting))
	}
}
