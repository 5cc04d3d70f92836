package eventlog_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
)

// BenchmarkAppendSync is the cost of the durability modes: synchronous
// appends to the embedded JetStream (file storage in the test's temporary
// directory) with --sync interval (the default: written to the OS,
// fsynced every two minutes) and --sync always (fsynced before each
// acknowledgement), from one writer and from 16. It reports appends per
// second and the median and 99th percentile latency of one append.
//
//	go test -run '^$' -bench AppendSync -benchtime 2000x ./eventlog/
func BenchmarkAppendSync(b *testing.B) {
	for _, mode := range []string{"interval", "always"} {
		for _, writers := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/writers=%d", mode, writers), func(b *testing.B) {
				ctx := context.Background()
				l, err := eventlog.Open(ctx, eventlog.Options{Dir: b.TempDir(), SyncAlways: mode == "always"})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				benchAppends(b, l, writers)
			})
		}
	}
}

// BenchmarkAppendClusterR3 is the same load on an R3 stream of a
// three-server cluster on loopback (each server with its own store): an
// append is acknowledged once a quorum of two holds it.
func BenchmarkAppendClusterR3(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			c := natstest.Start(b, 3)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := eventlog.Open(ctx, eventlog.Options{URLs: c.URLs, Replicas: 3})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			benchAppends(b, l, writers)
		})
	}
}

// postureEvent is an event of the size of a posture response.
func postureEvent(now time.Time) posture.Event {
	return posture.MustEvent(posture.PostureRecorded{IdentityID: "Xk3d9LmQ2a", APISessionID: "bT7w2PqZ9c", Responses: []posture.PostureResponse{
		{ID: "c0ffee1234", TypeID: "OS", Type: "Windows", Version: "10.0.19045", Build: "3803"}}}, now)
}

func benchAppends(b *testing.B, l *eventlog.Log, writers int) {
	ctx := context.Background()
	now := time.Now()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				start := time.Now()
				if _, err := l.Append(ctx, postureEvent(now)); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(0, "ns/op") // the rate and the percentiles say it
}
