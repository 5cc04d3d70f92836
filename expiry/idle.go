package expiry

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
)

// IdleLister lists API sessions idle since before a time
// (projections.Store implements it).
type IdleLister interface {
	IdleAPISessions(before time.Time) ([]posture.APISession, error)
}

// Idle ends the API sessions idle for longer than Timeout, by appending an
// apisession.deleted event (reason expired) for each, with an ID derived
// from the session.
type Idle struct {
	Log      Appender
	Sessions IdleLister
	Clock    clockwork.Clock
	Timeout  time.Duration
	Interval time.Duration
	// Forget, when set, is told of each expired session (the API's cache
	// of recent touches).
	Forget func(apiSessionID string)
	Logger *slog.Logger
}

// Run ticks every Interval of the clock until ctx ends.
func (s *Idle) Run(ctx context.Context) error {
	t := s.Clock.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.logger().Error("listing idle API sessions", "err", err)
		}
	}
}

// Tick expires the sessions idle for longer than Timeout at the clock's
// now and returns how many it expired. A failed append is logged; the
// session stays idle and is expired on a later tick.
func (s *Idle) Tick(ctx context.Context) (int, error) {
	now := s.Clock.Now()
	sessions, err := s.Sessions.IdleAPISessions(now.Add(-s.Timeout))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, as := range sessions {
		e, err := posture.NewEvent(posture.APISessionDeleted{ID: as.ID, IdentityID: as.IdentityID, Reason: posture.EndExpired}, now)
		if err != nil {
			return n, fmt.Errorf("expire API session %s: %w", as.ID, err)
		}
		e.ID = posture.DerivedID(posture.TypeAPISessionDeleted, as.ID, posture.EndExpired)
		if _, err := s.Log.Append(ctx, e); err != nil {
			if ctx.Err() == nil {
				s.logger().Warn("expiring API session", "apiSessionId", as.ID, "err", err)
			}
			continue
		}
		n++
		if s.Forget != nil {
			s.Forget(as.ID)
		}
	}
	return n, nil
}

func (s *Idle) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}
