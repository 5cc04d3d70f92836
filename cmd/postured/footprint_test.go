package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"syscall"

	"github.com/seed-0809debe/posture/projections"
)

// diskUsage is the space the files under dir take on disk (allocated
// blocks, preallocation included), as du(1) counts it.
func diskUsage(t testing.TB, dir string) int64 {
	t.Helper()
	var total int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && !info.IsDir() {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// TestDiskFootprint measures the disk a node takes for a log of 100,000
// events of the replay benchmark's mix (posture responses, sessions, API
// session activity over 1,000 identities), log and live projection (with
// its write-ahead log), and keeps the projection within a small multiple
// of the log: it used to take 141 MiB for a few hundred events, two
// write-ahead log files preallocated at 70 MiB each.
//
//	go test -run TestDiskFootprint -v ./cmd/postured/
func TestDiskFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("appends 100,000 events")
	}
	total := 100_000
	if n, err := strconv.Atoi(os.Getenv("POSTURED_FOOTPRINT_EVENTS")); err == nil && n > 0 {
		total = n // a longer measure: POSTURED_FOOTPRINT_EVENTS=1000000
	}
	l := replayLog(t, total)
	dir := t.TempDir()
	store, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- store.Run(ctx, l) }()
	wctx, wcancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer wcancel()
	if err := store.WaitFor(wctx, uint64(total)); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	logBytes := diskUsage(t, l.Space().Dir)
	projBytes := diskUsage(t, filepath.Join(dir, "projections"))
	perMillion := func(b int64) float64 { return float64(b) / float64(total) * 1e6 / (1 << 30) }
	t.Logf("%d events: log %.1f MiB (%.0f bytes/event), projection %.1f MiB (%.0f bytes/event); per million events: log %.2f GiB, projection %.2f GiB",
		total, float64(logBytes)/(1<<20), float64(logBytes)/float64(total), float64(projBytes)/(1<<20), float64(projBytes)/float64(total),
		perMillion(logBytes), perMillion(projBytes))
	if projBytes > 3*logBytes+48<<20 { // three times the log, and two write-ahead log files
		t.Fatalf("the projection takes %d bytes for a log of %d", projBytes, logBytes)
	}
}
