package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/seed-0809debe/posture"
)

// DueLister lists the deadlines reached by a time (projections.Store
// implements it).
type DueLister interface {
	DueDeadlines(until time.Time, limit int) ([]posture.DeadlineReached, error)
}

// Deadlines turns passing deadlines into facts: when a posture verdict's
// ValidUntil has passed, it appends a deadline.reached event, timed just
// after the deadline, whose ID is derived from the identity, the API
// session and the deadline. Every node may run it: the stream keeps one
// copy of each. The projection then re-evaluates and removes the sessions
// that lost access.
type Deadlines struct {
	Log      Log
	Due      DueLister
	Now      Clock
	Logger   *slog.Logger
	Interval time.Duration // how often to look (default 200ms)
}

// deadlineDelay is how long after a deadline its event is timed: a verdict
// holds while now <= ValidUntil.
const deadlineDelay = time.Millisecond

// DeadlineEvent is the event recording that a deadline was reached.
func DeadlineEvent(d posture.DeadlineReached) posture.Event {
	e := posture.MustEvent(d, d.Deadline.Add(deadlineDelay))
	e.ID = posture.DerivedID(posture.TypeDeadlineReached, d.IdentityID, d.APISessionID, d.Deadline.UTC().Format(time.RFC3339Nano))
	e.Actor = "postured"
	return e
}

// Run appends due deadlines until ctx ends.
func (d *Deadlines) Run(ctx context.Context) error {
	interval := d.Interval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	sent := map[string]time.Time{} // event id -> when appended
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := d.Now()
		due, err := d.Due.DueDeadlines(now.Add(-deadlineDelay), 256)
		if err != nil {
			d.Logger.Error("listing due deadlines", "err", err)
			continue
		}
		for _, dl := range due {
			e := DeadlineEvent(dl)
			// An appended deadline stays due until the projection applies
			// it; do not append it again meanwhile (the stream would drop
			// the copy anyway).
			if at, ok := sent[e.ID]; ok && now.Sub(at) < 5*time.Second {
				continue
			}
			if _, err := d.Log.Append(ctx, e); err != nil {
				if ctx.Err() == nil {
					d.Logger.Warn("appending a deadline", "identityId", dl.IdentityID, "err", err)
				}
				continue
			}
			sent[e.ID] = now
		}
		for id, at := range sent {
			if now.Sub(at) > time.Minute {
				delete(sent, id)
			}
		}
	}
}
