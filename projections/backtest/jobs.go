package backtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/seed-0809debe/posture"
)

// JobsOptions configures NewJobs.
type JobsOptions struct {
	Log  Source
	Open Opener
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxRunning bounds the backtests running at once (default 1: each
	// holds two projections, and Open may take them outside the node's
	// limit on past moments); a start beyond it is refused.
	MaxRunning int
	// MaxKept bounds the jobs kept, running or finished (default 16): the
	// oldest finished one is forgotten to make room.
	MaxKept int
	// Keep is how long a finished job's report is kept (default 1 hour).
	Keep time.Duration
	// Logger logs why a job failed (default: discard); the job shows a
	// message without the detail.
	Logger *slog.Logger
	// Timeout bounds how long a job runs (default 1 hour): past it, the
	// job stops and fails, so that a candidate too heavy for the window
	// does not hold the node's backtest slot and a core for days.
	Timeout time.Duration
}

// DefaultTimeout is JobsOptions.Timeout's default.
const DefaultTimeout = time.Hour

// Jobs runs backtests in the background and keeps their reports in memory
// for a while: a node restart forgets them (run the backtest again).
type Jobs struct {
	opts   JobsOptions
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	jobs map[string]*job
}

// JobView is a job as the API shows it.
type JobView struct {
	ID         string     `json:"id"`
	Status     string     `json:"status"` // running, stopping, done or failed
	CreatedAt  time.Time  `json:"createdAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	From       *time.Time `json:"from,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
	Progress   Progress   `json:"progress"`
	Error      string     `json:"error,omitempty"`
	Report     *Report    `json:"report,omitempty"`
}

// Progress is how far a job's replay of the window went.
type Progress struct {
	Seq     uint64 `json:"seq"`
	LastSeq uint64 `json:"lastSeq"`
}

// Job statuses.
const (
	StatusRunning = "running"
	// StatusStopping is a running job that was asked to stop and has not
	// ended yet; it is forgotten when it ends.
	StatusStopping = "stopping"
	StatusDone     = "done"
	StatusFailed   = "failed"
)

type job struct {
	view    JobView
	done    chan struct{} // closed when it ends
	stop    context.CancelFunc
	stopped bool // Stop was asked: the job is forgotten when it ends
}

// NewJobs returns a job runner; Close stops its jobs.
func NewJobs(opts JobsOptions) *Jobs {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = 1
	}
	if opts.MaxKept <= 0 {
		opts.MaxKept = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Keep <= 0 {
		opts.Keep = time.Hour
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Jobs{opts: opts, ctx: ctx, cancel: cancel, jobs: map[string]*job{}}
}

// retryAfter is what a refused start is told to wait.
const retryAfter = 10 * time.Second

// Start starts a backtest of changes over [from, until] and returns its
// job id. With MaxRunning backtests running, or MaxKept jobs kept and
// none finished, it refuses with SERVER_TOO_MANY_REQUESTS.
func (j *Jobs) Start(changes []posture.Payload, from, until time.Time) (string, time.Duration, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ctx.Err() != nil {
		return "", 0, errors.New("backtest: the job runner is closed")
	}
	now := j.opts.Now()
	running := 0
	var finished []*job
	for id, jb := range j.jobs {
		switch {
		case jb.view.Status == StatusRunning:
			running++
		case now.Sub(*jb.view.FinishedAt) > j.opts.Keep:
			delete(j.jobs, id)
		default:
			finished = append(finished, jb)
		}
	}
	busy := &posture.Error{Code: posture.CodeTooManyRequests, Message: "as many backtests as allowed are running; try again later"}
	if running >= j.opts.MaxRunning {
		return "", retryAfter, busy
	}
	sort.Slice(finished, func(a, b int) bool { return finished[a].view.FinishedAt.Before(*finished[b].view.FinishedAt) })
	for len(j.jobs) >= j.opts.MaxKept && len(finished) > 0 {
		delete(j.jobs, finished[0].view.ID)
		finished = finished[1:]
	}
	if len(j.jobs) >= j.opts.MaxKept {
		return "", retryAfter, busy
	}
	ctx, stop := context.WithTimeout(j.ctx, j.opts.Timeout)
	jb := &job{view: JobView{ID: posture.NewID(), Status: StatusRunning, CreatedAt: now.UTC()}, done: make(chan struct{}), stop: stop}
	if !from.IsZero() {
		jb.view.From = &from
	}
	if !until.IsZero() {
		jb.view.Until = &until
	}
	j.jobs[jb.view.ID] = jb
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer stop()
		rep, err := Run(ctx, Options{Log: j.opts.Log, Open: j.opts.Open, Changes: changes, From: from, Until: until,
			Progress: func(done, total uint64) {
				j.mu.Lock()
				jb.view.Progress = Progress{Seq: done, LastSeq: total}
				j.mu.Unlock()
			}})
		j.mu.Lock()
		defer j.mu.Unlock()
		defer close(jb.done)
		end := j.opts.Now().UTC()
		jb.view.FinishedAt = &end
		if jb.stopped {
			delete(j.jobs, jb.view.ID)
			return
		}
		if err != nil {
			j.opts.Logger.Error("backtest failed", "job", jb.view.ID, "err", err)
			jb.view.Status, jb.view.Error = StatusFailed, "the backtest failed; the node's log says why"
			// An error written for users (the event log's server refusing
			// another consumer, say) is said as it is.
			var pe *posture.Error
			if errors.As(err, &pe) && pe.Message != "" {
				jb.view.Error = "the backtest failed: " + pe.Message
			}
			switch {
			case j.ctx.Err() != nil:
				jb.view.Error = "the backtest was stopped: the node is shutting down"
			case errors.Is(ctx.Err(), context.DeadlineExceeded):
				jb.view.Error = fmt.Sprintf("the backtest was stopped after %s, its limit (--backtest-timeout): "+
					"try a shorter window, fewer changes, or `postured backtest` on a stopped node's data directory", j.opts.Timeout)
			}
			return
		}
		jb.view.Status, jb.view.Report = StatusDone, rep
	}()
	return jb.view.ID, 0, nil
}

// Job returns a job's view (a JobView), false when it is not kept.
func (j *Jobs) Job(id string) (any, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	jb, ok := j.jobs[id]
	if !ok {
		return nil, false
	}
	v := jb.view
	if jb.stopped {
		v.Status = StatusStopping
	}
	return v, true
}

// Wait waits until a job ends or ctx does; it returns at once for a job
// that is not kept.
func (j *Jobs) Wait(ctx context.Context, id string) {
	j.mu.Lock()
	jb, ok := j.jobs[id]
	j.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-jb.done:
	case <-ctx.Done():
	}
}

// Stop stops a running job and forgets it once it has ended, or forgets a
// finished one; the node's log says who (by). It waits for a running job
// to end, or ctx to: until then the job still holds its place among the
// running, with the status stopping. found is false when there is no such
// job, ended false when it is still stopping.
func (j *Jobs) Stop(ctx context.Context, id, by string) (found, ended bool) {
	j.mu.Lock()
	jb, ok := j.jobs[id]
	if !ok {
		j.mu.Unlock()
		return false, false
	}
	j.opts.Logger.Info("backtest stopped and forgotten", "job", id, "status", jb.view.Status, "by", by)
	if jb.view.Status != StatusRunning {
		delete(j.jobs, id)
		j.mu.Unlock()
		return true, true
	}
	jb.stopped = true
	jb.stop()
	j.mu.Unlock()
	select {
	case <-jb.done:
		return true, true
	case <-ctx.Done():
		return true, false
	}
}

// Close cancels the running jobs and waits for them.
func (j *Jobs) Close() error {
	j.cancel()
	j.wg.Wait()
	return nil
}
