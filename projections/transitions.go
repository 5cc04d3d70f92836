package projections

import (
	"fmt"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// Transitions outbox:
//
//	t/<seq>/<n>   the n-th transition derived from the event at seq
//	              (posture.Transition), until the relay has published it
//
// Transitions are derived in the same batch as the state they describe, so
// a transition is never lost between the projection and the stream: the
// relay (api.TransitionRelay) publishes them in order and prunes what it
// published. The outbox is a queue, not state: Dump leaves it out, and a
// rebuilt projection derives the same transitions again (the relay skips
// what the stream already holds).
var transitionPrefix = []byte("t/")

// transitionKey is the key of the n-th transition derived from the message
// at seq (its events', in order, for a batch of the log's). n has room for
// a model change that moves every identity of a large fleet.
func transitionKey(seq uint64, n int) []byte {
	return []byte(fmt.Sprintf("t/%020d/%09d", seq, n))
}

// transition queues a transition derived from the event being applied,
// filling in its cause, time and ID.
func (tx *Tx) transition(t posture.Transition, about ...string) error {
	e := tx.event
	t.At = e.At
	t.Cause = posture.Cause{EventID: e.ID, EventType: e.Type, Seq: e.Seq}
	t.ID = posture.TransitionID(e.ID, t.Kind, append([]string{t.APISessionID}, about...)...)
	if tx.derived != nil {
		*tx.derived = append(*tx.derived, t) // an overlay's: returned, not queued
		return nil
	}
	tx.transitions++
	return tx.put(transitionKey(e.Seq, tx.transitions-1), t)
}

// PendingTransitions lists, in log order, up to limit queued transitions
// from the n-th transition of the event at seq on.
func (s *Store) PendingTransitions(seq uint64, n, limit int) ([]posture.QueuedTransition, error) {
	lower := transitionKey(seq, n)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(transitionPrefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []posture.QueuedTransition
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		key := string(it.Key())
		seq, err := strconv.ParseUint(key[2:22], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("projections: transition key %q: %w", key, err)
		}
		n, err := strconv.Atoi(key[23:])
		if err != nil {
			return nil, fmt.Errorf("projections: transition key %q: %w", key, err)
		}
		var t posture.Transition
		if err := unmarshal(it.Value(), &t); err != nil {
			return nil, fmt.Errorf("projections: transition %q: %w", key, err)
		}
		out = append(out, posture.QueuedTransition{Seq: seq, N: n, Transition: t})
	}
	return out, it.Error()
}

// PruneTransitions drops the queued transitions of events up to seq.
func (s *Store) PruneTransitions(upTo uint64) error {
	upper := []byte(fmt.Sprintf("t/%020d/", upTo+1))
	if err := s.db.DeleteRange(transitionPrefix, upper, pebble.NoSync); err != nil {
		return fmt.Errorf("projections: prune transitions: %w", err)
	}
	return nil
}

// sessionTransitions derives the transitions of one API session's
// re-evaluation: policies that start or stop passing (with the failing
// checks), and what made a check fail on its own (an MFA timeout, a grace
// window that ended, stale evidence), and grace windows that start.
func sessionTransitions(tx *Tx, identityID string, st sessionState, policies []policyChecksOf, states map[string]bool,
	verdicts map[string]evaluator.Verdict, grace time.Duration, at time.Time) error {
	sid := st.Posture.APISessionID
	if sid == "" {
		sid = "-"
	}
	failedChecks := map[string]bool{}
	for _, p := range policies {
		was, known := st.Policies[p.id]
		now := states[p.id]
		if !known || was == now {
			continue
		}
		t := posture.Transition{Kind: posture.TransitionPolicyPassing, IdentityID: identityID, APISessionID: st.Posture.APISessionID,
			PolicyID: p.id, PolicyName: policyName(tx, p.id)}
		if !now {
			t.Kind = posture.TransitionPolicyFailing
			for _, c := range p.checks {
				if v := verdicts[c.ID]; !v.Pass {
					tc, err := transitionCheck(c, v)
					if err != nil {
						return err
					}
					t.Checks = append(t.Checks, tc)
					failedChecks[c.ID] = true
				}
			}
		}
		if err := tx.transition(t, p.id); err != nil {
			return err
		}
	}
	// Why checks failed, once per check.
	seen := map[string]bool{}
	for _, p := range policies {
		for _, c := range p.checks {
			if seen[c.ID] {
				continue
			}
			seen[c.ID] = true
			v := verdicts[c.ID]
			kind, until := "", time.Time{}
			switch {
			case failedChecks[c.ID] && v.Stale:
				kind = posture.TransitionEvidenceStale
			case failedChecks[c.ID] && c.TypeID == posture.CheckMFA:
				mv, _ := v.Actual.(evaluator.MFAValue)
				switch {
				case mv.PassedMFA && mv.TimedOut:
					kind = posture.TransitionMFATimedOut
				case mv.PassedMFA:
					kind = posture.TransitionGraceEnded
				}
			case v.Pass && c.TypeID == posture.CheckMFA && graceStartsAt(c, st.Posture, at):
				kind, until = posture.TransitionGraceStarted, at.Add(max(grace, 0)).UTC()
			}
			if kind == "" {
				continue
			}
			tc, err := transitionCheck(c, v)
			if err != nil {
				return err
			}
			t := posture.Transition{Kind: kind, IdentityID: identityID, APISessionID: st.Posture.APISessionID,
				Checks: []posture.TransitionCheck{tc}, Reason: v.Reason}
			if !until.IsZero() {
				t.Until = &until
			}
			if err := tx.transition(t, c.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// graceStartsAt reports whether a wake or unlock at the instant opens the
// grace window of MFA check c.
func graceStartsAt(c *posture.Check, s posture.SessionPosture, at time.Time) bool {
	if s.MFAPassedAt == nil {
		return false
	}
	opens := func(ev *time.Time) bool { return ev != nil && ev.Equal(at) && !ev.Before(*s.MFAPassedAt) }
	return (c.PromptOnWake && opens(s.WokenAt)) || (c.PromptOnUnlock && opens(s.UnlockedAt))
}

func transitionCheck(c *posture.Check, v evaluator.Verdict) (posture.TransitionCheck, error) {
	t := posture.TransitionCheck{ID: c.ID, Name: c.Name, TypeID: c.TypeID, Pass: v.Pass, Stale: v.Stale, Reason: v.Reason}
	var err error
	if t.ActualValue, err = raw(v.Actual); err != nil {
		return t, fmt.Errorf("check %s: actual: %w", c.ID, err)
	}
	if t.ExpectedValue, err = raw(v.Expected); err != nil {
		return t, fmt.Errorf("check %s: expected: %w", c.ID, err)
	}
	return t, nil
}
