package eventlog_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// BenchmarkCheckpointer is what checkpoints add to the ingest of each event,
// on a log of 100,000 posture-sized events, in CPU time per event (the
// whole process's, which does nothing else meanwhile) and events per second:
//
//   - consume: a consumer reads the log and decodes it, as the projection's
//     does (the baseline, without checkpoints);
//
//   - fed: the same consumer reads through a fed Checkpointer, which hashes
//     each message on the delivery goroutine and appends a checkpoint
//     every 10,000 (what serve runs);
//
//   - reader: a Checkpointer that reads the log with a reader of its own
//     (what a second consumer would add).
//
//     go test -run '^$' -bench Checkpointer -benchtime 3x ./eventlog/
func BenchmarkCheckpointer(b *testing.B) {
	const events = 100_000
	for _, mode := range []string{"consume", "fed", "reader"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			key := newTestKey(b)
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				l, err := eventlog.Open(ctx, eventlog.Options{Dir: b.TempDir()})
				if err != nil {
					b.Fatal(err)
				}
				appendEvents(b, l, events)
				c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 10_000, Interval: time.Hour, Sign: key.sign, Fed: mode == "fed"})
				if err != nil {
					b.Fatal(err)
				}
				cctx, cancel := context.WithCancel(ctx)
				var wg sync.WaitGroup
				b.StartTimer()
				cpuStart := processCPU(b)
				if mode != "consume" {
					wg.Go(func() { _ = c.Run(cctx) })
				}
				if mode != "reader" {
					var src interface {
						Consume(context.Context, uint64, func([]posture.Event) error) error
					} = l
					if mode == "fed" {
						src = c
					}
					// The consumer goes on after the last event: a fed
					// Checkpointer reads its checkpoints back through it.
					reached := make(chan struct{})
					var once sync.Once
					wg.Go(func() {
						_ = src.Consume(cctx, 1, func(batch []posture.Event) error {
							for _, e := range batch {
								if _, err := e.Decode(); err != nil {
									return err
								}
							}
							if batch[len(batch)-1].Seq >= events {
								once.Do(func() { close(reached) })
							}
							return nil
						})
					})
					<-reached
				}
				if mode != "consume" {
					wctx, wcancel := context.WithTimeout(ctx, time.Minute)
					if err := c.WaitFor(wctx, events); err != nil {
						b.Fatal(err)
					}
					wcancel()
				}
				cpu += processCPU(b) - cpuStart
				b.StopTimer()
				cancel()
				wg.Wait()
				l.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(events*b.N), "cpu-µs/event")
		})
	}
}

// appendEvents appends n posture-sized events from 16 writers.
func appendEvents(b *testing.B, l *eventlog.Log, n int64) {
	ctx := context.Background()
	now := time.Now()
	var next atomic.Int64
	var appenders sync.WaitGroup
	for range 16 {
		appenders.Go(func() {
			for next.Add(1) <= n {
				if _, err := l.Append(ctx, postureEvent(now)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	appenders.Wait()
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkVerify reads and checks a log of 100,000 posture-sized events
// covered by checkpoints of 10,000, as `postured audit verify` does, and
// reports events verified per second.
//
//	go test -run '^$' -bench Verify -benchtime 3x ./eventlog/
func BenchmarkVerify(b *testing.B) {
	const events = 100_000
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	key := newTestKey(b)
	c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 10_000, Interval: 50 * time.Millisecond, Sign: key.sign})
	if err != nil {
		b.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(cctx) })
	appendEvents(b, l, events)
	last, err := l.LastSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := c.WaitFor(wctx, last); err != nil {
		b.Fatal(err)
	}
	cancel()
	wg.Wait()

	b.ResetTimer()
	var v *eventlog.Verification
	for b.Loop() {
		if v, err = l.Verify(ctx, eventlog.VerifyOptions{Verify: key.verify}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if !v.OK() || v.Covered < events {
		b.Fatalf("%s", v.Summary())
	}
	b.ReportMetric(float64(v.Messages)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
