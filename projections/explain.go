package projections

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// missingAt is the error of an entity that a decision at a moment needs and
// that did not exist then. An id that was the name of one then is said to
// be a name, with the id to give.
func (s *Store) missingAt(err error, kind posture.Kind, noun, id string, at time.Time) error {
	if !errors.Is(err, posture.ErrNotFound) {
		return err
	}
	// The moment is shown to the millisecond, as the APIs show times (a
	// moment given to the second stands for its whole last digit).
	msg := fmt.Sprintf("no %s had the id %q at %s", noun, id, at.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	if named, err := s.IDByName(kind, id); err == nil {
		msg += fmt.Sprintf(" (%q is the name of the %s %s: give its id)", id, noun, named)
	}
	return &posture.Error{Code: posture.CodeNotFound, Message: msg}
}

// maxExplainEntries bounds the history an explanation reads back from its
// moment for the entries behind the outcome: an identity's own requests
// make its history, and explaining it must cost the same however long
// that is. A change older than that is not shown.
const maxExplainEntries = 100_000

// Explain rebuilds an access decision at a moment from the projection (for
// a past moment, the caller replays the log into a store up to it first):
// the identity's API sessions, the policies of the type that grant it the
// service, each check evaluated at the moment, and the history entries
// behind the outcome.
func (s *Store) Explain(identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	x := posture.Explanation{IdentityID: identityID, ServiceID: serviceID, Type: typ, At: at, APISessions: []posture.SessionExplanation{}}
	if _, err := Get[posture.Identity](s, identityID); err != nil {
		return x, s.missingAt(err, posture.KindIdentity, "identity", identityID, at)
	}
	svc, err := Get[posture.Service](s, serviceID)
	if err != nil {
		return x, s.missingAt(err, posture.KindService, "service", serviceID, at)
	}
	x.ServiceName = svc.Name
	pids := s.Granting(identityID, serviceID, typ)
	if len(pids) == 0 {
		x.Decision = posture.DecisionNoPermission
		return x, nil
	}
	sessions := s.graph.sessionsOf(identityID)
	if len(sessions) == 0 {
		x.Decision = posture.DecisionNoAPISession
		return x, nil
	}
	cfg, err := s.Config()
	if err != nil {
		return x, err
	}
	history, cut, err := s.HistoryTail(identityID, time.Time{}, at, maxExplainEntries)
	if err != nil {
		return x, err
	}
	if cut {
		x.Warning = fmt.Sprintf("only the newest %d entries of the identity's history before the moment were read: "+
			"an older change or fact is not shown", maxExplainEntries)
	}
	x.Decision = posture.DecisionDenied
	for _, sid := range sessions {
		results, err := s.Evaluate(identityID, sid, pids, at)
		if err != nil {
			return x, err
		}
		se := posture.SessionExplanation{APISessionID: sid, Policies: []posture.PolicyExplanation{}}
		var failing []posture.Check
		for _, r := range results {
			pe := posture.PolicyExplanation{PolicyID: r.PolicyID, PolicyName: r.PolicyName, Passing: r.Passing, Checks: []posture.CheckExplanation{}}
			for _, cr := range r.Checks {
				pe.Checks = append(pe.Checks, checkExplanation(cr, cfg.MFAGrace))
				if !cr.Pass {
					failing = append(failing, cr.Check)
				}
			}
			se.Policies = append(se.Policies, pe)
			se.Granted = se.Granted || r.Passing
		}
		se.LastChange, se.Related = explainHistory(history, sid, pids, failing)
		if se.Granted {
			x.Decision = posture.DecisionGranted
		}
		x.APISessions = append(x.APISessions, se)
	}
	return x, nil
}

// judges reports whether a check reads a response: its type's, and for a
// process check a report of one of its paths, as the evaluator finds it (a
// PROCESS check's only when it answered that check).
func judges(c posture.Check, r posture.PostureResponse) bool {
	switch c.TypeID {
	case posture.CheckOS, posture.CheckMAC, posture.CheckDomain:
		return r.TypeID == string(c.TypeID)
	case posture.CheckProcess, posture.CheckProcessMulti:
		if r.TypeID != string(posture.CheckProcess) {
			return false
		}
		path := func(p posture.Process) bool { return evaluator.ReportsPath(p, r.Path) }
		return c.Process != nil && r.ID == c.ID && path(*c.Process) || slices.ContainsFunc(c.Processes, path)
	}
	return false
}

func checkExplanation(cr posture.CheckResult, grace time.Duration) posture.CheckExplanation {
	ce := posture.CheckExplanation{
		PostureCheckID: cr.Check.ID, PostureCheckName: cr.Check.Name, PostureCheckType: cr.Check.TypeID,
		Passing: cr.Pass, ActualValue: cr.Actual, ExpectedValue: cr.Expected, Criteria: cr.Criteria, Stale: cr.Stale,
		ReportOnly: cr.ReportOnly,
	}
	if !cr.StaleAfter.IsZero() {
		t := cr.StaleAfter
		ce.StaleAfter = &t
	}
	if !cr.ValidUntil.IsZero() {
		t := cr.ValidUntil
		ce.ValidUntil = &t
	}
	if cr.Check.TypeID != posture.CheckMFA || len(cr.Criteria) == 0 {
		return ce
	}
	var c struct {
		PassedMFAAt    *time.Time `json:"passedMfaAt"`
		WokenAt        *time.Time `json:"wokenAt"`
		UnlockedAt     *time.Time `json:"unlockedAt"`
		TimeoutSeconds int64      `json:"timeoutSeconds"`
	}
	if json.Unmarshal(cr.Criteria, &c) != nil || c.PassedMFAAt == nil {
		return ce
	}
	if c.TimeoutSeconds > 0 {
		t := c.PassedMFAAt.Add(time.Duration(c.TimeoutSeconds) * time.Second)
		ce.TimeoutEndsAt = &t
	}
	// A wake or unlock at or after the last TOTP starts a grace.
	if cr.Check.PromptOnWake && c.WokenAt != nil && !c.WokenAt.Before(*c.PassedMFAAt) {
		t := c.WokenAt.Add(grace)
		ce.WakeGraceEnds = &t
	}
	if cr.Check.PromptOnUnlock && c.UnlockedAt != nil && !c.UnlockedAt.Before(*c.PassedMFAAt) {
		t := c.UnlockedAt.Add(grace)
		ce.UnlockGraceEnds = &t
	}
	return ce
}

// explainHistory picks, from an identity's history up to the moment, the
// last change of one of the policies for the API session (or a deadline
// reached on it), and the facts behind the outcome: the last MFA pass,
// wake and unlock of the session, and the last report each failing check
// judged (an OS check's last OS report, a process check's last report of
// its path...), from any of the identity's sessions, since those facts
// are the identity's. A report that left a failing check failing changed
// no outcome, so it is not the last change: it is among these.
func explainHistory(history []posture.HistoryEntry, apiSessionID string, policies []string, failing []posture.Check) (*posture.HistoryEntry, []posture.HistoryEntry) {
	relevant := map[string]bool{}
	for _, p := range policies {
		relevant[p] = true
	}
	var last *posture.HistoryEntry
	var mfa, wake, unlock *posture.HistoryEntry
	reports := make([]*posture.HistoryEntry, len(failing)) // the last report each failing check judged
	for i := range history {
		h := &history[i]
		if h.Kind == posture.HistoryPosture {
			var r posture.PostureResponse
			if json.Unmarshal(h.Detail, &r) == nil {
				for j, c := range failing {
					if judges(c, r) {
						reports[j] = h
					}
				}
			}
			continue
		}
		if h.APISessionID != apiSessionID && h.APISessionID != "" {
			continue
		}
		switch h.Kind {
		case posture.HistoryAccess:
			var d struct {
				PolicyID string `json:"policyId"`
			}
			if json.Unmarshal(h.Detail, &d) == nil && relevant[d.PolicyID] {
				last = h
			}
		case posture.HistoryMFA:
			mfa = h
		case posture.HistoryEndpoint:
			var r posture.PostureResponse
			_ = json.Unmarshal(h.Detail, &r)
			if r.Woken {
				wake = h
			}
			if r.Unlocked {
				unlock = h
			}
		}
	}
	facts := append([]*posture.HistoryEntry{mfa, wake, unlock}, reports...)
	facts = slices.DeleteFunc(facts, func(h *posture.HistoryEntry) bool { return h == nil })
	slices.SortFunc(facts, func(a, b *posture.HistoryEntry) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Part, b.Part))
	})
	var related []posture.HistoryEntry
	for _, h := range facts {
		if len(related) == 0 || related[len(related)-1].Seq != h.Seq || related[len(related)-1].Part != h.Part {
			related = append(related, *h)
		}
	}
	if last != nil {
		cp := *last
		last = &cp
	}
	return last, related
}
