package main

import (
	"context"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// explainer answers policy advice: from the live projection for now, from
// a replay of the log into memory for a past moment.
type explainer struct {
	log   *eventlog.Log
	store *projections.Store
}

func (x explainer) Explain(ctx context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	if at.IsZero() || !at.Before(x.store.AppliedAt()) {
		if at.IsZero() {
			at = time.Now().UTC()
		}
		return x.store.Explain(identityID, serviceID, typ, at)
	}
	return explainAt(ctx, x.log, identityID, serviceID, typ, at)
}

// explainAt explains a decision at a moment from a replay of the log into
// memory up to it.
func explainAt(ctx context.Context, l *eventlog.Log, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	store, err := replayInMemory(ctx, l, cutoff{until: at})
	if err != nil {
		return posture.Explanation{}, err
	}
	defer store.Close()
	return store.Explain(identityID, serviceID, typ, at)
}
