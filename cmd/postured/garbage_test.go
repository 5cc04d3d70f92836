package main

import (
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// garbageFlood sends count requests with well-formed, unknown zt-session
// tokens from workers goroutines and returns the statuses seen.
func (n *testNode) garbageFlood(t testing.TB, count, workers int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(count) {
				req, _ := http.NewRequest(http.MethodGet, n.srv.URL+api.ClientBase+"/current-api-session", nil)
				req.Header.Set(api.HeaderSession, posture.NewToken())
				resp, err := n.http.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				statuses[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return statuses
}

// TestGarbageTokenFloodIsCheap: 640 unknown tokens sent by 32 concurrent
// clients are all answered 401, and cost the log a few stream info requests,
// not one each: catch-ups are limited per source, and concurrent ones share
// their reads of the log. Counted on the node's NATS connection.
func TestGarbageTokenFloodIsCheap(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	const tokens = 640
	before := n.elog.Conn().Stats().OutMsgs
	start := time.Now()
	statuses := n.garbageFlood(t, tokens, 32)
	sent := n.elog.Conn().Stats().OutMsgs - before
	if statuses[http.StatusUnauthorized] != tokens {
		t.Fatalf("statuses %v, want %d × 401", statuses, tokens)
	}
	if sent > 40 {
		t.Errorf("%d unknown tokens made the node send %d NATS requests", tokens, sent)
	}
	t.Logf("%d unknown tokens in %v: %d NATS messages, %d log reads", tokens, time.Since(start).Round(time.Millisecond), sent, n.logLast.Reads())
}

// TestUnknownTokensShareLogReads: without the per-source limit (a flood
// from many addresses), concurrent catch-ups share their reads of the log.
func TestUnknownTokensShareLogReads(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	n.auth.CatchUpBurst = 1 << 30
	const tokens = 640
	statuses := n.garbageFlood(t, tokens, 32)
	if statuses[http.StatusUnauthorized] != tokens {
		t.Fatalf("statuses %v, want %d × 401", statuses, tokens)
	}
	if reads := n.logLast.Reads(); reads > tokens/4 {
		t.Errorf("%d catch-ups made %d reads of the log", tokens, reads)
	} else {
		t.Logf("%d catch-ups, %d reads of the log", tokens, reads)
	}
}

// BenchmarkGarbageTokens: the cost of answering an unknown zt-session
// token, from one source (the per-source limit applies) and with the limit
// off (many sources; catch-ups are coalesced only). Reports the log reads
// (stream info requests) per token.
func BenchmarkGarbageTokens(b *testing.B) {
	for _, c := range []struct {
		name  string
		burst int
	}{{"one-source", 0}, {"no-source-limit", 1 << 30}} {
		b.Run(c.name, func(b *testing.B) {
			n := startTestNode(b, defaultTestConfig(b.TempDir()))
			n.auth.CatchUpBurst = c.burst
			b.ResetTimer()
			statuses := n.garbageFlood(b, b.N, 64)
			b.StopTimer()
			if statuses[http.StatusUnauthorized] != b.N {
				b.Fatalf("statuses %v", statuses)
			}
			b.ReportMetric(float64(n.logLast.Reads())/float64(b.N), "reads/token")
		})
	}
}
