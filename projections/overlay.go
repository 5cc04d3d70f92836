package projections

import (
	"errors"
	"time"

	"github.com/seed-0809debe/posture"
)

// Overlay applies events that are not in the log on top of the store's
// state, as if they followed the event at the cursor, which stays where it
// is: a backtest applies the model changes of a candidate at the start of
// its window, and the deadlines that only the candidate's checks reach.
// The events are applied by the same handlers as Apply's, in one batch.
// The transitions they derive are returned, not queued in the outbox.
//
// A store that took an overlay is no longer a function of the log: it is
// for a throwaway projection (a backtest's), never for a node's.
func (s *Store) Overlay(events []posture.Event) ([]posture.Transition, error) {
	derived := []posture.Transition{}
	if err := s.applyBatch(events, &derived, nil); err != nil {
		return nil, err
	}
	return derived, nil
}

// Rewrite is given each event of the log before ApplyEach applies it, with
// a view of the state the events before it left (in the same batch), and
// returns the event to apply in its place (the event itself, or another
// with the same sequence).
type Rewrite func(v View, e posture.Event) (posture.Event, error)

// ApplyEach is Apply with a rewrite of each event: a backtest decides a
// recorded session request again on the state just before it, and applies
// its own decision instead, in the one batch of the events around it.
// Like Overlay, it is for a throwaway projection.
func (s *Store) ApplyEach(events []posture.Event, rewrite Rewrite) error {
	return s.applyBatch(events, nil, rewrite)
}

// View reads the state inside an ApplyEach batch, before the event being
// rewritten.
type View struct {
	tx     *Tx
	s      *Store
	cursor uint64
}

// Access is Store.Access on the view.
func (v View) Access(identityID, apiSessionID, serviceID, typ string, now time.Time) ([]posture.PolicyResult, error) {
	return evaluatePolicies(v.tx.r(), v.s.graph, v.s.ranges, identityID, apiSessionID, v.s.graph.granting(identityID, serviceID, typ), now)
}

// HasSession reports whether the API session has a session of the type
// for the service.
func (v View) HasSession(apiSessionID, typ, serviceID string) (bool, error) {
	_, err := byUnique[posture.Session](v.tx.r(), posture.KindSession, "key", sessionKey(apiSessionID, typ, serviceID))
	if errors.Is(err, posture.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// DueDeadlines is Store.DueDeadlines on the view.
func (v View) DueDeadlines(until time.Time, limit int) ([]posture.DeadlineReached, error) {
	return dueDeadlines(v.tx.b, until, limit)
}

// DueWrites is Store.DueWrites (the writes of the batch so far included).
func (v View) DueWrites() uint64 { return v.s.DueWrites() }

// Overlay is Store.Overlay inside the batch: the events apply after the
// events before the one being rewritten.
func (v View) Overlay(events []posture.Event) ([]posture.Transition, error) {
	derived := []posture.Transition{}
	v.tx.derived = &derived
	// The count of the message's transitions goes on after the overlay
	// (transitionKey): a batch's later events still follow its earlier.
	counted := v.tx.transitions
	defer func() { v.tx.derived, v.tx.transitions = nil, counted }()
	for _, e := range events {
		e.Seq = v.cursor
		if err := apply(v.tx, e); err != nil {
			return nil, err
		}
	}
	return derived, nil
}
