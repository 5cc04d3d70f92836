package api

import (
	"context"
	"time"

	"github.com/seed-0809debe/posture"
)

// IdleLister lists API sessions idle since before a time
// (projections.Store implements it).
type IdleLister interface {
	IdleAPISessions(before time.Time) ([]posture.APISession, error)
}

// SweepIdle ends, every interval, the API sessions idle for longer than the
// timeout, by appending an apisession.deleted event (reason expired) for
// each. The event's ID is derived from the session, so nodes that sweep at
// the same time append it once. It returns when ctx ends.
func (a *Auth) SweepIdle(ctx context.Context, idle IdleLister, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		now := a.Now()
		sessions, err := idle.IdleAPISessions(now.Add(-a.Timeout))
		if err != nil {
			a.Logger.Error("listing idle API sessions", "err", err)
			continue
		}
		for _, s := range sessions {
			e, err := posture.NewEvent(posture.APISessionDeleted{ID: s.ID, IdentityID: s.IdentityID, Reason: posture.EndExpired}, now)
			if err != nil {
				continue
			}
			e.ID = posture.DerivedID(posture.TypeAPISessionDeleted, s.ID, posture.EndExpired)
			if _, err := a.Log.Append(ctx, e); err != nil && ctx.Err() == nil {
				a.Logger.Warn("expiring API session", "apiSessionId", s.ID, "err", err)
			}
			a.Forget(s.ID)
		}
	}
}
