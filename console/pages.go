package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

func urlEscape(s string) string { return url.QueryEscape(s) }

// fleet is GET /console/fleet: a page of identities in name order
// (after=<name>) with their posture ages and last failed requests, and the
// live counts. With name=<name> the identities are those whose name is the
// name or starts with it, in name order, at most a page of them (read from
// the name index; "more" says when there are others).
func (c *Console) fleet(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after")
	name := strings.TrimSpace(r.URL.Query().Get("name"))
	var (
		ids  []posture.Identity
		err  error
		next string
		more bool
	)
	if name != "" {
		ids, err = c.opts.Store.IdentitiesByNamePrefix(name, c.opts.PageSize+1)
		after = ""
	} else {
		ids, err = c.opts.Store.IdentityPage(after, c.opts.PageSize+1)
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if len(ids) > c.opts.PageSize {
		ids = ids[:c.opts.PageSize]
		if name != "" {
			more = true
		} else {
			next = ids[len(ids)-1].Name
		}
	}
	now := c.opts.Now()
	type row struct {
		Identity posture.Identity
		Updated  string
		Failed   int
	}
	rows := make([]row, 0, len(ids))
	for _, id := range ids {
		ip, _, err := c.opts.Store.PostureData(id.ID)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		fr, err := c.opts.Store.FailedRequests(id.ID)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		rows = append(rows, row{Identity: id, Updated: age(now, latest(ip)), Failed: len(fr)})
	}
	failures, err := c.fleetFailures(lastFailures)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	counts, err := c.countsOf()
	if err != nil {
		c.fail(w, r, err)
		return
	}
	policies, checks, err := c.summary()
	if err != nil {
		c.fail(w, r, err)
		return
	}
	grace, _, err := c.opts.Store.InGrace(now, 50)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	losing, _, err := c.opts.Store.LosingAccess(now, now.Add(15*time.Minute), 50)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	c.render(w, r, http.StatusOK, "fleet", map[string]any{
		"Title": "Fleet", "Rows": rows, "Failures": failures, "Next": next, "After": after, "Counts": counts,
		"Name": name, "More": more, "PageSize": c.opts.PageSize, "Idle": idleOf(r),
		"Policies": policies, "Checks": checks, "InGrace": c.timed(now, grace), "Losing": c.timed(now, losing),
	})
}

// lastFailures is how many of the fleet's last failed requests the fleet
// page shows.
const lastFailures = 20

// failure is a failed service request and the identity it was refused to.
type failure struct {
	posture.FailedServiceRequest
	Identity posture.Identity
}

// fleetFailures reads the fleet's newest failed service requests, newest
// first, from the projection's fleet-wide index, with their identities
// (each read once; one deleted since keeps its id and no name).
func (c *Console) fleetFailures(limit int) ([]failure, error) {
	list, err := c.opts.Store.FleetFailedRequests(limit)
	if err != nil {
		return nil, err
	}
	identities := map[string]posture.Identity{}
	out := make([]failure, 0, len(list))
	for _, f := range list {
		id, ok := identities[f.IdentityID]
		if !ok {
			id, err = c.opts.Store.Identity(f.IdentityID)
			if errors.Is(err, posture.ErrNotFound) {
				id, err = posture.Identity{ID: f.IdentityID}, nil
			}
			if err != nil {
				return nil, err
			}
			identities[f.IdentityID] = id
		}
		out = append(out, failure{f.FailedServiceRequest, id})
	}
	return out, nil
}

// latest is when the identity last reported posture (zero if never).
func latest(ip posture.IdentityPosture) time.Time {
	var t time.Time
	if ip.OS != nil && ip.OS.At.After(t) {
		t = ip.OS.At
	}
	if ip.MAC != nil && ip.MAC.At.After(t) {
		t = ip.MAC.At
	}
	if ip.Domain != nil && ip.Domain.At.After(t) {
		t = ip.Domain.At
	}
	for _, p := range ip.Processes {
		if p.At.After(t) {
			t = p.At
		}
	}
	return t
}

// Counts are the fleet page's live figures.
type Counts struct {
	LogPosition      uint64 `json:"logPosition"`
	PendingDeadlines int    `json:"pendingDeadlines"`
	InGrace          int    `json:"inGrace"`
	LosingAccess     int    `json:"losingAccess"` // within 15 minutes
}

func (c *Console) countsOf() (Counts, error) {
	n, err := c.opts.Store.PendingDeadlines()
	if err != nil {
		return Counts{}, err
	}
	now := c.opts.Now()
	_, grace, err := c.opts.Store.InGrace(now, 1)
	if err != nil {
		return Counts{}, err
	}
	_, losing, err := c.opts.Store.LosingAccess(now, now.Add(15*time.Minute), 1)
	return Counts{LogPosition: c.opts.Store.Cursor(), PendingDeadlines: n, InGrace: grace, LosingAccess: losing}, err
}

// standing is a policy's or a check's fleet counters, with its name.
type standing struct {
	posture.FleetCount
	Name, TypeID string
}

// summary reads the fleet counters (per policy and per check: identities
// passing, failing, failing only for stale evidence), sorted by name.
func (c *Console) summary() (policies, checks []standing, err error) {
	counts, err := c.opts.Store.FleetCounts()
	if err != nil {
		return nil, nil, err
	}
	for _, fc := range counts {
		kind := posture.KindServicePolicy
		if fc.Kind == "c" {
			kind = posture.KindCheck
		}
		var named struct {
			Name   string `json:"name"`
			TypeID string `json:"typeId"`
		}
		if raw, err := c.opts.Store.RawEntity(kind, fc.ID); err == nil {
			_ = json.Unmarshal(raw, &named)
		}
		st := standing{FleetCount: fc, Name: named.Name, TypeID: named.TypeID}
		if fc.Kind == "c" {
			checks = append(checks, st)
		} else {
			policies = append(policies, st)
		}
	}
	byName := func(s []standing) {
		sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name || (s[i].Name == s[j].Name && s[i].ID < s[j].ID) })
	}
	byName(policies)
	byName(checks)
	return policies, checks, nil
}

// timedRow is an identity with a moment and the seconds left until it,
// which the page's script counts down from (the browser's clock may not be
// the node's).
type timedRow struct {
	IdentityID, Name, APISessionID string
	At                             time.Time
	LeftSeconds                    int64
}

// Left is the time left, for people: "4m2s", or "now" once past.
func (r timedRow) Left() string {
	if r.LeftSeconds <= 0 {
		return "now"
	}
	return (time.Duration(r.LeftSeconds) * time.Second).String()
}

func (c *Console) timed(now time.Time, list []posture.TimedIdentity) []timedRow {
	out := make([]timedRow, 0, len(list))
	for _, t := range list {
		name := t.IdentityID
		if id, err := c.opts.Store.Identity(t.IdentityID); err == nil {
			name = id.Name
		}
		left := max(t.At.Sub(now).Round(time.Second), 0)
		out = append(out, timedRow{t.IdentityID, name, t.APISessionID, t.At, int64(left / time.Second)})
	}
	return out
}

// counts is GET /console/fleet/counts, read by the fleet page's script to
// refresh the counts without a reload.
func (c *Console) counts(w http.ResponseWriter, r *http.Request) {
	counts, err := c.countsOf()
	if err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(counts)
}

// timeHint says what a moment may be.
const timeHint = "must be a time (2026-11-22T10:32:00Z, UTC without a zone; or before now: -2h)"

// timeWindow reads from and to (RFC 3339, a duration before now such as
// -2h, or the form 2006-01-02T15:04:05 taken as UTC);
// by default the last 24 hours, narrowed to the identity's entries. A to in
// whole seconds (or minutes) is the end of that second (or minute): the
// page's inputs show its window to the second, and submitting them again
// keeps what they showed.
func (c *Console) timeWindow(r *http.Request) (from, to time.Time, explicit bool, err error) {
	q := r.URL.Query()
	to = c.opts.Now().UTC()
	from = to.Add(-24 * time.Hour)
	if v := q.Get("to"); v != "" {
		if to, err = parseTime(v, c.opts.Now()); err != nil {
			return from, to, false, posture.Invalid("to", timeHint, v)
		}
		to = endOf(v, to)
		explicit = true
	}
	if v := q.Get("from"); v != "" {
		if from, err = parseTime(v, c.opts.Now()); err != nil {
			return from, to, false, posture.Invalid("from", timeHint, v)
		}
		explicit = true
	} else if q.Get("to") != "" {
		from = to.Add(-24 * time.Hour)
	}
	if !from.Before(to) {
		return from, to, false, posture.Invalid("from", "must be before to", q.Get("from"))
	}
	return from, to, explicit, nil
}

// parseTime reads a moment: RFC 3339, the datetime-local form (UTC), or a
// duration before now such as -2h, as the command line takes it.
func parseTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil && strings.HasPrefix(v, "-") {
		return now.Add(d).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, errors.New("not a time")
}

// endOf is the last moment of the minute, second or fraction of a second
// a time stands for (posture.EndOf, as the API reads it); a duration before
// now is exact.
func endOf(v string, t time.Time) time.Time {
	if strings.HasPrefix(v, "-") {
		return t
	}
	if _, err := time.Parse("2006-01-02T15:04", v); err == nil {
		return t.Add(time.Minute - time.Nanosecond)
	}
	return posture.EndOf(v, t)
}

// maxTimelineEntries bounds the history entries an identity's page shows:
// the newest of its window. An identity's own requests make its history,
// and the page must cost the same however much of it there is.
const maxTimelineEntries = 2000

// maxCarriedEntries bounds the history read back from a window's start for
// the policies' states there: a policy whose last change is further back
// is drawn from its first change in the window.
const maxCarriedEntries = 20000

// identity is GET /console/identities/{id}: posture with ages, sessions,
// failed requests and the timeline of the time window.
func (c *Console) identity(w http.ResponseWriter, r *http.Request) {
	id, err := c.opts.Store.Identity(r.PathValue("id"))
	if errors.Is(err, posture.ErrNotFound) {
		// Said with the id and, when names start with it, a search of it
		// as a name on the fleet.
		data := map[string]any{"Title": "Identity not found", "Message": fmt.Sprintf("No identity has the id %q, nor a name that starts with it.", r.PathValue("id"))}
		if named, err := c.opts.Store.IdentitiesByNamePrefix(r.PathValue("id"), 1); err == nil && len(named) > 0 {
			data["Message"], data["Find"] = fmt.Sprintf("No identity has the id %q.", r.PathValue("id")), r.PathValue("id")
		}
		c.render(w, r, http.StatusNotFound, "error", data)
		return
	}
	if err != nil {
		c.fail(w, r, err)
		return
	}
	// A window that is not one is said beside the form, which keeps what
	// was typed; the rest of the page is shown without its timeline.
	from, to, explicit, windowErr := c.timeWindow(r)
	status, windowMsg := http.StatusOK, ""
	if windowErr != nil {
		if status, windowMsg = pageError(windowErr); status == http.StatusInternalServerError {
			c.fail(w, r, windowErr)
			return
		}
	}
	var history []posture.HistoryEntry
	more := false
	if windowErr == nil && !explicit {
		// By default the window is the 24 hours up to the identity's last
		// event, however long ago that was (now when it has none).
		last, _, err := c.opts.Store.HistoryTail(id.ID, time.Time{}, to, 1)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		if len(last) == 1 && last[0].At.Before(from) {
			to = last[0].At
			from = to.Add(-24 * time.Hour)
		}
	}
	if windowErr == nil {
		if history, more, err = c.opts.Store.HistoryTail(id.ID, from, to, maxTimelineEntries); err != nil {
			c.fail(w, r, err)
			return
		}
	}
	failed, err := c.opts.Store.FailedRequests(id.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	wouldDeny, err := c.opts.Store.WouldDenies(id.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	ip, sessions, err := c.opts.Store.PostureData(id.ID)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	now := c.opts.Now()
	graces, err := c.opts.Store.Graces(id.ID, now)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if !explicit && len(history) > 0 {
		// Fit the default window to what happened in it, so that events
		// close together stay apart; to now while a grace runs.
		first, last := history[0].At, history[len(history)-1].At
		pad := max(last.Sub(first)/10, time.Millisecond)
		from, to = first.Add(-pad), last.Add(pad)
		if len(graces) > 0 && to.Before(now) {
			to = now
		}
	}
	// Several entries of one event share its anchor (the first one).
	type eventRow struct {
		posture.HistoryEntry
		Anchor bool
	}
	events := make([]eventRow, len(history))
	for i, h := range history {
		events[i] = eventRow{h, i == 0 || history[i-1].Seq != h.Seq}
	}
	serviceName := named(func(id string) (string, bool) {
		svc, err := c.opts.Store.Service(id)
		return svc.Name, err == nil
	})
	data := map[string]any{
		"Title": id.Name, "Identity": id, "Posture": postureRows(now, ip, c.checkName()), "Sessions": sessions,
		"Failed": failed, "History": events, "More": more, "Shown": maxTimelineEntries,
		"From": from.UTC().Format(time.RFC3339), "To": to.UTC().Format(time.RFC3339), "WindowField": "",
		"Services": c.services(id.ID),
	}
	// The inputs hold what was typed, an empty one included (a moment
	// before now such as -2h stays one, and an empty to stays now), else
	// the default window shown.
	q := r.URL.Query()
	if q.Has("from") || q.Has("to") || windowErr != nil {
		data["From"], data["To"] = q.Get("from"), q.Get("to")
	}
	if windowErr != nil {
		data["WindowError"] = windowMsg
		var pe *posture.Error
		if asPostureError(windowErr, &pe) {
			data["WindowField"] = pe.Field
		}
	} else {
		// The policies' states at the start of what is shown (the
		// window's, or its oldest entry shown when there are more).
		start := from
		if more && len(history) > 0 {
			start = history[0].At
		}
		carried, err := c.opts.Store.AccessBefore(id.ID, start, maxCarriedEntries)
		if err != nil {
			c.fail(w, r, err)
			return
		}
		data["Timeline"] = buildTimeline(id.ID, carried, history, failed, wouldDeny, graces, serviceName, from, to, now)
	}
	c.render(w, r, status, "identity", data)
}

// postureRow is one posture fact with its age.
type postureRow struct {
	Fact, Value, Check, Age string
}

// named names entities of a page by their ids, each looked up once: its
// name now, or what the caller gives when it has none (it is gone).
func named(lookup func(id string) (string, bool)) func(id, otherwise string) string {
	names := map[string]string{}
	return func(id, otherwise string) string {
		if n, ok := names[id]; ok {
			return n
		}
		n, ok := lookup(id)
		if !ok || n == "" {
			n = otherwise
		}
		names[id] = n
		return n
	}
}

// checkName names checks by their ids: a check's name, or its id when it
// has none now (deleted, or a client's id for a check that never was).
func (c *Console) checkName() func(id string) string {
	name := named(func(id string) (string, bool) {
		var ch struct{ Name string }
		raw, err := c.opts.Store.RawEntity(posture.KindCheck, id)
		if err != nil || json.Unmarshal(raw, &ch) != nil {
			return "", false
		}
		return ch.Name, true
	})
	return func(id string) string { return name(id, id) }
}

func postureRows(now time.Time, ip posture.IdentityPosture, checkName func(string) string) []postureRow {
	var out []postureRow
	if ip.OS != nil {
		v := ip.OS.Type + " " + ip.OS.Version
		if ip.OS.Build != "" {
			v += " build " + ip.OS.Build
		}
		out = append(out, postureRow{"OS", v, checkName(ip.OS.CheckID), age(now, ip.OS.At)})
	}
	if ip.MAC != nil {
		out = append(out, postureRow{"MAC", joinComma(ip.MAC.Addresses), checkName(ip.MAC.CheckID), age(now, ip.MAC.At)})
	}
	if ip.Domain != nil {
		out = append(out, postureRow{"Domain", ip.Domain.Domain, checkName(ip.Domain.CheckID), age(now, ip.Domain.At)})
	}
	for _, p := range ip.Processes {
		state := "not running"
		if p.IsRunning {
			state = "running"
		}
		out = append(out, postureRow{"Process", p.Path + " (" + state + ")", checkName(p.CheckID), age(now, p.At)})
	}
	return out
}

// explain is GET /console/explain?identity=&service=&type=&at=: the
// decision at the moment (default now).
func (c *Console) explain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	identityID, serviceID, typ := q.Get("identity"), q.Get("service"), q.Get("type")
	switch {
	case typ == "" || strings.EqualFold(typ, posture.Dial):
		typ = posture.Dial
	case strings.EqualFold(typ, posture.Bind):
		typ = posture.Bind
	default:
		c.fail(w, r, posture.Invalid("type", "must be Dial or Bind", typ))
		return
	}
	data := map[string]any{"Title": "Explain", "IdentityID": identityID, "ServiceID": serviceID, "Type": typ, "At": q.Get("at")}
	// A question that cannot be answered is said on the form, which keeps
	// what was asked.
	again := func(err error) {
		status, msg := pageError(err)
		if status == http.StatusInternalServerError {
			c.fail(w, r, err)
			return
		}
		data["Error"] = msg
		c.render(w, r, status, "explain", data)
	}
	if identityID == "" {
		c.render(w, r, http.StatusOK, "explain", data)
		return
	}
	var (
		at  time.Time
		err error
	)
	if v := q.Get("at"); v != "" {
		if at, err = parseTime(v, c.opts.Now()); err != nil {
			again(posture.Invalid("at", timeHint, v))
			return
		}
		// A whole second (or minute) is its end, as on the command line
		// and the API, so that a time copied from one takes in the event
		// it names.
		at = endOf(v, at)
	}
	var (
		svc      posture.Service
		svcKnown bool
	)
	if serviceID != "" {
		if svc, svcKnown, err = c.serviceOf(serviceID); err != nil {
			again(err)
			return
		}
		if svcKnown {
			serviceID = svc.ID
			data["ServiceID"] = svc.ID
		}
	}
	// The explainer is asked once a question: the answer that finds an
	// identity deleted since had the id at the moment is the one shown.
	var (
		asked     [2]string
		answer    posture.Explanation
		answerErr error
	)
	ask := func(identityID string) (posture.Explanation, error) {
		if k := [2]string{identityID, serviceID}; asked != k {
			asked = k
			answer, answerErr = c.opts.Explainer.Explain(r.Context(), identityID, serviceID, typ, at)
		}
		return answer, answerErr
	}
	id, deleted, err := c.identityOf(identityID, at, func(id string) (bool, error) {
		_, err := ask(id)
		var pe *posture.Error
		if asPostureError(err, &pe) && pe.Code == posture.CodeNotFound {
			return !strings.HasPrefix(pe.Message, "no identity "), nil
		}
		return err == nil, err
	})
	if err != nil {
		again(err)
		return
	}
	// The form asks again by id, whatever it was asked by; an identity
	// found by its name is said with its id, so that it is not taken for
	// one that had the id typed.
	who := id.Name
	if deleted {
		who = "identity " + id.ID + " (deleted since)"
	}
	data["IdentityID"], data["Who"], data["Deleted"] = id.ID, who, deleted
	if id.ID != identityID {
		why := fmt.Sprintf("%q is not the id of an identity now", identityID)
		if !at.IsZero() {
			why = fmt.Sprintf("%q was not the id of an identity at %s", identityID, stamp(at))
		}
		data["Resolved"] = fmt.Sprintf("%s, so it is taken as a name: explaining the identity named %s (id %s).", why, id.Name, id.ID)
	}
	services := c.services(id.ID)
	if serviceID != "" && !slices.ContainsFunc(services, func(s service) bool { return s.ID == serviceID }) {
		// A service no policy grants the identity is still the one asked
		// about: the choice keeps it, so that asking again asks the same.
		// An identity deleted since is granted nothing now.
		name := serviceID + " (no service has this id or name now)"
		switch {
		case svcKnown && deleted:
			name = svc.Name
		case svcKnown:
			name = svc.Name + " (not granted to this identity)"
		}
		services = append([]service{{serviceID, name}}, services...)
	}
	data["Services"] = services
	if serviceID == "" {
		// Nothing is explained until a service is chosen: none is
		// chosen for the user.
		data["Choose"] = true
		c.render(w, r, http.StatusOK, "explain", data)
		return
	}
	// What did not exist at the moment is said as it is known now.
	switch {
	case at.IsZero():
	case at.Before(id.CreatedAt) && id.ID != identityID:
		// Found by its name now: no identity had the id then, and the one
		// with the name did not exist yet.
		delete(data, "Resolved")
		again(posture.Errorf(posture.CodeNotFound, "No identity had the id %q at %s, and the identity named %s (id %s) was created later, at %s.",
			identityID, stamp(at), id.Name, id.ID, stamp(id.CreatedAt)))
		return
	case at.Before(id.CreatedAt):
		again(posture.Errorf(posture.CodeNotFound, "%s did not exist at %s (created %s).", id.Name, stamp(at), stamp(id.CreatedAt)))
		return
	case svcKnown && at.Before(svc.CreatedAt):
		again(posture.Errorf(posture.CodeNotFound, "Service %s did not exist at %s (created %s).", svc.Name, stamp(at), stamp(svc.CreatedAt)))
		return
	}
	x, err := ask(id.ID)
	if err != nil {
		again(explainError(err, who, serviceID, svc, svcKnown, at))
		return
	}
	data["Explanation"] = x
	data["At"] = x.At.UTC().Format(time.RFC3339Nano)
	data["OtherType"] = posture.OtherType(typ)
	c.render(w, r, http.StatusOK, "explain", data)
}

// explainError says what the explainer could not find at the moment in
// words: the identity's or the service's name and the moment; a service
// that no id or name names now is said to be unknown by either.
func explainError(err error, who, serviceID string, svc posture.Service, svcKnown bool, at time.Time) error {
	var pe *posture.Error
	if !asPostureError(err, &pe) || pe.Code != posture.CodeNotFound {
		return err
	}
	when := "now"
	if !at.IsZero() {
		when = "at " + stamp(at)
	}
	switch msg := pe.Message; {
	case strings.HasPrefix(msg, "no identity "):
		return posture.Errorf(posture.CodeNotFound, "%s did not exist %s.", who, when)
	case !svcKnown:
		return posture.Errorf(posture.CodeNotFound, "No service has the id or name %q now, and none had that id %s.", serviceID, when)
	case strings.HasPrefix(msg, "no service "):
		return posture.Errorf(posture.CodeNotFound, "Service %s did not exist %s.", svc.Name, when)
	}
	return err
}

// identityOf reads the identity an explain question names: the one with
// the id now; else, at a past moment, the one that had the id then
// (hadID asks the moment), which is one deleted since (it keeps its
// history, and is known by its id alone: deleted); else the one with the
// name now.
func (c *Console) identityOf(idOrName string, at time.Time, hadID func(id string) (bool, error)) (posture.Identity, bool, error) {
	id, err := c.opts.Store.Identity(idOrName)
	if !errors.Is(err, posture.ErrNotFound) {
		return id, false, err
	}
	if !at.IsZero() {
		had, err := hadID(idOrName)
		if err != nil {
			return posture.Identity{}, false, err
		}
		if had {
			return posture.Identity{ID: idOrName}, true, nil
		}
	}
	id, err = c.opts.Store.IdentityByName(idOrName)
	if errors.Is(err, posture.ErrNotFound) {
		return id, false, posture.Errorf(posture.CodeNotFound, "No identity has the id or name %q.", idOrName)
	}
	return id, false, err
}

// serviceOf reads the service an explain question names by its id or, when
// no service has that id now, by its name. It reports false when neither
// names one now (one deleted since may have had the id at the moment
// asked).
func (c *Console) serviceOf(idOrName string) (posture.Service, bool, error) {
	svc, err := c.opts.Store.Service(idOrName)
	if errors.Is(err, posture.ErrNotFound) {
		svc, err = c.opts.Store.ServiceByName(idOrName)
	}
	if errors.Is(err, posture.ErrNotFound) {
		return svc, false, nil
	}
	return svc, err == nil, err
}

// checkRow is a posture check on the checks page, with its enforcement as
// it stands now.
type checkRow struct {
	posture.Check
	// Enforcement: "enforced" or "report-only"; EnforcedSince, when an
	// enforceAt has passed.
	Enforcement   string
	EnforcedSince *time.Time
	ReportOnly    bool
}

// reportRow is a report-only check's impact: how many identities fail it
// now and, for the first impactRows, since when and what they would lose.
type reportRow struct {
	Check        posture.Check
	EnforceAt    *time.Time
	Left         string
	Failing      int64
	Losing       int
	Identities   []impactRow
	More         bool
	FailingShown int
}

type impactRow struct {
	IdentityID, Name string
	Since            time.Time
	For              string
	Loses            []string
	SessionsRemoved  int
}

// impactRows is how many identities a report-only check's impact lists.
const impactRows = 50

// checks is GET /console/checks: the posture checks with what they expect
// and their enforcement; for each report-only check, its impact (who fails
// it now and since when, who would lose access at its enforceAt).
func (c *Console) checks(w http.ResponseWriter, r *http.Request) {
	checks, err := c.opts.Store.Checks()
	if err != nil {
		c.fail(w, r, err)
		return
	}
	now := c.opts.Now()
	failing := map[string]int64{}
	if counts, err := c.opts.Store.FleetCounts(); err == nil {
		for _, fc := range counts {
			if fc.Kind == "c" {
				failing[fc.ID] = fc.ReportOnlyFailing
			}
		}
	}
	rows := make([]checkRow, 0, len(checks))
	var reports []reportRow
	for _, chk := range checks {
		row := checkRow{Check: chk, Enforcement: "enforced"}
		e := chk.Enforcement
		switch {
		case chk.ReportOnly(now):
			row.Enforcement, row.ReportOnly = "report-only", true
		case e != nil && e.EnforceAt != nil:
			row.EnforcedSince = e.EnforceAt
		}
		rows = append(rows, row)
		if !row.ReportOnly {
			continue
		}
		rep := reportRow{Check: chk, EnforceAt: e.EnforceAt, Failing: failing[chk.ID]}
		if e.EnforceAt != nil {
			rep.Left = span(e.EnforceAt.Sub(now))
		}
		if c.opts.Impact != nil {
			list, more, err := c.opts.Impact.Impact(chk.ID, "", impactRows)
			if err != nil {
				c.fail(w, r, err)
				return
			}
			rep.More = more
			for _, im := range list {
				ir := impactRow{IdentityID: im.IdentityID, Name: im.IdentityID, Since: im.Since,
					For: span(now.Sub(im.Since)), SessionsRemoved: im.SessionsRemoved}
				if id, err := c.opts.Store.Identity(im.IdentityID); err == nil {
					ir.Name = id.Name
				}
				for _, l := range im.Loses {
					name := l.ServiceID
					if svc, err := c.opts.Store.Service(l.ServiceID); err == nil {
						name = svc.Name
					}
					ir.Loses = append(ir.Loses, name+" ("+l.Type+")")
				}
				if len(ir.Loses) > 0 || ir.SessionsRemoved > 0 {
					rep.Losing++
				}
				rep.Identities = append(rep.Identities, ir)
			}
			rep.FailingShown = len(rep.Identities)
		}
		reports = append(reports, rep)
	}
	c.render(w, r, http.StatusOK, "checks", map[string]any{"Title": "Posture checks", "Checks": rows, "Reports": reports})
}

// service is a service an identity's policies grant, for links and choices.
type service struct{ ID, Name string }

// services lists the services the identity's policies grant, with their
// names, by name.
func (c *Console) services(identityID string) []service {
	var out []service
	for _, g := range c.opts.Store.ServicesFor(identityID, "") {
		name := g.ServiceID
		if s, err := c.opts.Store.Service(g.ServiceID); err == nil {
			name = s.Name
		}
		out = append(out, service{g.ServiceID, name})
	}
	slices.SortStableFunc(out, func(a, b service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// span shows a duration for people: to the second within two days, in
// days and hours beyond ("41d 3h", not "987h0m0s").
func span(d time.Duration) string {
	if d < 48*time.Hour && d > -48*time.Hour {
		return d.Truncate(time.Second).String()
	}
	day := 24 * time.Hour
	return fmt.Sprintf("%dd %dh", d/day, (d%day).Abs()/time.Hour)
}
