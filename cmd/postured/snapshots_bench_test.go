package main

import (
	"context"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// BenchmarkPastMoment explains a decision at a random past moment of a
// 1,000,000-event log (replayLog's fleet: 1,000 identities, 50 services
// and policies, posture, activity and sessions), as policy advice ?at=
// does: open the nearest snapshot, apply the events after it, explain,
// release. The log and a live projection with its snapshots (every
// --snapshot-every events, --snapshots-keep kept, as serve takes them) are
// built once; each sub-benchmark is one run of b.N random moments and
// reports the median and the 90th percentile. "link" opens a snapshot as
// serve does (tables hard-linked into a scratch directory); "memory"
// copies it into an in-memory file system instead.
//
//	go test -run '^$' -bench PastMoment -benchtime 100x -timeout 60m ./cmd/postured/
//
// (task bench-past-moment). Building the log takes minutes.
func BenchmarkPastMoment(b *testing.B) {
	total, every, keep := *pastMomentEvents, *pastMomentEvery, *pastMomentKeep
	ctx := context.Background()
	start := time.Now()
	l := replayLog(b, total)
	b.Logf("log of %d events appended in %s", total, time.Since(start).Round(time.Second))
	dir := b.TempDir()
	live, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close()
	snapDir := filepath.Join(dir, "snapshots")
	snaps, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: snapDir, Keep: keep})
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	var takes []time.Duration
	restore := batchGC()
	for seq := every; seq <= uint64(total); seq += every {
		if _, err := live.ReplayTo(ctx, l, projections.Moment{Seq: seq}, nil); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if _, _, err := snaps.Take(ctx, live, l); err != nil {
			b.Fatal(err)
		}
		takes = append(takes, time.Since(t0))
	}
	restore()
	b.Logf("projection with %d snapshots built in %s; a snapshot takes %s at the median (max %s)", len(snaps.List()),
		time.Since(start).Round(time.Second), median(takes).Round(time.Millisecond), slices.Max(takes).Round(time.Millisecond))
	projBytes, _ := diskUse(filepath.Join(dir, "projections"), nil)
	seen := map[uint64]bool{}
	diskUse(filepath.Join(dir, "projections"), seen)
	snapBytes, _ := diskUse(snapDir, seen)
	b.Logf("disk: projection %d MiB; snapshots %d MiB more (files not shared with the projection)", projBytes>>20, snapBytes>>20)
	start = time.Now()
	if _, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: snapDir}); err != nil {
		b.Fatal(err)
	}
	b.Logf("opening the %d snapshots (each checked) took %s", len(snaps.List()), time.Since(start).Round(time.Millisecond))

	var first, last posture.Event
	if first, err = l.Get(ctx, 1); err != nil {
		b.Fatal(err)
	}
	if last, err = l.Get(ctx, uint64(total)); err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, snaps *projections.Snapshots, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		span := int64(last.At.Sub(first.At))
		var times []time.Duration
		b.ResetTimer()
		for range b.N {
			at := first.At.Add(time.Duration(rng.Int64N(span)))
			i := rng.IntN(1000)
			identity, service := fmt.Sprintf("id%04d", i), fmt.Sprintf("svc%02d", i%10+10*rng.IntN(5))
			t0 := time.Now()
			x, err := explainAt(ctx, l, snaps, identity, service, posture.Dial, at)
			if err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
			if x.IdentityID != identity || len(x.APISessions) != 1 {
				b.Fatalf("explanation at %s: %+v", at, x)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
		b.ReportMetric(float64(percentile(times, 0.9).Microseconds())/1000, "p90-ms")
	}
	for i := range 5 {
		b.Run(fmt.Sprintf("link/run%d", i+1), func(b *testing.B) { run(b, snaps, uint64(i)) })
	}
	// The floor: moments at a snapshot's latest event time, nothing to
	// apply after it (copy, open, explain, release).
	b.Run("at-snapshot", func(b *testing.B) {
		list := snaps.List()
		var times []time.Duration
		for i := range b.N {
			s := list[i%len(list)]
			identity := fmt.Sprintf("id%04d", i%1000)
			t0 := time.Now()
			if _, err := explainAt(ctx, l, snaps, identity, fmt.Sprintf("svc%02d", i%10), posture.Dial, s.MaxAt); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
		}
		b.ReportMetric(float64(median(times).Microseconds())/1000, "median-ms")
	})
	inMemory, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: snapDir, OpenInMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1 {
		b.Run(fmt.Sprintf("memory/run%d", i+1), func(b *testing.B) { run(b, inMemory, uint64(i)) })
	}
}

var (
	pastMomentEvents = flag.Int("past-moment-events", 1_000_000, "events in BenchmarkPastMoment's log")
	pastMomentEvery  = flag.Uint64("past-moment-every", 10_000, "BenchmarkPastMoment's --snapshot-every")
	pastMomentKeep   = flag.Int("past-moment-keep", 48, "BenchmarkPastMoment's --snapshots-keep")
)

func median(d []time.Duration) time.Duration { return percentile(d, 0.5) }

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// diskUse sums the sizes of the files under dir, counting each inode once
// and skipping those already in seen (which it adds to when not nil).
func diskUse(dir string, seen map[uint64]bool) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && seen != nil {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	return total, err
}
