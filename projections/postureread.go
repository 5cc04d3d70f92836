package projections

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// PostureData returns an identity's posture data and the posture of each
// of its API sessions, in API session id order.
func (s *Store) PostureData(identityID string) (ip posture.IdentityPosture, sessions []posture.SessionPosture, err error) {
	err = s.view(func(r reader) error {
		if _, err := getJSON(r, identityPostureKey(identityID), &ip); err != nil {
			return err
		}
		return sessionStates(r, identityID, func(_ string, st sessionState) { sessions = append(sessions, st.Posture) })
	})
	return ip, sessions, err
}

// Graces returns the identity's API sessions in a wake or unlock grace
// window at now, with each window's end: those the fleet's InGrace lists,
// read from the identity's own sessions.
func (s *Store) Graces(identityID string, now time.Time) (map[string]time.Time, error) {
	var out map[string]time.Time
	err := s.view(func(r reader) error {
		return sessionStates(r, identityID, func(id string, st sessionState) {
			if !st.GraceUntil.IsZero() && !st.GraceUntil.Before(now) {
				if out == nil {
					out = map[string]time.Time{}
				}
				out[id] = st.GraceUntil
			}
		})
	})
	return out, err
}

// sessionStates calls fn with the state of each of the identity's API
// sessions, in API session id order.
func sessionStates(r reader, identityID string, fn func(id string, st sessionState)) error {
	ids, err := childIDs(r, posture.KindIdentity, identityID, posture.KindAPISession)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var st sessionState
		found, err := getJSON(r, sessionStateKey(id), &st)
		if err != nil {
			return err
		}
		if found {
			fn(id, st)
		}
	}
	return nil
}

// FailedRequests returns an identity's failed service requests, oldest
// first (at most posture.MaxFailedRequests).
func (s *Store) FailedRequests(identityID string) ([]posture.FailedServiceRequest, error) {
	out := []posture.FailedServiceRequest{}
	err := scanJSON(s.db, failedPrefix(identityID), func(f posture.FailedServiceRequest) bool {
		out = append(out, f)
		return true
	})
	return out, err
}

// FleetFailedRequests returns the newest failed service requests across
// all identities, newest first: at most limit of them, and at most
// posture.MaxFleetFailedRequests (limit <= 0 asks for all that are kept).
// It reads the fleet-wide ring, at one cursor, and never scans the
// identities.
func (s *Store) FleetFailedRequests(limit int) ([]posture.FleetFailedRequest, error) {
	if limit <= 0 || limit > posture.MaxFleetFailedRequests {
		limit = posture.MaxFleetFailedRequests
	}
	out := []posture.FleetFailedRequest{}
	err := s.view(func(r reader) error {
		var n uint64
		if _, err := getJSON(r, fleetFailedCount, &n); err != nil {
			return err
		}
		// The last MaxFleetFailedRequests written, newest first; a slot
		// emptied by an identity's deletion is skipped.
		for i := n; i > 0 && n-i < posture.MaxFleetFailedRequests && len(out) < limit; i-- {
			var f posture.FleetFailedRequest
			found, err := getJSON(r, fleetFailedSlot(i-1), &f)
			if err != nil {
				return err
			}
			if found {
				out = append(out, f)
			}
		}
		return nil
	})
	return out, err
}

// LastChange is when the identity's access last changed (a policy started
// or stopped passing, a session was removed, the model changed around it);
// zero if never.
func (s *Store) LastChange(identityID string) (time.Time, error) {
	var t time.Time
	_, err := getJSON(s.r(), changedKey(identityID), &t)
	return t, err
}

// Evaluate evaluates service policies for an API session at a time. A
// policy without checks passes; a policy deleted since the caller listed it
// is left out. It reads the configuration, the posture and the policies at
// one cursor.
func (s *Store) Evaluate(identityID, apiSessionID string, policyIDs []string, now time.Time) ([]posture.PolicyResult, error) {
	var out []posture.PolicyResult
	err := s.view(func(r reader) error {
		var err error
		out, err = evaluatePolicies(r, s.graph, s.ranges, identityID, apiSessionID, policyIDs, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// evaluatePolicies is Evaluate on a reader.
func evaluatePolicies(r reader, g *graph, ranges *rangeCache, identityID, apiSessionID string, policyIDs []string, now time.Time) ([]posture.PolicyResult, error) {
	out := make([]posture.PolicyResult, 0, len(policyIDs))
	err := func() error {
		cfg, err := readConfig(r)
		if err != nil {
			return err
		}
		var ip posture.IdentityPosture
		if _, err := getJSON(r, identityPostureKey(identityID), &ip); err != nil {
			return err
		}
		var st sessionState
		if _, err := getJSON(r, sessionStateKey(apiSessionID), &st); err != nil {
			return err
		}
		d := evaluator.Data{Identity: ip, Session: st.Posture, MFAGrace: cfg.MFAGrace, Ranges: ranges}
		cache := map[string]*posture.Check{}
		for _, pid := range policyIDs {
			p, err := getEntity[posture.ServicePolicy](r, posture.KindServicePolicy, pid)
			if errors.Is(err, posture.ErrNotFound) {
				continue // deleted since the caller read the graph
			}
			if err != nil {
				return err
			}
			checks, err := policyChecks(r, g, pid, cache)
			if err != nil {
				return err
			}
			passing, strict, results, err := evalPolicy(checks, d, now)
			if err != nil {
				return err
			}
			out = append(out, posture.PolicyResult{PolicyID: pid, PolicyName: p.Name, Type: p.Type, Passing: passing, Strict: strict, Checks: results})
		}
		return nil
	}()
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Access evaluates, at a time, the policies of a type ("" for both) that
// grant an identity a service, for one of its API sessions.
func (s *Store) Access(identityID, apiSessionID, serviceID, typ string, now time.Time) ([]posture.PolicyResult, error) {
	return s.Evaluate(identityID, apiSessionID, s.Granting(identityID, serviceID, typ), now)
}

// DueDeadlines lists, earliest first, the deadlines reached by a time, as
// the events that record them (at most limit).
func (s *Store) DueDeadlines(until time.Time, limit int) ([]posture.DeadlineReached, error) {
	return dueDeadlines(s.db, until, limit)
}

// DueWrites counts the writes to the deadline index since the store was
// opened, those of the batch being applied included: while it stays the
// same, so does what DueDeadlines (and View.DueDeadlines) lists. A
// backtest asks for the earliest deadline after every decision, and most
// decisions change none.
func (s *Store) DueWrites() uint64 { return s.dueWrites.Load() }

func dueDeadlines(r reader, until time.Time, limit int) ([]posture.DeadlineReached, error) {
	var out []posture.DeadlineReached
	end := []byte(strings.TrimSuffix(string(dueKey(until, "")), "/") + "0")
	err := scan(r, dueIndexPrefix, func(key, value []byte) (bool, error) {
		if bytes.Compare(key, end) >= 0 || len(out) >= limit {
			return false, nil
		}
		rest := strings.TrimPrefix(string(key), string(dueIndexPrefix))
		nanos, sid, _ := strings.Cut(rest, "/")
		n, err := strconv.ParseInt(nanos, 10, 64)
		if err != nil {
			return false, err
		}
		out = append(out, posture.DeadlineReached{IdentityID: string(value), APISessionID: sid, Deadline: time.Unix(0, n).UTC()})
		return true, nil
	})
	return out, err
}

// PendingDeadlines counts the indexed deadlines.
func (s *Store) PendingDeadlines() (int, error) {
	n := 0
	err := scan(s.db, dueIndexPrefix, func(_, _ []byte) (bool, error) { n++; return true, nil })
	return n, err
}
