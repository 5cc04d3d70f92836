package projections

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// Enforcement keys (report-only checks):
//
//	p/w/<identityId>/<seq>       would-denies: sessions granted only because
//	                             failing checks report, the last MaxFailedRequests
//	x/<enforceAt>/<checkId>      due index of report-only checks' enforceAt
//	                             (nanoseconds, 20 digits; a check's secondary key)
//
// A would-deny is recorded from the session.created event that carries it
// (SessionCreated.WouldDeny), so that replay records the same ones. The
// switch to enforce is a check.enforced event: applying it sets the check's
// mode to enforce and re-evaluates every API session of the identities its
// policies select, as a change of the check would.
func wouldDenyPrefix(identityID string) []byte { return []byte("p/w/" + identityID + "/") }

var enforceIndexPrefix = []byte("x/")

func enforceKey(t time.Time, checkID string) []byte {
	return []byte("x/" + timeKey(t) + "/" + checkID)
}

// enforceIndex is the due-index key of a check that switches to enforce at
// a time, if it has one.
func enforceIndex(c posture.Check) ([]byte, bool) {
	e := c.Enforcement
	if e == nil || e.Mode != posture.ReportMode || e.EnforceAt == nil {
		return nil, false
	}
	return enforceKey(*e.EnforceAt, c.ID), true
}

func init() {
	on(func(tx *Tx, e posture.Event, p posture.CheckEnforced) error {
		c, found, err := getOld[posture.Check](tx, posture.KindCheck, p.CheckID)
		if err != nil || !found {
			return err
		}
		en := c.Enforcement
		if en == nil || en.Mode != posture.ReportMode || en.EnforceAt == nil || !en.EnforceAt.Equal(p.EnforceAt) {
			return nil // changed since: this enforceAt no longer applies
		}
		enforced := *en
		enforced.Mode = posture.EnforceMode
		c.Enforcement = &enforced
		before := tx.graph.identitySelectors(posture.KindCheck, c.ID)
		if err := putEntity(tx, c); err != nil {
			return err
		}
		return reevaluateChange(tx, posture.KindCheck, c.ID, before)
	})
}

// recordWouldDeny adds a would-deny to the identity's ring, its history and
// the transitions outbox.
func recordWouldDeny(tx *Tx, e posture.Event, p posture.SessionCreated) error {
	s := p.Session
	w := posture.WouldDeny{
		SessionID: s.ID, APISessionID: s.APISessionID, ServiceID: s.ServiceID, ServiceName: serviceName(tx, s.ServiceID),
		SessionType: s.Type, When: e.At, PolicyFailures: p.WouldDeny,
	}
	prefix := wouldDenyPrefix(s.IdentityID)
	if err := tx.put(appendPosition(prefix, e), w); err != nil {
		return err
	}
	var checks []string
	t := posture.Transition{Kind: posture.TransitionWouldDeny, IdentityID: s.IdentityID, APISessionID: s.APISessionID,
		ServiceID: s.ServiceID, ServiceName: w.ServiceName, SessionID: s.ID}
	for _, pf := range p.WouldDeny {
		for _, cf := range pf.Checks {
			if !cf.ReportOnly {
				continue
			}
			checks = append(checks, cf.PostureCheckName)
			t.Checks = append(t.Checks, posture.TransitionCheck{ID: cf.PostureCheckID, Name: cf.PostureCheckName, TypeID: cf.PostureCheckType,
				Stale: cf.Stale, ActualValue: cf.ActualValue, ExpectedValue: cf.ExpectedValue})
		}
	}
	slices.Sort(checks)
	checks = slices.Compact(checks)
	t.Reason = "granted only because report-only checks fail: " + strings.Join(checks, ", ")
	summary := fmt.Sprintf("%s session for service %s would be denied when enforced: report-only checks failing %s",
		s.Type, w.ServiceName, strings.Join(checks, ", "))
	tx.history(s.IdentityID, s.APISessionID, posture.HistoryWouldDeny, summary, p.WouldDeny)
	if err := tx.transition(t, s.ID); err != nil {
		return err
	}
	return trimRing(tx, prefix, posture.MaxFailedRequests)
}

// WouldDenies returns an identity's would-denies, oldest first (at most
// posture.MaxFailedRequests).
func (s *Store) WouldDenies(identityID string) ([]posture.WouldDeny, error) {
	out := []posture.WouldDeny{}
	err := scanJSON(s.db, wouldDenyPrefix(identityID), func(w posture.WouldDeny) bool {
		out = append(out, w)
		return true
	})
	return out, err
}

// DueEnforcements lists, earliest first, the report-only checks whose
// enforceAt is at or before a time (at most limit).
func (s *Store) DueEnforcements(until time.Time, limit int) ([]posture.CheckEnforced, error) {
	var out []posture.CheckEnforced
	end := []byte("x/" + timeKey(until) + "0")
	err := scan(s.db, enforceIndexPrefix, func(key, _ []byte) (bool, error) {
		if bytes.Compare(key, end) >= 0 || len(out) >= limit {
			return false, nil
		}
		nanos, id, _ := strings.Cut(string(key[len(enforceIndexPrefix):]), "/")
		n, err := strconv.ParseInt(nanos, 10, 64)
		if err != nil {
			return false, err
		}
		out = append(out, posture.CheckEnforced{CheckID: id, EnforceAt: time.Unix(0, n).UTC()})
		return true, nil
	})
	return out, err
}

// Impact lists the identities that fail a check while it only reports
// (with an API session: the standing the fleet view counts), in identity
// id order, after the identity id after, at most limit; and what each would
// lose if the check enforced now: the services that the check's policies
// alone grant it, and the sessions that would be removed.
func (s *Store) Impact(checkID, after string, limit int) ([]posture.CheckImpact, bool, error) {
	var out []posture.CheckImpact
	more := false
	err := s.view(func(r reader) error {
		prefix := reportPrefix(checkID)
		return scan(r, prefix, func(key, value []byte) (bool, error) {
			id := string(key[len(prefix):])
			if id <= after {
				return true, nil
			}
			if len(out) >= limit {
				more = true
				return false, nil
			}
			var since time.Time
			if err := unmarshal(value, &since); err != nil {
				return false, fmt.Errorf("projections: %s: %w", key, err)
			}
			entry, err := s.impactOf(r, checkID, id)
			if err != nil {
				return false, err
			}
			entry.Since = since
			out = append(out, entry)
			return true, nil
		})
	})
	return out, more, err
}

// impactOf is what one identity would lose if the check enforced: in each
// API session where the check fails, the policies with it stop passing.
func (s *Store) impactOf(r reader, checkID, identityID string) (posture.CheckImpact, error) {
	e := posture.CheckImpact{IdentityID: identityID}
	g := s.graph
	lost := map[posture.ServiceAccess]bool{}
	for _, sid := range g.sessionsOf(identityID) {
		var st sessionState
		found, err := getJSON(r, sessionStateKey(sid), &st)
		if err != nil {
			return e, err
		}
		if !found || st.Standing["c/"+checkID] != StandReport {
			continue
		}
		after := make(map[string]bool, len(st.Policies))
		var dropped []string
		for pid, pass := range st.Policies {
			after[pid] = pass
			if pass && slices.Contains(g.selected(posture.KindServicePolicy, pid, FieldPostureCheckRoles), checkID) {
				after[pid] = false
				dropped = append(dropped, pid)
			}
		}
		slices.Sort(dropped)
		for _, pid := range dropped {
			typ, _, ok := g.policy(posture.KindServicePolicy, pid)
			if !ok {
				continue
			}
			for _, svc := range g.selected(posture.KindServicePolicy, pid, FieldServiceRoles) {
				for _, t := range grantTypes(typ) {
					sa := posture.ServiceAccess{ServiceID: svc, Type: t}
					if !lost[sa] && granted(g, identityID, svc, t, st.Policies) && !granted(g, identityID, svc, t, after) {
						lost[sa] = true
						e.Loses = append(e.Loses, sa)
					}
				}
			}
		}
		ids, err := childIDs(r, posture.KindAPISession, sid, posture.KindSession)
		if err != nil {
			return e, err
		}
		for _, id := range ids {
			sess, err := getEntity[posture.Session](r, posture.KindSession, id)
			if errors.Is(err, posture.ErrNotFound) {
				continue
			}
			if err != nil {
				return e, err
			}
			if !granted(g, identityID, sess.ServiceID, sess.Type, after) {
				e.SessionsRemoved++
			}
		}
	}
	slices.SortFunc(e.Loses, func(a, b posture.ServiceAccess) int {
		return strings.Compare(a.ServiceID+"|"+a.Type, b.ServiceID+"|"+b.Type)
	})
	return e, nil
}

// grantTypes are the session types a policy of a type grants.
func grantTypes(policyType string) []string {
	switch policyType {
	case posture.Dial, posture.Bind:
		return []string{policyType}
	}
	return []string{posture.Dial, posture.Bind}
}
