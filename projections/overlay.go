package projections

import "github.com/seed-0809debe/posture"

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
	if err := s.applyBatch(events, &derived); err != nil {
		return nil, err
	}
	return derived, nil
}
