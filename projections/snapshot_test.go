package projections_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// sliceLog is the log as a slice of events with sequences 1..n.
type sliceLog []posture.Event

func (l sliceLog) Read(ctx context.Context, from, to uint64, fn func([]posture.Event) error) error {
	if to == 0 || to > uint64(len(l)) {
		to = uint64(len(l))
	}
	for from = max(from, 1); from <= to; from += 4 {
		if err := fn(l[from-1 : min(from+3, to)]); err != nil {
			return err
		}
	}
	return nil
}

// liveWithSnapshots applies events into a store on disk in batches of
// batch, taking a snapshot after each, and returns the store (which the
// caller closes) and the snapshots.
func liveWithSnapshots(t *testing.T, events sliceLog, batch int, opts projections.SnapshotOptions) (*projections.Store, *projections.Snapshots) {
	t.Helper()
	dir := t.TempDir()
	store, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		t.Fatal(err)
	}
	opts.Dir = filepath.Join(dir, "snapshots")
	snaps, err := projections.OpenSnapshots(opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(events); i += batch {
		if err := store.Apply(events[i:min(i+batch, len(events))]); err != nil {
			t.Fatal(err)
		}
		if _, _, err := snaps.Take(context.Background(), store, events); err != nil {
			t.Fatal(err)
		}
	}
	return store, snaps
}

// fullReplay is the projection at m rebuilt from the start, in memory.
func fullReplay(t *testing.T, events sliceLog, m projections.Moment) string {
	t.Helper()
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	if _, err := s.ReplayTo(context.Background(), events, m, nil); err != nil {
		t.Fatal(err)
	}
	return dump(t, s)
}

// moments are the moments worth comparing: every event's time, a
// nanosecond before and after it, each snapshot's times, every sequence
// and random times across the history.
func moments(events sliceLog, snaps []projections.Snapshot, rng *rand.Rand) []projections.Moment {
	var out []projections.Moment
	for _, e := range events {
		out = append(out, projections.Moment{At: e.At}, projections.Moment{At: e.At.Add(-1)}, projections.Moment{At: e.At.Add(1)},
			projections.Moment{Seq: e.Seq})
	}
	for _, s := range snaps {
		out = append(out, projections.Moment{At: s.MaxAt}, projections.Moment{At: s.LastAt}, projections.Moment{Seq: s.Seq},
			projections.Moment{Seq: s.Seq + 1, At: s.MaxAt})
	}
	first, last := events[0].At, events[len(events)-1].At
	for range 40 {
		out = append(out, projections.Moment{At: first.Add(time.Duration(rng.Int64N(int64(last.Sub(first) + time.Minute))))})
	}
	return append(out, projections.Moment{})
}

func TestOpenAtEqualsFullReplay(t *testing.T) {
	events := sliceLog(readEvents(t, "foundation.events.jsonl"))
	// Clocks of two nodes a little apart: event times that go back now
	// and then. A snapshot serves a moment only when no event before it is
	// later than the moment.
	skewed := append(sliceLog(nil), events...)
	for i := 5; i < len(skewed); i += 6 {
		skewed[i].At = skewed[i].At.Add(-1500 * time.Millisecond)
	}
	for name, events := range map[string]sliceLog{"ordered": events, "skewed": skewed} {
		t.Run(name, func(t *testing.T) {
			store, snaps := liveWithSnapshots(t, events, 3, projections.SnapshotOptions{Keep: 6})
			defer store.Close()
			list := snaps.List()
			if len(list) != 6 || list[len(list)-1].Seq != uint64(len(events)) {
				t.Fatalf("snapshots %+v: want 6, the newest at %d", list, len(events))
			}
			rng := rand.New(rand.NewPCG(1, 2))
			fromSnapshot := 0
			for _, m := range moments(events, list, rng) {
				want := fullReplay(t, events, m)
				store, release, err := snaps.OpenAt(context.Background(), events, m)
				if err != nil {
					t.Fatal(err)
				}
				got := dump(t, store)
				release()
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("moment %+v: the snapshot's answer differs from a full replay (-full +snapshot):\n%s", m, diff)
				}
				if _, ok := snaps.Nearest(m); ok {
					fromSnapshot++
				}
			}
			if fromSnapshot < 100 {
				t.Fatalf("only %d moments started from a snapshot", fromSnapshot)
			}
		})
	}
}

func TestSnapshotsSurviveRestartAndDropBrokenOnes(t *testing.T) {
	events := sliceLog(readEvents(t, "foundation.events.jsonl"))
	store, snaps := liveWithSnapshots(t, events[:35], 5, projections.SnapshotOptions{})
	list := snaps.List()
	if len(list) != 7 {
		t.Fatalf("%d snapshots, want 7", len(list))
	}
	for i, s := range list {
		if s.Seq != uint64(5*(i+1)) || !s.LastAt.Equal(events[s.Seq-1].At) || s.Layout == 0 {
			t.Fatalf("snapshot %d: %+v", i, s)
		}
	}
	if _, ok, err := snaps.Take(context.Background(), store, events); err != nil || ok {
		t.Fatalf("a second snapshot at the same cursor: %v %v", ok, err)
	}
	dir := snaps.Dir()
	snapDir := func(seq uint64) string { return filepath.Join(dir, fmt.Sprintf("snap-%020d", seq)) }
	// Broken in every way found on a disk after a crash or a mistake.
	if err := os.Remove(filepath.Join(snapDir(10), "meta.json")); err != nil { // partial: no meta
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(snapDir(15), "meta.json"), []byte(`{"seq":15,`), 0o600); err != nil { // torn meta
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(snapDir(20), "db"), filepath.Join(dir, "db20")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(snapDir(25), "db"), filepath.Join(snapDir(20), "db")); err != nil { // cursor 25 under seq 20
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(dir, "db20"))
	// A directory named as Pebble's newest manifest marker, naming the
	// snapshot's own manifest: Pebble would follow it, a copy of the
	// snapshot would not.
	manifests, err := filepath.Glob(filepath.Join(snapDir(30), "db", "MANIFEST-*"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no manifest in snapshot 30: %v", err)
	}
	if err := os.Mkdir(filepath.Join(snapDir(30), "db", "marker.manifest.000099."+filepath.Base(manifests[0])), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"tmp-0123", "open-4567"} { // work in progress
		if err := os.MkdirAll(filepath.Join(dir, d, "db"), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	reopened, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for _, s := range reopened.List() {
		seqs = append(seqs, s.Seq)
	}
	if diff := cmp.Diff([]uint64{5, 35}, seqs); diff != "" {
		t.Fatalf("snapshots after restart (-want +got):\n%s", diff)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 {
		t.Fatalf("the snapshot directory holds %v: the broken and partial ones were not removed", names)
	}
	if diff := cmp.Diff(list[len(list)-1], reopened.List()[1], cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Fatalf("the newest snapshot changed over a restart:\n%s", diff)
	}
	// A store reopened at its cursor (a node restarted): its next snapshot
	// knows the latest event time of the history before it from the log.
	store.Close()
	store, err = projections.Open(projections.Options{Dir: filepath.Join(filepath.Dir(dir), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	os.RemoveAll(snapDir(35))
	reopened, err = projections.OpenSnapshots(projections.SnapshotOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Apply(events[35:38]); err != nil {
		t.Fatal(err)
	}
	snap, ok, err := reopened.Take(context.Background(), store, events)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	latest := time.Time{}
	for _, e := range events[:38] {
		if e.At.After(latest) {
			latest = e.At
		}
	}
	if snap.Seq != 38 || !snap.MaxAt.Equal(latest) {
		t.Fatalf("snapshot after a restart: %+v, want seq 38 and latest event time %s", snap, latest)
	}
	m := projections.Moment{At: events[36].At}
	s, release, err := reopened.OpenAt(context.Background(), events, m)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if diff := cmp.Diff(fullReplay(t, events, m), dump(t, s)); diff != "" {
		t.Fatalf("after a restart (-full +snapshot):\n%s", diff)
	}
}

func TestSnapshotsStaySpreadOverHistory(t *testing.T) {
	events := sliceLog(readEvents(t, "foundation.events.jsonl"))
	store, snaps := liveWithSnapshots(t, events, 1, projections.SnapshotOptions{Keep: 5})
	defer store.Close()
	last := uint64(len(events))
	var seqs []uint64
	prev := uint64(0)
	for _, s := range snaps.List() {
		seqs = append(seqs, s.Seq)
		// The events in 5 snapshots: no gap wider than twice the even one.
		if gap := s.Seq - prev; gap > 2*last/5+1 {
			t.Errorf("gap of %d events before snapshot %d", gap, s.Seq)
		}
		prev = s.Seq
	}
	if len(seqs) != 5 || seqs[4] != last {
		t.Fatalf("snapshots at %v: want 5, the newest at %d", seqs, last)
	}
}

func TestOpenAtIsLimited(t *testing.T) {
	events := sliceLog(readEvents(t, "foundation.events.jsonl"))
	store, snaps := liveWithSnapshots(t, events, 10, projections.SnapshotOptions{MaxOpen: 1})
	defer store.Close()
	_, release, err := snaps.OpenAt(context.Background(), events, projections.Moment{Seq: 12})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = snaps.OpenAt(context.Background(), events, projections.Moment{Seq: 12})
	var pe *posture.Error
	if !errors.As(err, &pe) || pe.Code != posture.CodeTooManyRequests || pe.RetryAfter <= 0 || !errors.Is(err, projections.ErrBusy) {
		t.Fatalf("a second past moment with MaxOpen 1: %v, want 429 with a RetryAfter", err)
	}
	release()
	release() // a second call does nothing
	_, release, err = snaps.OpenAt(context.Background(), events, projections.Moment{Seq: 12})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release()
	entries, _ := os.ReadDir(snaps.Dir())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "open-") {
			t.Fatalf("a released copy is left: %s", e.Name())
		}
	}
}

// TestSnapshotsRun takes a snapshot every Every events as the store
// applies them, and after Interval when fewer were applied.
func TestSnapshotsRun(t *testing.T) {
	events := sliceLog(readEvents(t, "foundation.events.jsonl"))
	dir := t.TempDir()
	store, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := clockwork.NewFakeClock()
	taken := make(chan projections.Snapshot, 10)
	snaps, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: filepath.Join(dir, "snapshots"), Every: 10,
		Interval: time.Minute, Clock: clock, Taken: func(s projections.Snapshot) { taken <- s }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- snaps.Run(ctx, store, events) }()
	next := func() projections.Snapshot {
		t.Helper()
		select {
		case s := <-taken:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("no snapshot")
		}
		return projections.Snapshot{}
	}
	for i := 0; i < 12; i += 4 { // 12 events in batches of 4: one snapshot, at 12
		if err := store.Apply(events[i : i+4]); err != nil {
			t.Fatal(err)
		}
	}
	if s := next(); s.Seq != 12 {
		t.Fatalf("snapshot at %d, want 12", s.Seq)
	}
	if err := store.Apply(events[12:15]); err != nil {
		t.Fatal(err)
	}
	if err := clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if s := next(); s.Seq != 15 || !s.TakenAt.Equal(clock.Now()) {
		t.Fatalf("snapshot after the interval: %+v, want at 15, taken at %s", s, clock.Now())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
