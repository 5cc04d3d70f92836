package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// BenchmarkAppendApply measures events per second through the whole write
// path: synchronous appends to the embedded JetStream log from concurrent
// writers, the ordered consumer, and Pebble batches with the cursor. The
// clock stops when the projection has applied the last event.
func BenchmarkAppendApply(b *testing.B) {
	for _, writers := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchAppend(b, writers, true)
		})
	}
}

// BenchmarkAppend is the raw synchronous append rate, for comparison.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchAppend(b, writers, false)
		})
	}
}

func benchAppend(b *testing.B, writers int, project bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := b.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	store, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	var wg sync.WaitGroup
	if project {
		wg.Add(1)
		go func() { defer wg.Done(); _ = store.Run(ctx, l) }()
	}
	now := time.Now()
	var next atomic.Int64
	var last atomic.Uint64
	b.ResetTimer()
	var writersWG sync.WaitGroup
	for w := 0; w < writers; w++ {
		writersWG.Add(1)
		go func() {
			defer writersWG.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				e := posture.MustEvent(posture.APISessionTouched{ID: "s", IdentityID: fmt.Sprintf("id%d", i%1000), At: now}, now)
				seq, err := l.Append(ctx, e)
				if err != nil {
					b.Error(err)
					return
				}
				for {
					cur := last.Load()
					if seq <= cur || last.CompareAndSwap(cur, seq) {
						break
					}
				}
			}
		}()
	}
	writersWG.Wait()
	if project {
		if err := store.WaitFor(ctx, last.Load()); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	cancel()
	wg.Wait()
}
