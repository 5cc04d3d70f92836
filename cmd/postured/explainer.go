package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// explainer answers policy advice: from the live projection for now, from
// the nearest snapshot and the events after it for a past moment.
type explainer struct {
	log       *eventlog.Log
	store     *projections.Store
	snapshots *projections.Snapshots // nil: a replay of the whole log into memory
}

func (x explainer) Explain(ctx context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	// The live projection answers now and any moment since its last event;
	// until it applies one after a start, it does not know that moment.
	if applied := x.store.AppliedAt(); at.IsZero() || !applied.IsZero() && !at.Before(applied) {
		if at.IsZero() {
			at = time.Now().UTC()
		}
		return x.store.Explain(identityID, serviceID, typ, at)
	}
	return explainAt(ctx, x.log, x.snapshots, identityID, serviceID, typ, at)
}

// explainAt explains a decision at a moment from the projection rebuilt up
// to it.
func explainAt(ctx context.Context, l *eventlog.Log, snaps *projections.Snapshots, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	store, release, err := pastMoment(ctx, l, snaps, cutoff{until: at}, identityID)
	if err != nil {
		return posture.Explanation{}, err
	}
	defer release()
	x, err := store.Explain(identityID, serviceID, typ, at)
	if w := missingWarning(ctx, l, store.Cursor()); w != "" {
		x.Warning = strings.TrimPrefix(x.Warning+"; "+w, "; ")
	}
	return x, err
}

// missingWarning says, when the log misses messages at or before seq, that
// an answer rebuilt from it up to there may be wrong ("" when it misses
// none there, or when the log's state cannot be read: the answer stands).
func missingWarning(ctx context.Context, l *eventlog.Log, seq uint64) string {
	m, err := l.Gaps(ctx)
	if err != nil {
		return ""
	}
	n, first := m.Through(seq)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%s (the first: sequence %d)", api.MissingWarning(n), first)
}

// pastMoment is the projection as it stood at the cutoff, for questions
// about one identity: from the nearest snapshot when there are snapshots
// (with only the events after it that concern the identity applied), else
// replayed from the start in memory. The caller queries it, then calls
// release.
func pastMoment(ctx context.Context, l *eventlog.Log, snaps *projections.Snapshots, c cutoff, identityID string) (*projections.Store, func(), error) {
	if snaps != nil {
		store, release, err := snaps.OpenAt(ctx, l, projections.Moment{Seq: c.toSeq, At: c.until, Identity: identityID})
		return store, release, explainBad(err)
	}
	store, err := replayInMemory(ctx, l, c)
	if err != nil {
		return nil, nil, err
	}
	return store, func() { store.Close() }, nil
}
