package projections

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// Posture keys:
//
//	p/i/<identityId>               identity-wide posture data (posture.IdentityPosture)
//	p/s/<apiSessionId>             an API session's posture, policy states and next deadline
//	p/d/<deadline>/<apiSessionId>  due index of deadlines (nanoseconds, 20 digits) -> identity id
//	p/f/<identityId>/<seq>         failed service requests, the last MaxFailedRequests
//	p/g/<slot>                     fleet-wide failed service requests: a ring of MaxFleetFailedRequests slots
//	p/gn                           how many fleet-wide failed service requests were ever written
//	p/c/<identityId>               service-update indicator: when the identity's access last changed
func identityPostureKey(id string) []byte   { return []byte("p/i/" + id) }
func sessionStateKey(id string) []byte      { return []byte(sessionStatePrefix + id) }
func failedPrefix(identityID string) []byte { return []byte("p/f/" + identityID + "/") }
func changedKey(identityID string) []byte   { return []byte("p/c/" + identityID) }

const sessionStatePrefix = "p/s/"

// The fleet-wide failed service requests are a ring of slots written in
// place: the n-th request ever written (from 0) is in slot n mod
// MaxFleetFailedRequests, and fleetFailedCount holds how many were. A new
// request overwrites the oldest; nothing is deleted, so no tombstones pile
// up in front of the ring (a ring trimmed by deletes and scanned from its
// start cost ten times more per denial).
var (
	fleetFailedPrefix = []byte("p/g/")
	fleetFailedCount  = []byte("p/gn")
)

func fleetFailedSlot(n uint64) []byte {
	return []byte(fmt.Sprintf("%s%03d", fleetFailedPrefix, n%posture.MaxFleetFailedRequests))
}

var dueIndexPrefix = []byte("p/d/")

// putDue and delDue write the deadline index, counted in Store.DueWrites.
func (tx *Tx) putDue(t time.Time, apiSessionID, identityID string) error {
	tx.dueWrites.Add(1)
	return tx.putRaw(dueKey(t, apiSessionID), []byte(identityID))
}

func (tx *Tx) delDue(t time.Time, apiSessionID string) error {
	tx.dueWrites.Add(1)
	return tx.del(dueKey(t, apiSessionID))
}

func dueKey(t time.Time, apiSessionID string) []byte {
	return []byte("p/d/" + timeKey(t) + "/" + apiSessionID)
}

// sessionState is what the projection keeps per API session.
type sessionState struct {
	IdentityID string                 `json:"identityId"`
	Posture    posture.SessionPosture `json:"posture"`
	// Policies holds, for each policy with checks that selects the
	// identity, whether it passes.
	Policies map[string]bool `json:"policies"`
	Deadline time.Time       `json:"deadline,omitzero"`
	// Aged is set when a check of these policies has a maxAgeSeconds:
	// then a resubmission of the same values (fresh evidence) matters.
	Aged bool `json:"aged,omitempty"`
	// Standing is the session's standing per policy ("p/<id>") and check
	// ("c/<id>"): pass, stale or fail (summary.go).
	Standing map[string]string `json:"standing,omitempty"`
	// GraceUntil is the end of a running wake/unlock grace window.
	GraceUntil time.Time `json:"graceUntil,omitzero"`
}

func init() {
	on(func(tx *Tx, e posture.Event, p posture.PostureRecorded) error { return recordPosture(tx, e, p) })
	on(func(tx *Tx, e posture.Event, p posture.MFAPassed) error {
		st, found, err := loadSessionState(tx, p.APISessionID)
		if err != nil || !found {
			return err
		}
		at := e.At
		st.Posture.MFAPassedAt = &at
		if err := tx.put(sessionStateKey(p.APISessionID), st); err != nil {
			return err
		}
		var s posture.APISession
		if found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, p.APISessionID), &s); err != nil || !found {
			return err
		}
		s.MFAComplete = true
		if err := tx.put(entityKey(posture.KindAPISession, s.ID), s); err != nil {
			return err
		}
		tx.history(p.IdentityID, p.APISessionID, posture.HistoryMFA, "MFA passed", nil)
		return reevaluate(tx, p.IdentityID, []string{p.APISessionID}, e.At, false)
	})
	on(func(tx *Tx, e posture.Event, p posture.DeadlineReached) error {
		summary := "deadline " + p.Deadline.UTC().Format(time.RFC3339Nano) + " reached"
		tx.history(p.IdentityID, p.APISessionID, posture.HistoryDeadline, summary, p)
		return reevaluate(tx, p.IdentityID, []string{p.APISessionID}, e.At, false)
	})
	on(func(tx *Tx, e posture.Event, p posture.SessionDenied) error { return recordFailure(tx, e, p) })
}

func loadSessionState(tx *Tx, apiSessionID string) (sessionState, bool, error) {
	var st sessionState
	found, err := getJSON(tx.r(), sessionStateKey(apiSessionID), &st)
	return st, found, err
}

// latestFact is the time of an identity's newest fact (zero: none).
func latestFact(ip posture.IdentityPosture) time.Time {
	var t time.Time
	eachFactTime(ip, func(at time.Time) {
		if at.After(t) {
			t = at
		}
	})
	return t
}

// postureHistory records one history entry for each fact a posture event
// set: the last response of each type (of each process path and check id),
// as the posture data keeps it, and one for the wake and unlock it signals. A
// bulk that repeats a fact, as many times as a request holds, is one
// entry: the identity's history grows with what it reports, not with how
// often it repeats it in one request.
func postureHistory(tx *Tx, p posture.PostureRecorded) {
	fact := func(r *posture.PostureResponse) string {
		if r.TypeID == string(posture.CheckProcess) {
			return r.TypeID + "\x00" + r.Path + "\x00" + r.ID
		}
		return r.TypeID
	}
	var last map[string]int // the last response of each fact, when there are several
	woken, unlocked, endpoint := false, false, -1
	for i := range p.Responses {
		r := &p.Responses[i]
		switch {
		case r.TypeID == posture.ResponseEndpointState:
			if r.Woken || r.Unlocked {
				woken, unlocked, endpoint = woken || r.Woken, unlocked || r.Unlocked, i
			}
		case len(p.Responses) > 1:
			if last == nil {
				last = map[string]int{}
			}
			last[fact(r)] = i
		}
	}
	for i := range p.Responses {
		r := &p.Responses[i] // the detail points into the event, which stays as it is
		switch {
		case r.TypeID != posture.ResponseEndpointState:
			if last == nil || last[fact(r)] == i {
				tx.history(p.IdentityID, p.APISessionID, posture.HistoryPosture, responseSummary(*r), r)
			}
		case i == endpoint:
			what := map[bool]string{true: "woken", false: "unlocked"}[woken]
			if woken && unlocked {
				what = "woken and unlocked"
			}
			if r.Woken != woken || r.Unlocked != unlocked {
				both := *r
				both.Woken, both.Unlocked = woken, unlocked
				r = &both
			}
			tx.history(p.IdentityID, p.APISessionID, posture.HistoryEndpoint, "endpoint "+what, r)
		}
	}
}

// mergePosture is an identity's posture data with responses recorded at
// at: identityWide says whether one of them was OS, MAC, domain or a
// process, endpoint whether one was an endpoint state. It changes a copy
// (decoded values are shared with the cache).
func mergePosture(ip posture.IdentityPosture, responses []posture.PostureResponse, at time.Time) (_ posture.IdentityPosture, identityWide, endpoint bool) {
	for _, r := range responses {
		switch r.TypeID {
		case string(posture.CheckOS):
			ip.OS = &posture.OSPosture{CheckID: r.ID, At: at, Type: r.Type, Version: r.Version, Build: r.Build}
		case string(posture.CheckMAC):
			addrs := make([]string, 0, len(r.MACAddresses))
			for _, a := range r.MACAddresses {
				addrs = append(addrs, posture.NormalizeHex(a))
			}
			ip.MAC = &posture.MACPosture{CheckID: r.ID, At: at, Addresses: addrs}
		case string(posture.CheckDomain):
			ip.Domain = &posture.DomainPosture{CheckID: r.ID, At: at, Domain: r.Domain}
		case string(posture.CheckProcess):
			fps := make([]string, 0, len(r.SignerFingerprints))
			for _, f := range r.SignerFingerprints {
				fps = append(fps, posture.NormalizeHex(f))
			}
			proc := posture.ProcessPosture{CheckID: r.ID, At: at, Path: r.Path, IsRunning: r.IsRunning,
				Hash: posture.NormalizeHex(r.Hash), SignerFingerprints: fps}
			// Decoded values are shared with the cache: change a copy.
			ip.Processes = slices.Clone(ip.Processes)
			i, found := slices.BinarySearchFunc(ip.Processes, proc, compareProcesses)
			if found {
				ip.Processes[i] = proc
			} else {
				ip.Processes = slices.Insert(ip.Processes, i, proc)
			}
			size := 0
			for _, kept := range ip.Processes {
				size += processBytes(kept)
			}
			for len(ip.Processes) > 1 && (len(ip.Processes) > maxProcesses || size > maxProcessBytes) {
				k := stalest(ip.Processes)
				size -= processBytes(ip.Processes[k])
				ip.Processes = slices.Delete(ip.Processes, k, k+1)
			}
		case posture.ResponseEndpointState:
			endpoint = true
			continue
		default:
			continue
		}
		identityWide = true
	}
	return ip, identityWide, endpoint
}

// ChangesPosture says whether posture responses would change the
// identity's standing: a wake or unlock (which may start an MFA grace), or
// OS, MAC, domain or process values other than those it has. The API
// charges such a response for the transitions it may derive.
func (s *Store) ChangesPosture(identityID string, responses []posture.PostureResponse) (bool, error) {
	for _, r := range responses {
		if r.TypeID == posture.ResponseEndpointState && (r.Woken || r.Unlocked) {
			return true, nil
		}
	}
	var ip posture.IdentityPosture
	if _, err := getJSON(s.r(), identityPostureKey(identityID), &ip); err != nil {
		return false, err
	}
	// Merged after every recorded fact, as the event will be: a full list
	// of processes drops its stalest, not the new one.
	next, identityWide, _ := mergePosture(ip, responses, latestFact(ip).Add(time.Nanosecond))
	return identityWide && !sameValues(ip, next), nil
}

// recordPosture stores posture responses: identity-wide data (OS, MAC,
// domain, processes) and, for ENDPOINT_STATE, the API session's wake and
// unlock times (the event's time). Then the affected API sessions are
// re-evaluated.
func recordPosture(tx *Tx, e posture.Event, p posture.PostureRecorded) error {
	var ip posture.IdentityPosture
	if _, err := getJSON(tx.r(), identityPostureKey(p.IdentityID), &ip); err != nil {
		return err
	}
	before := ip
	ip, identityWide, endpoint := mergePosture(ip, p.Responses, e.At)
	if identityWide {
		if err := tx.put(identityPostureKey(p.IdentityID), ip); err != nil {
			return err
		}
		if err := moveEvidence(tx, p.IdentityID, before, ip); err != nil {
			return err
		}
	}
	if endpoint {
		st, found, err := loadSessionState(tx, p.APISessionID)
		if err != nil {
			return err
		}
		if found {
			at := e.At
			for _, r := range p.Responses {
				if r.TypeID != posture.ResponseEndpointState {
					continue
				}
				if r.Woken {
					st.Posture.WokenAt = &at
				}
				if r.Unlocked {
					st.Posture.UnlockedAt = &at
				}
			}
			if err := tx.put(sessionStateKey(p.APISessionID), st); err != nil {
				return err
			}
		}
	}
	postureHistory(tx, p)
	// Only values decide the verdicts of OS, MAC, domain and process
	// checks: a submission that repeats them (clients resubmit posture
	// periodically) changes no policy. Time-based changes come with
	// deadline events.
	switch {
	case endpoint:
		sessions := []string{p.APISessionID}
		if identityWide {
			sessions = tx.graph.sessionsOf(p.IdentityID)
		}
		return reevaluateWith(tx, p.IdentityID, &ip, sessions, e.At, false)
	case identityWide && !sameValues(ip, before):
		return reevaluateWith(tx, p.IdentityID, &ip, tx.graph.sessionsOf(p.IdentityID), e.At, false)
	case identityWide:
		// The same values, but fresh: evidence ages matter where a check
		// has a maxAgeSeconds.
		sessions := tx.graph.sessionsOf(p.IdentityID)
		for _, sid := range sessions {
			st, found, err := loadSessionState(tx, sid)
			if err != nil {
				return err
			}
			if found && st.Aged {
				return reevaluateWith(tx, p.IdentityID, &ip, sessions, e.At, false)
			}
		}
	}
	return nil
}

// compareProcesses orders an identity's processes: by path, then by the
// check id they answered. A process check reads the reports that answered
// it (evaluator.findProcess), a process-multi check those of its paths.
func compareProcesses(a, b posture.ProcessPosture) int {
	return cmp.Or(strings.Compare(a.Path, b.Path), strings.Compare(a.CheckID, b.CheckID))
}

// maxProcesses and maxProcessBytes bound the processes an identity's
// posture data keeps, far more than the process checks of any fleet need: a
// client that reports ever new or ever longer paths must not grow the value
// that every later response rewrites. Past either, the processes reported
// longest ago are forgotten, of those reported at once the first by path
// and check id (one process always stays).
const (
	maxProcesses    = 256
	maxProcessBytes = 64 << 10
)

// processBytes is about what a process takes in the posture value, its
// strings as JSON writes them.
func processBytes(p posture.ProcessPosture) int {
	n := 64 + jsonLen(p.CheckID) + jsonLen(p.Path) + jsonLen(p.Hash) // 64: the fixed fields
	for _, f := range p.SignerFingerprints {
		n += jsonLen(f) + 1
	}
	return n
}

// jsonLen is the length of s as a JSON string, quotes included, for ASCII
// (about it otherwise): a control character or one of <, > and & takes six
// bytes (\u003c), except the five with a short escape, which take two as a
// quote and a backslash do.
func jsonLen(s string) int {
	n := 2
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			n += 2
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 6
		default:
			n++
		}
	}
	return n
}

// stalest is the index of the process reported longest ago (of two
// reported at once, the first by path and check id).
func stalest(ps []posture.ProcessPosture) int {
	i := 0
	for j, p := range ps {
		if p.At.Before(ps[i].At) {
			i = j
		}
	}
	return i
}

// sameValues reports whether two identity-wide posture data hold the same
// values as far as verdicts go: not when they were sent, nor for which
// check, except for processes (a PROCESS check reads its own answers).
func sameValues(a, b posture.IdentityPosture) bool {
	return equalPtr(a.OS, b.OS, func(x, y posture.OSPosture) bool {
		return x.Type == y.Type && x.Version == y.Version && x.Build == y.Build
	}) && equalPtr(a.MAC, b.MAC, func(x, y posture.MACPosture) bool {
		return slices.Equal(x.Addresses, y.Addresses)
	}) && equalPtr(a.Domain, b.Domain, func(x, y posture.DomainPosture) bool {
		return x.Domain == y.Domain
	}) && slices.EqualFunc(a.Processes, b.Processes, func(x, y posture.ProcessPosture) bool {
		return x.Path == y.Path && x.CheckID == y.CheckID && x.IsRunning == y.IsRunning && x.Hash == y.Hash &&
			slices.Equal(x.SignerFingerprints, y.SignerFingerprints)
	})
}

func equalPtr[T any](a, b *T, eq func(x, y T) bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return eq(*a, *b)
}

// reevaluate brings the policy states of an identity's API sessions up to
// date at a time: each policy with checks that selects the identity passes
// or fails. Sessions that no longer have a passing policy for their service
// and type are removed, the service-update indicator moves when anything
// changed (or always, with touched: a model change), and the next deadline
// of each API session is indexed for the timer.
func reevaluate(tx *Tx, identityID string, apiSessions []string, at time.Time, touched bool) error {
	return reevaluateWith(tx, identityID, nil, apiSessions, at, touched)
}

// policyChecksOf is a policy with checks and its checks.
type policyChecksOf struct {
	id     string
	checks []*posture.Check
}

// reevaluateWith is reevaluate with the identity's posture data already at
// hand (nil: read it).
func reevaluateWith(tx *Tx, identityID string, ip *posture.IdentityPosture, apiSessions []string, at time.Time, touched bool) error {
	if len(apiSessions) == 0 {
		return nil
	}
	cfg, err := readConfig(tx.r())
	if err != nil {
		return err
	}
	if ip == nil {
		ip = &posture.IdentityPosture{}
		if _, err := getJSON(tx.r(), identityPostureKey(identityID), ip); err != nil {
			return err
		}
	}
	g := tx.graph
	cache := map[string]*posture.Check{}
	var withChecks []policyChecksOf
	for _, pid := range g.selecting(posture.KindServicePolicy, FieldIdentityRoles, identityID) {
		checks, err := policyChecks(tx.r(), g, pid, cache)
		if err != nil {
			return err
		}
		if len(checks) > 0 {
			withChecks = append(withChecks, policyChecksOf{pid, checks})
		}
	}
	aged := false
	for _, p := range withChecks {
		for _, c := range p.checks {
			aged = aged || c.MaxAgeSeconds > 0
		}
	}
	changed := touched
	standingChanged := false
	if touched {
		summary := fmt.Sprintf("%s changed what applies to the identity", tx.event.Type)
		tx.history(identityID, "", posture.HistoryModel, summary, nil)
	}
	for _, sid := range apiSessions {
		st, found, err := loadSessionState(tx, sid)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		d := evaluator.Data{Identity: *ip, Session: st.Posture, MFAGrace: cfg.MFAGrace, Ranges: tx.ranges}
		states := make(map[string]bool, len(withChecks))
		verdicts := map[string]evaluator.Verdict{}
		var deadline time.Time
		timedOut := false
		for _, p := range withChecks {
			pass, until := policyState(p.checks, d, at, verdicts)
			states[p.id] = pass
			if !until.IsZero() && (deadline.IsZero() || until.Before(deadline)) {
				deadline = until
			}
			for _, c := range p.checks {
				actual, _ := verdicts[c.ID].Actual.(evaluator.MFAValue)
				timedOut = timedOut || c.TypeID == posture.CheckMFA && actual.TimedOut
			}
		}
		// A timeout found stays until MFA is passed again (the
		// controller's sticky timedOut).
		newlyTimedOut := timedOut && st.Posture.MFAPassedAt != nil && !st.Posture.MFATimedOut()
		if newlyTimedOut {
			found := at
			st.Posture.MFATimedOutAt = &found
		}
		statesChanged := !maps.Equal(states, st.Policies)
		if statesChanged {
			changed = true
			recordTransitions(tx, identityID, sid, st.Policies, states)
		}
		if err := sessionTransitions(tx, identityID, st, withChecks, states, verdicts, cfg.MFAGrace, at); err != nil {
			return err
		}
		// A session loses its grant when a policy stops passing, or with a
		// model change (a policy, with checks or not, may no longer grant
		// it).
		if touched || (statesChanged && lostPass(st.Policies, states)) {
			if err := removeUngranted(tx, identityID, sid, states); err != nil {
				return err
			}
		}
		standing := sessionStanding(withChecks, states, verdicts, at)
		grace := graceUntil(withChecks, st.Posture, cfg.MFAGrace, at)
		if !maps.Equal(standing, st.Standing) {
			standingChanged = true
		}
		if !st.GraceUntil.Equal(grace) {
			// A wake or unlock re-prompts MFA: the services' posture
			// queries change, and clients that poll service-updates
			// must see it.
			changed = true
		}
		if err := moveGrace(tx, identityID, sid, st.GraceUntil, grace); err != nil {
			return err
		}
		if !statesChanged && !newlyTimedOut && st.Deadline.Equal(deadline) && st.Aged == aged && maps.Equal(standing, st.Standing) && st.GraceUntil.Equal(grace) {
			continue // nothing to write
		}
		if !st.Deadline.Equal(deadline) {
			if !st.Deadline.IsZero() {
				if err := tx.delDue(st.Deadline, sid); err != nil {
					return err
				}
			}
			if !deadline.IsZero() {
				if err := tx.putDue(deadline, sid, identityID); err != nil {
					return err
				}
			}
		}
		st.Policies, st.Deadline, st.Aged, st.Standing, st.GraceUntil = states, deadline, aged, standing, grace
		if err := tx.put(sessionStateKey(sid), st); err != nil {
			return err
		}
	}
	if standingChanged {
		if err := refreshStanding(tx, identityID); err != nil {
			return err
		}
	}
	if changed {
		return markChanged(tx, identityID, at)
	}
	return nil
}

// markChanged moves the identity's change indicator to at, or a millisecond
// past its last value when at would not move it at the millisecond
// resolution clients see: a client that polls the indicator must see every
// change, however close together.
func markChanged(tx *Tx, identityID string, at time.Time) error {
	var last time.Time
	if _, err := getJSON(tx.r(), changedKey(identityID), &last); err != nil {
		return err
	}
	if floor := last.Truncate(time.Millisecond).Add(time.Millisecond); at.Before(floor) {
		at = floor
	}
	return tx.put(changedKey(identityID), at)
}

// recordTransitions writes a history entry for each policy whose state
// changed for an API session.
func recordTransitions(tx *Tx, identityID, apiSessionID string, before, after map[string]bool) {
	ids := make([]string, 0, len(before)+len(after))
	for id := range before {
		ids = append(ids, id)
	}
	for id := range after {
		if _, ok := before[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	state := func(m map[string]bool, id string) string {
		pass, ok := m[id]
		switch {
		case !ok:
			return "not applicable"
		case pass:
			return "passing"
		}
		return "failing"
	}
	for _, id := range ids {
		was, now := state(before, id), state(after, id)
		if was == now {
			continue
		}
		name := policyName(tx, id)
		detail := transition{From: was, PolicyID: id, PolicyName: name, To: now}
		tx.history(identityID, apiSessionID, posture.HistoryAccess, "policy "+name+": "+was+" -> "+now, detail)
	}
}

// transition is the detail of a policy's change of state in the history.
type transition struct {
	From       string `json:"from"`
	PolicyID   string `json:"policyId"`
	PolicyName string `json:"policyName"`
	To         string `json:"to"`
}

// lostPass reports whether a policy that passed before does not pass
// after: only then can a session lose its grant.
func lostPass(before, after map[string]bool) bool {
	for id, pass := range before {
		if pass && !after[id] {
			return true
		}
	}
	return false
}

// granted reports whether a passing policy of the type grants the identity
// the service. states holds the pass/fail of policies with checks; a
// policy without checks passes.
func granted(g *graph, identityID, serviceID, typ string, states map[string]bool) bool {
	for _, pid := range g.granting(identityID, serviceID, typ) {
		if pass, hasChecks := states[pid]; !hasChecks || pass {
			return true
		}
	}
	return false
}

// removeUngranted removes the API session's sessions that no passing policy
// grants any more.
func removeUngranted(tx *Tx, identityID, apiSessionID string, states map[string]bool) error {
	return removeSessions(tx, apiSessionID, func(s posture.Session) string {
		if granted(tx.graph, identityID, s.ServiceID, s.Type, states) {
			return ""
		}
		return "removed: no passing " + s.Type + " policy left"
	}, true)
}

// removeSessions removes the API session's sessions for which why gives a
// reason (recorded in the history), and keeps those for which it gives "".
//
// With announce, each removal is also a session-removed transition.
func removeSessions(tx *Tx, apiSessionID string, why func(posture.Session) string, announce bool) error {
	ids, err := childIDs(tx.b, posture.KindAPISession, apiSessionID, posture.KindSession)
	if err != nil {
		return err
	}
	for _, id := range ids {
		var s posture.Session
		found, err := getJSON(tx.r(), entityKey(posture.KindSession, id), &s)
		if err != nil {
			return err
		}
		reason := ""
		if found {
			reason = why(s)
		}
		if reason == "" {
			continue
		}
		sessionHistory(tx, s, reason)
		if announce {
			t := posture.Transition{Kind: posture.TransitionSessionRemoved, IdentityID: s.IdentityID, APISessionID: apiSessionID,
				ServiceID: s.ServiceID, ServiceName: serviceName(tx, s.ServiceID), SessionID: s.ID, Reason: reason}
			if err := tx.transition(t, s.ID); err != nil {
				return err
			}
		}
		if err := deleteSession(tx, s); err != nil {
			return err
		}
	}
	return nil
}

// reevaluateAll re-evaluates, at a time, every API session of the
// identities for which affected answers true (after a change of checks,
// policies or roles).
func reevaluateAll(tx *Tx, at time.Time, affected func(identityID string) bool) error {
	for _, id := range tx.graph.withSessions() {
		if !affected(id) {
			continue
		}
		if tx.interrupt != nil {
			if err := tx.interrupt(); err != nil {
				return err
			}
		}
		if err := reevaluate(tx, id, tx.graph.sessionsOf(id), at, true); err != nil {
			return err
		}
	}
	return nil
}

// recordFailure adds a denied request to the identity's ring of failed
// service requests, dropping the oldest beyond MaxFailedRequests, and to
// the fleet-wide ring, overwriting the oldest beyond
// MaxFleetFailedRequests. Both follow the log's order, so a replay
// rebuilds them as they were.
func recordFailure(tx *Tx, e posture.Event, p posture.SessionDenied) error {
	f := posture.FailedServiceRequest{
		APISessionID: p.APISessionID, ServiceID: p.ServiceID, ServiceName: p.ServiceName,
		SessionType: p.Type, When: e.At, PolicyFailures: p.PolicyFailures,
	}
	prefix := failedPrefix(p.IdentityID)
	if err := tx.put(appendPosition(prefix, e), f); err != nil {
		return err
	}
	if err := addFleetFailure(tx, posture.FleetFailedRequest{IdentityID: p.IdentityID, FailedServiceRequest: f}); err != nil {
		return err
	}
	failing := make([]string, 0, len(p.PolicyFailures))
	for _, pf := range p.PolicyFailures {
		failing = append(failing, pf.PolicyName)
	}
	summary := fmt.Sprintf("%s session for service %s denied: failing policies %s", p.Type, p.ServiceName, strings.Join(failing, ", "))
	tx.history(p.IdentityID, p.APISessionID, posture.HistorySession, summary, p.PolicyFailures)
	return trimRing(tx, prefix, posture.MaxFailedRequests)
}

// trimRing keeps the newest size entries under prefix (keys that sort in
// the order they were written), deleting the oldest.
func trimRing(tx *Tx, prefix []byte, size int) error {
	var keys [][]byte
	if err := scan(tx.b, prefix, func(key, _ []byte) (bool, error) {
		keys = append(keys, slices.Clone(key))
		return true, nil
	}); err != nil {
		return err
	}
	for len(keys) > size {
		if err := tx.del(keys[0]); err != nil {
			return err
		}
		keys = keys[1:]
	}
	return nil
}

// addFleetFailure writes a failed request in the next slot of the
// fleet-wide ring.
func addFleetFailure(tx *Tx, f posture.FleetFailedRequest) error {
	var n uint64
	if _, err := getJSON(tx.r(), fleetFailedCount, &n); err != nil {
		return err
	}
	if err := tx.put(fleetFailedSlot(n), f); err != nil {
		return err
	}
	return tx.put(fleetFailedCount, n+1)
}

// dropFleetFailures empties the slots of the fleet-wide ring that hold an
// identity's failed requests (at most MaxFleetFailedRequests values to
// look at; each starts with the identity's id, so none is decoded).
func dropFleetFailures(tx *Tx, identityID string) error {
	id, err := marshal(identityID)
	if err != nil {
		return err
	}
	// FleetFailedRequest's first field is the identity's id.
	head := append([]byte(`{"identityId":`), id...)
	var keys [][]byte
	if err := scan(tx.b, fleetFailedPrefix, func(key, value []byte) (bool, error) {
		if bytes.HasPrefix(value, head) && len(value) > len(head) && (value[len(head)] == ',' || value[len(head)] == '}') {
			keys = append(keys, slices.Clone(key))
		}
		return true, nil
	}); err != nil {
		return err
	}
	for _, k := range keys {
		if err := tx.del(k); err != nil {
			return err
		}
	}
	return nil
}

// startSessionPosture creates an API session's posture record and
// evaluates its policies once, so that later facts change states from a
// known start.
func startSessionPosture(tx *Tx, s posture.APISession) error {
	tx.graph.addSession(s.IdentityID, s.ID)
	err := tx.put(sessionStateKey(s.ID), sessionState{
		IdentityID: s.IdentityID,
		Posture:    posture.SessionPosture{APISessionID: s.ID, SDKInfo: s.SDKInfo},
		Policies:   map[string]bool{},
	})
	if err != nil {
		return err
	}
	return reevaluate(tx, s.IdentityID, []string{s.ID}, tx.event.At, false)
}

// endSessionPosture drops an API session's posture, deadline and sessions.
func endSessionPosture(tx *Tx, apiSessionID string) error {
	st, found, err := loadSessionState(tx, apiSessionID)
	if err != nil {
		return err
	}
	if found {
		tx.graph.dropSession(st.IdentityID, apiSessionID)
	}
	if found && !st.Deadline.IsZero() {
		if err := tx.delDue(st.Deadline, apiSessionID); err != nil {
			return err
		}
	}
	if found {
		if err := moveGrace(tx, st.IdentityID, apiSessionID, st.GraceUntil, time.Time{}); err != nil {
			return err
		}
	}
	ended := func(posture.Session) string { return "removed: its API session ended" }
	if err := removeSessions(tx, apiSessionID, ended, false); err != nil {
		return err
	}
	if err := tx.del(sessionStateKey(apiSessionID)); err != nil {
		return err
	}
	if found && len(st.Standing) > 0 {
		return refreshStanding(tx, st.IdentityID)
	}
	return nil
}

// clearMFAPosture forgets the MFA passes of all of an identity's API
// sessions (MFA was removed) and re-evaluates them at the event's time.
func clearMFAPosture(tx *Tx, identityID string) error {
	ids := tx.graph.sessionsOf(identityID)
	for _, id := range ids {
		st, found, err := loadSessionState(tx, id)
		if err != nil {
			return err
		}
		if !found {
			continue
		}
		st.Posture.MFAPassedAt = nil
		if err := tx.put(sessionStateKey(id), st); err != nil {
			return err
		}
	}
	return reevaluate(tx, identityID, ids, tx.event.At, false)
}

// dropIdentityPosture removes an identity's posture data, failure ring and
// would-deny ring.
func dropIdentityPosture(tx *Tx, identityID string) error {
	var ip posture.IdentityPosture
	if _, err := getJSON(tx.r(), identityPostureKey(identityID), &ip); err != nil {
		return err
	}
	if err := moveEvidence(tx, identityID, ip, posture.IdentityPosture{}); err != nil {
		return err
	}
	if err := tx.del(identityPostureKey(identityID)); err != nil {
		return err
	}
	if err := tx.del(changedKey(identityID)); err != nil {
		return err
	}
	if err := tx.delPrefix(wouldDenyPrefix(identityID)); err != nil {
		return err
	}
	return tx.delPrefix(failedPrefix(identityID))
}
