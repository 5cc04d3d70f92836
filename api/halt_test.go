package api_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// fakeBarrier is a projection that never moves by itself.
type fakeBarrier struct{ fakeProgress }

func (*fakeBarrier) LastModelSeq() uint64 { return 0 }

// A wait for an event beyond the message the projection is stopped at
// fails at once with 503, also when the stop comes during the wait; a wait
// for an event before it is unaffected.
func TestHaltBarrier(t *testing.T) {
	h := &api.Halt{}
	b := &fakeBarrier{}
	b.set(4, time.Time{})
	hb := h.Barrier(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	done := make(chan error, 1)
	go func() { done <- hb.WaitFor(ctx, 9) }()
	h.Stop(6, "not JSON")
	if err := <-done; posture.CodeOf(err) != posture.CodeUnavailable {
		t.Fatalf("a wait across a stop: %v, want SERVICE_UNAVAILABLE", err)
	}
	if err := hb.WaitFor(ctx, 6); posture.CodeOf(err) != posture.CodeUnavailable {
		t.Fatalf("a wait for the stopped sequence: %v", err)
	}
	if err := hb.WaitFor(ctx, 4); err != nil {
		t.Fatalf("a wait for an applied event: %v", err)
	}
	h.Resume()
	b.set(9, time.Time{})
	if err := hb.WaitFor(ctx, 9); err != nil {
		t.Fatalf("after the decision: %v", err)
	}
	if h.Total() != 1 {
		t.Fatalf("total %d", h.Total())
	}
}
