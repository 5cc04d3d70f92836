package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/cmd/postured/datadir"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
	"github.com/seed-0809debe/posture/projections"
)

// newCheckpointer is the node's checkpointer, signing with the CA key, or
// nil when --no-checkpoints is set.
func (n *node) newCheckpointer(s *serveCmd) (*eventlog.Checkpointer, error) {
	if s.NoCheckpoints {
		return nil, nil
	}
	cert := n.ca.Certificate()
	c, err := eventlog.NewCheckpointer(n.elog, eventlog.CheckpointOptions{
		Every:    s.CheckpointEvery,
		Interval: s.CheckpointInterval,
		Sign:     func(msg []byte) ([]byte, error) { return n.ca.SignStatement(eventlog.CheckpointPurpose, msg) },
		KeyID:    pki.KeyID(cert),
		Verify:   checkpointVerifier(cert),
		Logger:   n.log,
		Fed:      true,
		Now:      n.clock.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	return c, nil
}

// checkpointMetrics registers the checkpointer's position as a metric.
func (n *node) checkpointMetrics() {
	if n.checkpointer == nil {
		return
	}
	n.metrics.Registry().MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "postured_checkpoint_covered_sequence",
		Help: "The last log sequence covered by a signed checkpoint this node has read back.",
	}, func() float64 { return float64(n.checkpointer.Covered()) }))
}

// runCheckpoints runs the checkpointer until ctx ends; it is fed by the
// projection's consumer (projectionSource). A checkpointer that stops is
// logged, not fatal: the node keeps serving, and audit verify reports the
// events left uncovered.
func (n *node) runCheckpoints(ctx context.Context) {
	defer close(n.checkpointsDone)
	if n.checkpointer == nil {
		return
	}
	if err := n.checkpointer.Run(ctx); err != nil && ctx.Err() == nil {
		n.log.Error("checkpoints stopped: events appended from now on are not covered by a signed checkpoint", "err", err)
	}
}

// verifyRebuilt checks the whole log against its checkpoints, as audit
// verify does, when the projection is built from the log's start at this
// start (a new node, a restore, a projection removed): a running node
// hashes only what no checkpoint covers yet, so one rebuilt from a log
// altered in its checked range would serve that history without a word.
// A log that does not verify is logged as an error and shown by /readyz
// (logAltered); the node stays ready, as with missing messages.
func (n *node) verifyRebuilt(ctx context.Context) {
	if !n.rebuilding || n.checkpointer == nil {
		return
	}
	v, err := n.elog.Verify(ctx, eventlog.VerifyOptions{Verify: checkpointVerifier(n.ca.Certificate()), MaxProblems: 10})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		n.log.Warn("verifying the log the projection was rebuilt from", "err", err)
	case !v.OK():
		what := v.Summary()
		n.altered.Store(&what)
		n.log.Error("the log the projection was rebuilt from does not match its signed checkpoints: its history was altered or damaged; "+
			"run postured audit verify, then restore the log from a backup", "finding", what)
	case v.Checkpoints > 0: // a new log has none yet: nothing to say
		n.log.Info("the log the projection was rebuilt from matches its signed checkpoints", "covered", v.Covered)
	}
}

// projectionSource is the log as the projection reads it: through the
// checkpointer, which hashes each message as it is delivered instead of
// reading the log a second time.
func (n *node) projectionSource() projections.Source {
	if n.checkpointer == nil {
		return n.elog
	}
	return n.checkpointer
}

func checkpointVerifier(cert *x509.Certificate) func(msg, sig []byte) error {
	return func(msg, sig []byte) error {
		err := pki.VerifyStatement(cert, eventlog.CheckpointPurpose, msg, sig)
		if errors.Is(err, pki.ErrBadStatementSignature) {
			return errNotSigned
		}
		return err
	}
}

// errNotSigned is a checkpoint signature that does not verify.
var errNotSigned = errors.New("another key signed it, or it was changed since")

type auditVerifyCmd struct {
	logFlags
	CA          string `name:"ca" help:"The CA certificate (PEM) that signs the checkpoints (default: <data-dir>/pki/ca.pem)."`
	JSON        bool   `name:"json" help:"Print the whole verification as JSON instead of a summary."`
	MaxProblems int    `default:"20" help:"Problems listed at most."`
	Projection  bool   `help:"Also rebuild the projection from the log, up to where the node's projection (<data-dir>/projections) applied it, and compare the two key by key, and each snapshot (<data-dir>/snapshots) on the way: a projection or snapshot changed outside the log (while the node was stopped) does not match."`
}

// projectionCheck is what --projection found.
type projectionCheck struct {
	// Seq is the sequence the node's projection applied the log to, and
	// the rebuild stopped at.
	Seq uint64 `json:"seq"`
	// Snapshots counts the snapshots compared on the way.
	Snapshots int `json:"snapshots"`
	// Differences counts the keys that differ; Keys describes the first
	// of them (--max-problems), a snapshot's named with its sequence.
	Differences int      `json:"differences"`
	Keys        []string `json:"keys,omitempty"`
	// Notes are what was not compared, and why.
	Notes []string `json:"notes,omitempty"`
}

// checkProjection rebuilds the projection from l into a scratch directory
// of the data directory, up to the node's cursor, comparing it on the way
// with each snapshot at the snapshot's sequence, and at the end with the
// node's projection.
func (a *auditVerifyCmd) checkProjection(ctx context.Context, l *offlineLog, s streams) (*projectionCheck, error) {
	dir := filepath.Join(a.DataDir, "projections")
	seq, err := projections.AppliedThrough(dir)
	if err != nil {
		return nil, fmt.Errorf("read how far the node's projection applied the log: %w", err)
	}
	if seq == 0 {
		return nil, fmt.Errorf("no projection to compare at %s: --projection compares a node's projection with the log, "+
			"so give the --data-dir of that node, stopped", dir)
	}
	scratch, err := os.MkdirTemp(a.DataDir, "verify-projection-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(scratch)
	store, err := openRebuilt(scratch)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	check := &projectionCheck{Seq: seq}
	found := func(k string) {
		if len(check.Keys) < a.MaxProblems {
			check.Keys = append(check.Keys, k)
		}
		check.Differences++
	}
	// compare rebuilds up to at and compares with dir, named name; the
	// findings of a snapshot carry its name.
	compare := func(at uint64, dir, name string, snap *projections.Snapshot) error {
		bar := newProgress(s.err)
		_, err := rebuild(ctx, l.Log, store, cutoff{toSeq: at}, bar.update)
		bar.done()
		if err != nil {
			return fmt.Errorf("rebuild the projection from the log: %w", err)
		}
		if store.Cursor() != at {
			if snap != nil {
				found(fmt.Sprintf("%s: the log ends at sequence %d, before it", name, store.Cursor()))
				return nil
			}
			return fmt.Errorf("the log ends at sequence %d, before %s (%d): nothing to compare with", store.Cursor(), name, at)
		}
		keys, n, err := store.Compare(dir, max(a.MaxProblems-len(check.Keys), 0))
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, k := range keys {
			if snap != nil {
				k = name + ": " + k
			}
			check.Keys = append(check.Keys, k)
		}
		check.Differences += n
		if snap != nil {
			// The times decide which snapshot serves a past moment.
			lastAt, maxAt := store.EventTimes()
			if !snap.LastAt.Equal(lastAt) {
				found(fmt.Sprintf("%s: lastEventAt %s, but the event at %d is of %s", name, snap.LastAt.Format(time.RFC3339Nano), at, lastAt.Format(time.RFC3339Nano)))
			}
			if !snap.MaxAt.Equal(maxAt) {
				found(fmt.Sprintf("%s: maxEventAt %s, but the latest event up to %d is of %s", name, snap.MaxAt.Format(time.RFC3339Nano), at, maxAt.Format(time.RFC3339Nano)))
			}
			check.Snapshots++
		}
		return nil
	}
	snapDir := filepath.Join(a.DataDir, "snapshots")
	var snaps []projections.Snapshot
	if dirExists(snapDir) {
		var broken []projections.BrokenSnapshot
		if snaps, broken, err = projections.InspectSnapshots(snapDir); err != nil {
			return nil, err
		}
		for _, b := range broken {
			name := filepath.Base(b.Dir)
			if b.Seq != 0 {
				name = strconv.FormatUint(b.Seq, 10)
			}
			// One of an earlier layout is a node's of an earlier build: no
			// node or command uses it, and the node removes it when it next
			// starts.
			var le *projections.LayoutError
			if errors.As(b.Err, &le) && le.Have < le.Want {
				check.Notes = append(check.Notes, fmt.Sprintf("snapshot %s: of layout %d, not compared: the node removes it when it next starts", name, le.Have))
				continue
			}
			found(fmt.Sprintf("snapshot %s: does not load: %v", name, b.Err))
		}
	}
	// In the order of the log: the snapshots up to the node's cursor, the
	// node's projection, the snapshots after it (which the node never
	// took).
	done := false
	for _, snap := range snaps { // oldest first
		if snap.Seq > seq && !done {
			if err := compare(seq, dir, "the node's projection", nil); err != nil {
				return nil, err
			}
			done = true
		}
		if err := compare(snap.Seq, projections.SnapshotDBDir(snapDir, snap.Seq), fmt.Sprintf("snapshot %d", snap.Seq), &snap); err != nil {
			return nil, err
		}
	}
	if !done {
		if err := compare(seq, dir, "the node's projection", nil); err != nil {
			return nil, err
		}
	}
	return check, nil
}

// appliedThrough is the last sequence the stopped node at the data
// directory applied: its projection's cursor, or its newest snapshot's.
func (a *auditVerifyCmd) appliedThrough() (uint64, error) {
	applied, err := projections.AppliedThrough(filepath.Join(a.DataDir, "projections"))
	if err != nil {
		return 0, fmt.Errorf("read how far this node's projection applied the log: %w", err)
	}
	if dir := filepath.Join(a.DataDir, "snapshots"); dirExists(dir) {
		snaps, _, err := projections.InspectSnapshots(dir)
		if err != nil {
			return 0, err
		}
		if len(snaps) > 0 {
			applied = max(applied, snaps[len(snaps)-1].Seq)
		}
	}
	return applied, nil
}

// errVerifyFailed is returned when the log does not verify, after the
// findings are printed.
var errVerifyFailed = errors.New("the log did not verify (see FAIL above)")

func (a *auditVerifyCmd) Run(ctx context.Context, s streams) error {
	if a.MaxProblems < 1 {
		return usageError{fmt.Errorf("--max-problems must be at least 1, not %d", a.MaxProblems)}
	}
	// A mistyped --data-dir is said as such, not as a CA that is missing.
	if len(a.NatsURL) == 0 {
		if err := a.hasEmbeddedLog(); err != nil {
			return err
		}
	}
	caFile := a.CA
	if caFile == "" {
		caFile = filepath.Join(a.DataDir, "pki", "ca.pem")
	}
	data, err := os.ReadFile(caFile)
	switch {
	case err != nil && a.CA == "" && len(a.NatsURL) > 0:
		return fmt.Errorf("the CA certificate that signs the checkpoints: give --ca, the nodes' <pki-dir>/ca.pem "+
			"(with --nats-url, the default %s is usually not there): %w", caFile, err)
	case err != nil:
		return fmt.Errorf("the CA certificate that signs the checkpoints (--ca): %w", err)
	}
	cert, err := pki.ParseCertificatePEM(data)
	if err != nil {
		return fmt.Errorf("--ca %s: %w", caFile, err)
	}
	offline := len(a.NatsURL) == 0
	if a.Projection {
		// The projection compared is the data directory's, which only a
		// stopped node leaves to another process: asking the node over
		// NATS, as a read of the log can, does not help.
		if !dirExists(filepath.Join(a.DataDir, "projections")) {
			return usageError{fmt.Errorf("--projection: no projection at %s: give the --data-dir of the node whose projection to compare, stopped",
				filepath.Join(a.DataDir, "projections"))}
		}
		lock, err := datadir.Acquire(a.DataDir)
		var inUse *datadir.InUseError
		if errors.As(err, &inUse) {
			return fmt.Errorf("--projection compares a stopped node's projection with the log: %w; stop the node first, or verify without --projection", err)
		}
		if err != nil {
			return err
		}
		if offline {
			lock.Release() // openStore takes it again, for as long as it reads
		} else {
			defer lock.Release()
		}
	}
	l, err := a.openStore(ctx, offline, false)
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	// Whether any checkpoint's signature verifies: when none does, --ca
	// is more likely another CA's than every checkpoint forged.
	verified, notSigned := false, false
	verify := checkpointVerifier(cert)
	v, err := l.Verify(ctx, eventlog.VerifyOptions{MaxProblems: a.MaxProblems, Verify: func(msg, sig []byte) error {
		err := verify(msg, sig)
		verified, notSigned = verified || err == nil, notSigned || errors.Is(err, errNotSigned)
		return err
	}})
	if err != nil {
		return err
	}
	if notSigned && !verified {
		fmt.Fprintf(s.err, "note: no checkpoint's signature verifies with the CA certificate %s: if the nodes that wrote this log have another CA, give its certificate with --ca (their <pki-dir>/ca.pem)\n", caFile)
	}
	if offline {
		// The node beside the log applied up to some sequence: a log that
		// ends before it lost its end (cut back, or a damaged store
		// repaired by dropping what it could not read), checkpoints and
		// all, which the checkpoints alone cannot show.
		applied, err := a.appliedThrough()
		if err != nil {
			return err
		}
		if applied > v.Last {
			v.Problems = append([]eventlog.Problem{{Kind: eventlog.LostEnd, Seq: v.Last + 1, Last: applied,
				Detail: fmt.Sprintf("the log ends at sequence %d, but this node applied up to %d", v.Last, applied)}}, v.Problems...)
		}
	}
	var proj *projectionCheck
	if a.Projection && v.OK() { // a log that fails says nothing of its projection
		if proj, err = a.checkProjection(ctx, l, s); err != nil {
			return fmt.Errorf("--projection: %w", err)
		}
	}
	if a.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetIndent("", "  ")
		out := struct {
			*eventlog.Verification
			Projection *projectionCheck `json:"projection,omitempty"`
		}{v, proj}
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(s.out, v.Summary())
		if len(v.Problems) > 1 {
			for _, p := range v.Problems {
				fmt.Fprintln(s.out, "  "+p.String())
			}
		}
		switch {
		case proj == nil:
		case proj.Differences == 0:
			also := " (it has no snapshots)"
			switch {
			case proj.Snapshots == 1:
				also = ", and so is its snapshot"
			case proj.Snapshots > 1:
				also = fmt.Sprintf(", and so are its %d snapshots", proj.Snapshots)
			}
			fmt.Fprintf(s.out, "OK: the projection is the log's, rebuilt to sequence %d%s\n", proj.Seq, also)
		default:
			what := "the projection differs"
			if proj.Snapshots > 0 {
				what = "the projection and its " + posture.Count(proj.Snapshots, "snapshot", "snapshots") + " differ"
			}
			fmt.Fprintf(s.out, "FAIL: %s from the log's, rebuilt to sequence %d, in %s\n", what, proj.Seq, posture.Count(proj.Differences, "key", "keys"))
			for _, k := range proj.Keys {
				fmt.Fprintln(s.out, "  "+k)
			}
		}
		if proj != nil {
			for _, n := range proj.Notes {
				fmt.Fprintln(s.out, "  note: "+n)
			}
		}
	}
	fmt.Fprintf(s.err, "read %s up to sequence %d in %s\n", posture.Count(v.Messages, "message", "messages"), v.Last, time.Since(start).Round(time.Millisecond))
	switch {
	case !v.OK():
		return errVerifyFailed
	case proj != nil && proj.Differences > 0:
		return errProjectionDiffers
	}
	return nil
}

// errProjectionDiffers is returned when the node's projection is not the
// one its log rebuilds, after the differences are printed.
var errProjectionDiffers = errors.New("the projection does not match the log")
