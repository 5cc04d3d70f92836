package backtest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
	"github.com/seed-0809debe/posture/projections/backtest"
)

// emptyLog is a log without events: a backtest over it ends as soon as its
// projections are open.
type emptyLog struct{}

func (emptyLog) LastSeq(context.Context) (uint64, error) { return 0, nil }
func (emptyLog) Read(context.Context, uint64, uint64, func([]posture.Event) error) error {
	return nil
}

// TestJobsAreBounded: one backtest runs at a time (a second start is
// refused with SERVER_TOO_MANY_REQUESTS and a retry delay), and a finished
// job makes room; beyond MaxKept the oldest finished job is forgotten.
func TestJobsAreBounded(t *testing.T) {
	release := make(chan struct{})
	var opens atomic.Int32
	jobs := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{}, MaxKept: 2,
		Open: func(ctx context.Context, _ time.Time) (*projections.Store, func(), error) {
			if opens.Add(1) <= 2 { // the first job's two projections wait
				select {
				case <-release:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			s, err := projections.Open(projections.Options{Dir: "p", FS: vfs.NewMem()})
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		}})
	defer jobs.Close()

	first, _, err := jobs.Start(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, retry, err := jobs.Start(nil, time.Time{}, time.Time{}); posture.CodeOf(err) != posture.CodeTooManyRequests || retry <= 0 {
		t.Fatalf("a second start while one runs: %v (retry after %s), want SERVER_TOO_MANY_REQUESTS", err, retry)
	}
	close(release)
	jobs.Wait(t.Context(), first)
	view, ok := jobs.Job(first)
	if v := view.(backtest.JobView); !ok || v.Status != backtest.StatusDone || v.Report == nil || v.Report.Changed {
		t.Fatalf("first job: %+v", view)
	}
	var ids []string
	for range 2 {
		id, _, err := jobs.Start(nil, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		jobs.Wait(t.Context(), id)
		ids = append(ids, id)
	}
	if _, ok := jobs.Job(first); ok {
		t.Fatal("the oldest finished job is still kept beyond MaxKept")
	}
	for _, id := range ids {
		if _, ok := jobs.Job(id); !ok {
			t.Fatalf("job %s was forgotten", id)
		}
	}
}

// A job that fails with an error written for users says it; any other
// failure points to the node's log.
func TestFailedJobsSayWhatTheyCan(t *testing.T) {
	refused := &posture.Error{Code: posture.CodeUnavailable, Message: "the event log's server refuses another consumer"}
	for err, want := range map[error]string{
		refused:                    "the backtest failed: the event log's server refuses another consumer",
		errors.New("disk on fire"): "the backtest failed; the node's log says why",
	} {
		jobs := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{},
			Open: func(context.Context, time.Time) (*projections.Store, func(), error) { return nil, nil, err }})
		id, _, startErr := jobs.Start(nil, time.Time{}, time.Time{})
		if startErr != nil {
			t.Fatal(startErr)
		}
		jobs.Wait(t.Context(), id)
		view, _ := jobs.Job(id)
		if v := view.(backtest.JobView); v.Status != backtest.StatusFailed || v.Error != want {
			t.Errorf("failed with %v: %+v, want %q", err, v, want)
		}
		jobs.Close()
	}
}

// blockedOpen is an Opener that waits for its context: a job that uses it
// runs until it is stopped.
func blockedOpen(ctx context.Context, _ time.Time) (*projections.Store, func(), error) {
	<-ctx.Done()
	return nil, nil, ctx.Err()
}

// TestStopAJob: Stop ends a running job and forgets it, which frees the
// node's backtest slot; a finished job is forgotten; an unknown one is
// reported.
func TestStopAJob(t *testing.T) {
	jobs := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{}, Open: blockedOpen})
	defer jobs.Close()
	id, _, err := jobs.Start(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := jobs.Start(nil, time.Time{}, time.Time{}); posture.CodeOf(err) != posture.CodeTooManyRequests {
		t.Fatalf("a second start while one runs: %v", err)
	}
	if found, ended := jobs.Stop(t.Context(), id, "test"); !found || !ended {
		t.Fatalf("Stop of a running job: found %t, ended %t", found, ended)
	}
	if v, ok := jobs.Job(id); ok {
		t.Fatalf("a stopped job is still kept: %+v", v)
	}
	if found, _ := jobs.Stop(t.Context(), id, "test"); found {
		t.Fatal("Stop of a forgotten job reported one")
	}
	// The slot is free: the next job starts, and a finished one is
	// forgotten by Stop at once.
	done := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{},
		Open: func(context.Context, time.Time) (*projections.Store, func(), error) {
			s, err := projections.Open(projections.Options{Dir: "p", FS: vfs.NewMem()})
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		}})
	defer done.Close()
	if _, _, err := jobs.Start(nil, time.Time{}, time.Time{}); err != nil {
		t.Fatalf("a start after the running job was stopped: %v", err)
	}
	fin, _, err := done.Start(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	done.Wait(t.Context(), fin)
	if found, ended := done.Stop(t.Context(), fin, "test"); !found || !ended {
		t.Fatalf("Stop of a finished job: found %t, ended %t", found, ended)
	}
	if _, ok := done.Job(fin); ok {
		t.Fatal("a finished job is still kept after Stop")
	}
}

// TestJobTimeout: a job that runs past its limit fails and says so.
func TestJobTimeout(t *testing.T) {
	jobs := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{}, Open: blockedOpen, Timeout: 50 * time.Millisecond})
	defer jobs.Close()
	id, _, err := jobs.Start(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	jobs.Wait(t.Context(), id)
	view, _ := jobs.Job(id)
	if v := view.(backtest.JobView); v.Status != backtest.StatusFailed || !strings.Contains(v.Error, "stopped after 50ms, its limit (--backtest-timeout)") {
		t.Fatalf("a job past its limit: %+v", v)
	}
}

// TestStopASlowJob: a job that takes time to end after Stop is said to be
// stopping, keeps its place among the running meanwhile, and is forgotten
// once it has ended.
func TestStopASlowJob(t *testing.T) {
	release := make(chan struct{})
	jobs := backtest.NewJobs(backtest.JobsOptions{Log: emptyLog{},
		Open: func(ctx context.Context, _ time.Time) (*projections.Store, func(), error) {
			<-ctx.Done()
			<-release // it ends only when the test says so
			return nil, nil, ctx.Err()
		}})
	defer jobs.Close()
	id, _, err := jobs.Start(nil, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if found, ended := jobs.Stop(ctx, id, "test"); !found || ended {
		t.Fatalf("Stop of a job that does not end: found %t, ended %t", found, ended)
	}
	if v, ok := jobs.Job(id); !ok || v.(backtest.JobView).Status != backtest.StatusStopping {
		t.Fatalf("a job stopping: %+v", v)
	}
	if _, _, err := jobs.Start(nil, time.Time{}, time.Time{}); posture.CodeOf(err) != posture.CodeTooManyRequests {
		t.Fatalf("a start while a job is stopping: %v", err)
	}
	close(release)
	jobs.Wait(t.Context(), id)
	if v, ok := jobs.Job(id); ok {
		t.Fatalf("a stopped job is kept once ended: %+v", v)
	}
}
