package eventlog_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
)

func openClusterLog(t testing.TB, c *natstest.Cluster) *eventlog.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{URLs: c.URLs, Replicas: len(c.Servers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestClusterAppendSurvivesLeaderLoss appends from concurrent writers to an
// R3 stream and shuts the stream's leader down in the middle: every append
// that was acknowledged is in the log exactly once, none failed, and the
// sequences are the log's.
func TestClusterAppendSurvivesLeaderLoss(t *testing.T) {
	c := natstest.Start(t, 3)
	l := openClusterLog(t, c)
	const writers, total = 8, 1200
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	var next, acked atomic.Int64
	killed := make(chan string, 1)
	var mu sync.Mutex
	seqOf := map[string]uint64{} // event id -> acknowledged sequence
	var failed []error
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				if i == total/3 {
					leader := c.StreamLeader("POSTURED")
					if leader != nil {
						killed <- leader.Name()
						leader.Shutdown()
					}
				}
				e := event("load", int(i))
				seq, err := l.Append(ctx, e)
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					seqOf[e.ID] = seq
					acked.Add(1)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	select {
	case name := <-killed:
		t.Logf("shut down the stream leader %s after %d appends", name, total/3)
	default:
		t.Fatal("no stream leader to shut down")
	}
	if len(failed) > 0 {
		t.Fatalf("%d appends failed, first: %v", len(failed), failed[0])
	}

	count := map[string]int{}
	var events []posture.Event
	rctx, rcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer rcancel()
	if err := l.Read(rctx, 1, 0, func(b []posture.Event) error {
		events = append(events, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		count[e.ID]++
		if seq, ok := seqOf[e.ID]; ok && seq != e.Seq {
			t.Errorf("event %s acknowledged at %d, stored at %d", e.ID, seq, e.Seq)
		}
	}
	for id := range seqOf {
		if count[id] != 1 {
			t.Errorf("acknowledged event %s is in the log %d times", id, count[id])
		}
	}
	if len(events) != int(acked.Load()) {
		t.Errorf("the log holds %d events, %d were acknowledged", len(events), acked.Load())
	}
}

// TestNodeRegistry: nodes announce themselves, are listed by name, and a
// withdrawn node is gone.
func TestNodeRegistry(t *testing.T) {
	c := natstest.Start(t, 3)
	a, b := openClusterLog(t, c), openClusterLog(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	joined := time.Now().UTC().Truncate(time.Millisecond)
	if err := a.Announce(ctx, eventlog.Node{ID: "nodeA", Name: "a", APIAddress: "https://a:1280", JoinedAt: joined}); err != nil {
		t.Fatal(err)
	}
	if err := b.Announce(ctx, eventlog.Node{ID: "nodeB", Name: "b", APIAddress: "https://b:1280", JoinedAt: joined}); err != nil {
		t.Fatal(err)
	}
	// The registry is a replicated bucket read through a watcher: a change
	// shows within moments, not necessarily at once.
	converge := func(what string, ok func([]eventlog.Node) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			nodes, err := a.Nodes(ctx)
			if err == nil && ok(nodes) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v %v", what, nodes, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	converge("both announced", func(n []eventlog.Node) bool {
		return len(n) == 2 && n[0].ID == "nodeA" && n[1].APIAddress == "https://b:1280" && n[0].JoinedAt.Equal(joined)
	})
	if err := a.Withdraw(ctx, "nodeA"); err != nil {
		t.Fatal(err)
	}
	converge("after withdrawing a", func(n []eventlog.Node) bool { return len(n) == 1 && n[0].ID == "nodeB" })
	if err := b.Withdraw(ctx, "nodeB"); err != nil {
		t.Fatal(err)
	}
	converge("after withdrawing both", func(n []eventlog.Node) bool { return len(n) == 0 })
}
