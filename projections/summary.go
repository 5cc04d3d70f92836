package projections

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// Fleet summary keys (the read model of GET /posture-summary):
//
//	f/i/<identityId>            the identity's standing: "p/<policyId>" and
//	                            "c/<checkId>" -> pass | stale | fail
//	f/n/<p|c>/<id>              how many identities pass, fail, are stale
//	f/g/<until>/<apiSessionId>  a running grace window -> identity id
//	f/e/<at>/<identityId>       the identity's oldest evidence (empty value)
//	f/r/<checkId>/<identityId>  the identity fails the report-only check:
//	                            since when (its standing became report)
//
// An identity's standing is the best over its API sessions (a policy it
// passes in one session counts as passing): pass, then report (passing only
// because its failing checks are report-only; for a check: failing while it
// only reports), then stale (failing only for stale evidence), then fail. Identities without an API session have
// no standing. Counters move by the difference of an identity's standing
// before and after each event, so a read is a scan of the counters, never
// of the identities.
func fleetIdentityKey(id string) []byte { return []byte("f/i/" + id) }
func fleetCountKey(key string) []byte   { return []byte("f/n/" + key) }
func graceKey(t time.Time, apiSessionID string) []byte {
	return []byte("f/g/" + timeKey(t) + "/" + apiSessionID)
}
func reportKey(checkID, identityID string) []byte { return []byte("f/r/" + checkID + "/" + identityID) }
func reportPrefix(checkID string) []byte          { return []byte("f/r/" + checkID + "/") }
func evidenceKey(t time.Time, identityID string) []byte {
	return []byte("f/e/" + timeKey(t) + "/" + identityID)
}

var (
	fleetCountPrefix = []byte("f/n/")
	gracePrefix      = []byte("f/g/")
	evidencePrefix   = []byte("f/e/")
)

// Standing states.
const (
	StandPass   = "pass"
	StandReport = "report"
	StandStale  = "stale"
	StandFail   = "fail"
)

func standRank(s string) int {
	switch s {
	case StandPass:
		return 0
	case StandReport:
		return 1
	case StandStale:
		return 2
	}
	return 3
}

// counts is the stored value of a fleet counter.
type counts struct {
	Pass   int64 `json:"pass"`
	Fail   int64 `json:"fail"`
	Stale  int64 `json:"stale"`
	Report int64 `json:"report,omitempty"`
}

func (c *counts) add(state string, d int64) {
	switch state {
	case StandPass:
		c.Pass += d
	case StandReport:
		c.Report += d
	case StandStale:
		c.Stale += d
	default:
		c.Fail += d
	}
}

// sessionStanding is one API session's standing per policy and check at a
// time (which checks only report depends on it).
func sessionStanding(policies []policyChecksOf, states map[string]bool, verdicts map[string]evaluator.Verdict, at time.Time) map[string]string {
	if len(policies) == 0 {
		return nil
	}
	out := make(map[string]string, len(policies)*2)
	for _, p := range policies {
		state := StandPass
		if states[p.id] {
			for _, c := range p.checks {
				if !verdicts[c.ID].Pass {
					state = StandReport // passing only because c reports
				}
			}
		} else {
			state = StandStale
			for _, c := range p.checks {
				if v := verdicts[c.ID]; !v.Pass && !v.Stale && !c.ReportOnly(at) {
					state = StandFail
				}
			}
		}
		out["p/"+p.id] = state
		for _, c := range p.checks {
			v := verdicts[c.ID]
			switch {
			case v.Pass:
				out["c/"+c.ID] = StandPass
			case c.ReportOnly(at):
				out["c/"+c.ID] = StandReport
			case v.Stale:
				out["c/"+c.ID] = StandStale
			default:
				out["c/"+c.ID] = StandFail
			}
		}
	}
	return out
}

// graceUntil is the end of the latest grace window running at the instant
// in the session (zero: none).
func graceUntil(policies []policyChecksOf, s posture.SessionPosture, grace time.Duration, at time.Time) time.Time {
	var until time.Time
	if s.MFAPassedAt == nil {
		return until
	}
	consider := func(ev *time.Time) {
		if ev == nil || ev.Before(*s.MFAPassedAt) {
			return
		}
		if end := ev.Add(max(grace, 0)).UTC(); !end.Before(at) && end.After(until) {
			until = end
		}
	}
	for _, p := range policies {
		for _, c := range p.checks {
			if c.TypeID != posture.CheckMFA {
				continue
			}
			if c.PromptOnWake {
				consider(s.WokenAt)
			}
			if c.PromptOnUnlock {
				consider(s.UnlockedAt)
			}
		}
	}
	return until
}

// moveGrace re-indexes a session's grace window.
func moveGrace(tx *Tx, identityID, apiSessionID string, old, now time.Time) error {
	if old.Equal(now) {
		return nil
	}
	if !old.IsZero() {
		if err := tx.del(graceKey(old, apiSessionID)); err != nil {
			return err
		}
	}
	if !now.IsZero() {
		return tx.putRaw(graceKey(now, apiSessionID), []byte(identityID))
	}
	return nil
}

// refreshStanding recomputes an identity's standing from its API sessions
// and moves the counters by the difference.
func refreshStanding(tx *Tx, identityID string) error {
	if tx.lean {
		return nil
	}
	agg := map[string]string{}
	for _, sid := range tx.graph.sessionsOf(identityID) {
		st, found, err := loadSessionState(tx, sid)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		for k, v := range st.Standing {
			if cur, ok := agg[k]; !ok || standRank(v) < standRank(cur) {
				agg[k] = v
			}
		}
	}
	var old map[string]string
	if _, err := getJSON(tx.r(), fleetIdentityKey(identityID), &old); err != nil {
		return err
	}
	if maps.Equal(old, agg) {
		return nil
	}
	for k, v := range old {
		if agg[k] != v {
			if err := bump(tx, k, v, -1); err != nil {
				return err
			}
			if err := moveReport(tx, identityID, k, v, agg[k]); err != nil {
				return err
			}
		}
	}
	for k, v := range agg {
		if old[k] != v {
			if err := bump(tx, k, v, 1); err != nil {
				return err
			}
			if _, had := old[k]; !had {
				if err := moveReport(tx, identityID, k, "", v); err != nil {
					return err
				}
			}
		}
	}
	if len(agg) == 0 {
		return tx.del(fleetIdentityKey(identityID))
	}
	return tx.put(fleetIdentityKey(identityID), agg)
}

// moveReport keeps the index of the identities failing a report-only
// check (f/r/...): an identity enters it, with the event's time, when its
// standing on the check becomes report, and leaves it when it is no longer.
func moveReport(tx *Tx, identityID, key, was, now string) error {
	checkID, isCheck := strings.CutPrefix(key, "c/")
	switch {
	case !isCheck || (was == StandReport) == (now == StandReport):
		return nil
	case now == StandReport:
		return tx.put(reportKey(checkID, identityID), tx.event.At)
	}
	return tx.del(reportKey(checkID, identityID))
}

func bump(tx *Tx, key, state string, d int64) error {
	var c counts
	if _, err := getJSON(tx.r(), fleetCountKey(key), &c); err != nil {
		return err
	}
	c.add(state, d)
	if c == (counts{}) {
		return tx.del(fleetCountKey(key))
	}
	return tx.put(fleetCountKey(key), c)
}

// oldestEvidence is the time of an identity's oldest fact (zero: none).
func oldestEvidence(ip posture.IdentityPosture) time.Time {
	var t time.Time
	eachFactTime(ip, func(at time.Time) {
		if t.IsZero() || at.Before(t) {
			t = at
		}
	})
	return t
}

// eachFactTime calls fn with the time of each of an identity's facts
// (without a slice of them: the apply asks at every posture event).
func eachFactTime(ip posture.IdentityPosture, fn func(time.Time)) {
	if ip.OS != nil {
		fn(ip.OS.At)
	}
	if ip.MAC != nil {
		fn(ip.MAC.At)
	}
	if ip.Domain != nil {
		fn(ip.Domain.At)
	}
	// A path's newest report, whichever check it answered: one for a
	// check since deleted, or an id the client no longer answers, does not
	// hold the identity among the oldest evidence for good (processes are
	// sorted by path).
	var newest time.Time
	for i, p := range ip.Processes {
		if p.At.After(newest) {
			newest = p.At
		}
		if i+1 < len(ip.Processes) && ip.Processes[i+1].Path == p.Path {
			continue
		}
		fn(newest)
		newest = time.Time{}
	}
}

// moveEvidence re-indexes an identity's oldest evidence.
func moveEvidence(tx *Tx, identityID string, before, after posture.IdentityPosture) error {
	old, now := oldestEvidence(before), oldestEvidence(after)
	if old.Equal(now) {
		return nil
	}
	if !old.IsZero() {
		if err := tx.del(evidenceKey(old, identityID)); err != nil {
			return err
		}
	}
	if !now.IsZero() {
		return tx.putRaw(evidenceKey(now, identityID), nil)
	}
	return nil
}

// FleetCounts lists the counts of every policy and check with identities
// standing on it.
func (s *Store) FleetCounts() ([]posture.FleetCount, error) {
	var out []posture.FleetCount
	err := scan(s.r(), fleetCountPrefix, func(key, value []byte) (bool, error) {
		kind, id, _ := strings.Cut(string(key[len(fleetCountPrefix):]), "/")
		var c counts
		if err := unmarshal(value, &c); err != nil {
			return false, fmt.Errorf("projections: %s: %w", key, err)
		}
		fc := posture.FleetCount{Kind: kind, ID: id, Pass: c.Pass, Fail: c.Fail, Stale: c.Stale, ReportOnlyFailing: c.Report}
		out = append(out, fc)
		return true, nil
	})
	return out, err
}

// timedRange lists, in time order, up to limit entries of a time index
// with from <= t <= until, and counts all of them.
func (s *Store) timedRange(prefix []byte, from, until time.Time, limit int, fromValue, countAll bool) ([]posture.TimedIdentity, int, error) {
	lower := []byte(string(prefix) + timeKey(from) + "/")
	upper := []byte(string(prefix) + timeKey(until) + "0")
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, 0, err
	}
	defer it.Close()
	var out []posture.TimedIdentity
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) >= limit {
			if !countAll {
				break
			}
			n++
			continue
		}
		n++
		rest := string(it.Key()[len(prefix):])
		ns, id, _ := strings.Cut(rest, "/")
		nanos, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			return nil, 0, fmt.Errorf("projections: %q: %w", it.Key(), err)
		}
		t := posture.TimedIdentity{At: time.Unix(0, nanos).UTC()}
		if fromValue {
			t.IdentityID, t.APISessionID = string(it.Value()), id
		} else {
			t.IdentityID = id
		}
		out = append(out, t)
	}
	return out, n, it.Error()
}

// InGrace lists the API sessions inside a grace window at now, the ones
// ending first first, and counts them.
func (s *Store) InGrace(now time.Time, limit int) ([]posture.TimedIdentity, int, error) {
	return s.timedRange(gracePrefix, now, time.Unix(0, 1<<63-1), limit, true, true)
}

// LosingAccess lists the deadlines already known between now and until:
// API sessions whose passing verdict ends then, unless something changes.
func (s *Store) LosingAccess(now, until time.Time, limit int) ([]posture.TimedIdentity, int, error) {
	return s.timedRange(dueIndexPrefix, now, until, limit, true, true)
}

// OldestEvidence lists the identities with the oldest evidence, oldest
// first.
func (s *Store) OldestEvidence(limit int) ([]posture.TimedIdentity, error) {
	out, _, err := s.timedRange(evidencePrefix, time.Unix(0, 0), time.Unix(0, 1<<63-1), limit, false, false)
	return out, err
}
