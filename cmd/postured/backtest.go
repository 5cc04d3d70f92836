package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/management"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
	"github.com/seed-0809debe/posture/projections/backtest"
)

// Exit codes of postured backtest: a pipeline can gate a change on them.
const (
	// exitChanged: with --fail-on-change, at least one decision changed.
	exitChanged = 1
	// exitBacktestFailed: the command line, the candidate or the log was
	// wrong, or the backtest could not run.
	exitBacktestFailed = 2
)

type backtestCmd struct {
	logFlags
	Candidate    string `required:"" type:"existingfile" help:"The candidate (JSON): {\"postureChecks\": {\"create\": [body], \"update\": {\"<id>\": body}, \"delete\": [\"<id>\"]}, \"servicePolicies\": {...}}, with the management API's bodies (an update is a full PUT body)."`
	From         string `help:"Start of the window, where the candidate applies (RFC 3339, or a duration from now such as -720h); default the start of the log."`
	Until        string `help:"End of the window (RFC 3339, taken to the end of its last digit, so 10:32:00Z includes 10:32:00.5; or a duration from now); default the end of the log."`
	JSON         bool   `name:"json" help:"Print the report as one JSON document."`
	FailOnChange bool   `name:"fail-on-change" help:"Exit 1 when any decision or transition changes (0: none changed; 2: the backtest could not run)."`
	Changes      int    `default:"50" help:"How many changes the table lists (0: all; --json lists them all)."`
	Snapshots    bool   `default:"true" negatable:"" help:"Start the window from the nearest snapshot of the node's projection at or before --from (<data-dir>/snapshots of a stopped node), with the events after it; --no-snapshots replays the log from its start (the report is the same)."`
}

func (b *backtestCmd) Run(ctx context.Context, s streams) error {
	now := time.Now()
	from, err := parseTime("from", b.From, false, now)
	if err != nil {
		return err
	}
	until, err := parseTime("until", b.Until, true, now)
	if err != nil {
		return err
	}
	if from.After(now) {
		// As the API refuses it: a window that starts later than the log
		// ends replays nothing, and a gate on it would pass whatever the
		// candidate changes.
		return usageError{fmt.Errorf("--from %q is in the future: the window starts at a moment of the log (a duration from now is negative, such as -720h)", b.From)}
	}
	if !from.IsZero() && !until.IsZero() && until.Before(from) {
		return usageError{errors.New("--until is before --from")}
	}
	if b.Changes < 0 {
		return usageError{fmt.Errorf("--changes may not be negative (0: all), not %d", b.Changes)}
	}
	failed := func(err error) error { return exitCodeError{code: exitBacktestFailed, err: err} }
	body, err := os.ReadFile(b.Candidate)
	if err != nil {
		return failed(err)
	}
	l, err := b.open(ctx)
	if err != nil {
		return failed(err)
	}
	defer l.Close()
	changes, err := parseCandidate(ctx, l.Log, body, from)
	if err != nil {
		return failed(fmt.Errorf("the candidate %s: %w", b.Candidate, err))
	}
	tmp, err := os.MkdirTemp("", "postured-backtest-")
	if err != nil {
		return failed(err)
	}
	defer os.RemoveAll(tmp)
	defer batchGC()()
	snaps := l.snapshots
	if !b.Snapshots {
		snaps = nil
	}
	rep, err := backtest.Run(ctx, backtest.Options{Log: l.Log, Open: backtestState(l.Log, snaps, tmp), Changes: changes, From: from, Until: until})
	if err != nil {
		return failed(err)
	}
	if b.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteText(s.out, b.Changes)
	}
	if err != nil {
		return failed(err)
	}
	if b.FailOnChange && rep.Changed {
		return exitCodeError{code: exitChanged, err: reported{errors.New("decisions changed")}}
	}
	return nil
}

// parseCandidate validates a candidate as the management API does, against
// the current model: the model events of the whole log (the API checks
// against the live projection, which is the same). The candidate's new
// entities are stamped with the window's start.
func parseCandidate(ctx context.Context, l *eventlog.Log, body []byte, from time.Time) ([]posture.Payload, error) {
	model, err := projections.Open(projections.Options{Dir: "model", FS: vfs.NewMem()})
	if err != nil {
		return nil, err
	}
	defer model.Close()
	var seq uint64
	err = l.Read(ctx, 1, 0, func(batch []posture.Event) error {
		var events []posture.Event
		for _, e := range batch {
			if e.Subject == posture.SubjectModel {
				seq++
				e.Seq = seq
				events = append(events, e)
			}
		}
		return model.Apply(events)
	})
	if err != nil {
		return nil, explainBad(err)
	}
	at := from
	if at.IsZero() {
		at = time.Now()
	}
	return management.ParseCandidate(model, body, at.UTC())
}

// backtestState is where a backtest's projections at the window's start
// come from: a copy of the nearest snapshot at or before from with the
// events after it applied, when snaps is set (a node's snapshots) and from
// is not the start of the log; otherwise a replay of the log from its start
// into a fresh directory under dir (without a write-ahead log: a window of
// a large fleet holds gigabytes that are better in the page cache than in
// the heap), or into memory when dir is "". A snapshot that does not fit
// (all of them later than from) also starts from an empty store. The two
// starts give the same state, and so the same report. The projections are
// lean (projections.Options.Lean): a backtest compares decisions and
// transitions, not audit history or the fleet summary. The caller removes
// dir.
func backtestState(l *eventlog.Log, snaps *projections.Snapshots, dir string) backtest.Opener {
	return func(ctx context.Context, from time.Time) (*projections.Store, func(), error) {
		if snaps != nil && !from.IsZero() {
			return snaps.OpenCopyAt(ctx, l, projections.Moment{At: from}, projections.CopyOptions{Lean: true,
				MemTableSize: backtestMemTable, CacheSize: backtestCache})
		}
		opts := projections.Options{Dir: "replay", FS: vfs.NewMem(), Lean: true, CacheSize: backtestCache}
		cleanup := func() {}
		if dir != "" {
			d, err := os.MkdirTemp(dir, "projection-")
			if err != nil {
				return nil, nil, err
			}
			opts = projections.Options{Dir: d, NoWAL: true, Scratch: true, Lean: true, CacheSize: backtestCache}
			cleanup = func() { os.RemoveAll(d) }
		}
		store, err := projections.Open(opts)
		if err != nil {
			cleanup()
			return nil, nil, err
		}
		release := func() { store.Close(); cleanup() }
		if !from.IsZero() {
			if _, err := replay(ctx, l, store, cutoff{until: from}, nil); err != nil {
				release()
				return nil, nil, err
			}
		}
		return store, release, nil
	}
}

// The Pebble memtable and block cache of a backtest's projections (a
// past-moment query's copy is smaller). The window of a large fleet reads
// the state of every identity again and again: with the default cache
// (128 MiB), reading and decompressing blocks again took about a tenth of
// the CPU of a 100,000-identity backtest. The cache is outside the Go heap.
const (
	backtestMemTable = 64 << 20
	backtestCache    = 512 << 20
)

// newBacktestJobs is the backtest runner of a node: over its log, starting
// from the node's snapshots (snaps may be nil: a replay into memory), each
// job stopped after timeout.
func newBacktestJobs(l *eventlog.Log, snaps *projections.Snapshots, now func() time.Time, log *slog.Logger, timeout time.Duration) *backtest.Jobs {
	return backtest.NewJobs(backtest.JobsOptions{Log: l, Open: backtestState(l, snaps, ""), Now: now, Logger: log, Timeout: timeout})
}
