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
	"github.com/seed-0809debe/posture/backtest"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
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
	Until        string `help:"End of the window (RFC 3339, whole seconds include that second; or a duration from now); default the end of the log."`
	JSON         bool   `name:"json" help:"Print the report as one JSON document."`
	FailOnChange bool   `name:"fail-on-change" help:"Exit 1 when any decision or transition changes (0: none changed; 2: the backtest could not run)."`
	Changes      int    `default:"50" help:"How many changes the table lists (0: all; --json lists them all)."`
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
	if !from.IsZero() && !until.IsZero() && until.Before(from) {
		return usageError{errors.New("--until is before --from")}
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
	rep, err := backtest.Run(ctx, backtest.Options{Log: l.Log, Open: stateOnDisk(l.Log, tmp), Changes: changes, From: from, Until: until})
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

// stateAt is where a backtest's projections at the window's start come
// from: a replay of the log into memory up to that time (an empty
// projection for the start of the log).
func stateAt(l *eventlog.Log) func(ctx context.Context, from time.Time) (*projections.Store, error) {
	return func(ctx context.Context, from time.Time) (*projections.Store, error) {
		if from.IsZero() {
			return projections.Open(projections.Options{Dir: "replay", FS: vfs.NewMem()})
		}
		return replayInMemory(ctx, l, cutoff{until: from})
	}
}

// stateOnDisk is stateAt with the projections in fresh directories under
// dir (without a write-ahead log, as a replay writes them): a window of a
// large fleet holds gigabytes that are better in the page cache than in
// the heap. The caller removes dir.
func stateOnDisk(l *eventlog.Log, dir string) func(ctx context.Context, from time.Time) (*projections.Store, error) {
	return func(ctx context.Context, from time.Time) (*projections.Store, error) {
		d, err := os.MkdirTemp(dir, "projection-")
		if err != nil {
			return nil, err
		}
		store, err := openRebuilt(d)
		if err != nil || from.IsZero() {
			return store, err
		}
		if _, err := replay(ctx, l, store, cutoff{until: from}, nil); err != nil {
			store.Close()
			return nil, err
		}
		return store, nil
	}
}

// newBacktestJobs is the backtest runner of a node: over its log, with the
// same state at the window's start as the command's.
func newBacktestJobs(l *eventlog.Log, now func() time.Time, log *slog.Logger) *backtest.Jobs {
	return backtest.NewJobs(backtest.JobsOptions{Log: l, Open: stateAt(l), Now: now, Logger: log})
}
