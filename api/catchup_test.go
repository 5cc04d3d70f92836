package api_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
)

// TestCoalescerReadsAfterTheCall: callers that arrive while a read is in
// flight share the next read, never the one in flight (it may predate
// their request), and however many they are, that is one read.
func TestCoalescerReadsAfterTheCall(t *testing.T) {
	var seq atomic.Uint64 // the log's last sequence
	gate := make(chan struct{})
	started := make(chan struct{}, 10)
	c := &api.Coalescer{Every: time.Nanosecond, Read: func(ctx context.Context) (uint64, error) {
		v := seq.Load() // the value as of the read's start
		started <- struct{}{}
		<-gate
		return v, nil
	}}
	ctx := t.Context()

	first := make(chan uint64)
	go func() { v, _ := c.Last(ctx); first <- v }()
	<-started // read 1 in flight, it saw sequence 0

	seq.Store(7) // an append after read 1 started
	const later = 50
	var wg sync.WaitGroup
	got := make(chan uint64, later)
	for range later {
		wg.Go(func() { v, _ := c.Last(ctx); got <- v })
	}
	// Let the late callers queue up before read 1 ends (they cannot join it).
	for c.Pending() < later {
		time.Sleep(time.Millisecond)
	}
	gate <- struct{}{} // end read 1
	if v := <-first; v != 0 {
		t.Fatalf("first caller got %d, want 0", v)
	}
	<-started
	gate <- struct{}{} // end read 2
	wg.Wait()
	close(got)
	for v := range got {
		if v != 7 {
			t.Fatalf("a caller that came after read 1 started got %d, want 7", v)
		}
	}
	if r := c.Reads(); r != 2 {
		t.Fatalf("%d reads, want 2", r)
	}
}

// TestCoalescerCallerLeaves: a caller whose context ends stops waiting;
// the read goes on for the others.
func TestCoalescerCallerLeaves(t *testing.T) {
	gate := make(chan struct{})
	c := &api.Coalescer{Read: func(ctx context.Context) (uint64, error) { <-gate; return 3, nil }}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { _, err := c.Last(t.Context()); done <- err }()
	for c.Reads() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if _, err := c.Last(ctx); err == nil {
		t.Fatal("a cancelled caller got a value")
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
