package eventlog_test

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/eventlog"
)

// BenchmarkCheckpointer is a checkpointer's own work: it reads 100,000
// posture-sized events already in the log as they are stored, hashes them
// and appends a signed checkpoint every 10,000. It reports events per
// second and the CPU time per event (the whole process's, which does
// nothing else meanwhile): what checkpoints add to the ingest of each
// event.
//
//	go test -run '^$' -bench Checkpointer -benchtime 3x ./eventlog/
func BenchmarkCheckpointer(b *testing.B) {
	const events = 100_000
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
		c, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 10_000, Interval: time.Hour, Sign: key.sign})
		if err != nil {
			b.Fatal(err)
		}
		cctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		b.StartTimer()
		cpuStart := processCPU(b)
		wg.Go(func() { _ = c.Run(cctx) })
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		if err := c.WaitFor(wctx, events); err != nil {
			b.Fatal(err)
		}
		cpu += processCPU(b) - cpuStart
		b.StopTimer()
		wcancel()
		cancel()
		wg.Wait()
		l.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1000/float64(events*b.N), "cpu-µs/event")
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
