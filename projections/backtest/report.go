package backtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-0809debe/posture"
)

// Report is what a backtest found. Lists are sorted (by count, then by
// name or time), so that the same log and candidate give the same report.
type Report struct {
	Window Window `json:"window"`
	// Changed: at least one decision or transition differs.
	Changed bool   `json:"changed"`
	Totals  Totals `json:"totals"`
	// Services and Checks: how many identities and requests each would
	// newly deny or newly allow (a check counts where it refuses in the
	// candidate's refusal, or refused in the recorded one; a report-only
	// check refuses nothing).
	Services []Impact `json:"services"`
	Checks   []Impact `json:"checks"`
	// LostAccess: when each identity would first have lost access (a
	// request refused that was granted, or a session removed that was
	// kept), earliest first.
	LostAccess []LostAccess `json:"lostAccess"`
	// FailingValues: the values reported to the checks that refuse the
	// newly denied requests (not report-only ones), most identities first.
	FailingValues []FailingValue `json:"failingValues"`
	// Enforcements: the candidate's checks that only report, and when
	// each is enforced (null: when its mode changes). Their failing
	// verdicts refuse nothing in the window: the requests they would
	// refuse are counted as would-denies.
	Enforcements []Enforcement `json:"enforcements"`
	// Changes: every changed decision and transition in log order, the
	// evidence (at most Options.MaxChanges, and Options.MaxBytes of them
	// as JSON; ChangesOmitted counts the rest).
	Changes        []Change `json:"changes"`
	ChangesOmitted int      `json:"changesOmitted,omitempty"`
}

// Enforcement is a check of the candidate that only reports.
type Enforcement struct {
	CheckID   string     `json:"checkId"`
	CheckName string     `json:"checkName"`
	EnforceAt *time.Time `json:"enforceAt"`
}

// Window is the stretch of the log replayed.
type Window struct {
	From  *time.Time `json:"from,omitempty"`
	Until *time.Time `json:"until,omitempty"`
	// FirstEvent and LastEvent are the times of the window's first and
	// last events.
	FirstEvent *time.Time `json:"firstEvent,omitempty"`
	LastEvent  *time.Time `json:"lastEvent,omitempty"`
	Events     uint64     `json:"events"`
}

// Totals count decisions and transitions over the window.
type Totals struct {
	// Decisions are the recorded session requests: granted or denied.
	Decisions    int `json:"decisions"`
	Granted      int `json:"granted"`
	Denied       int `json:"denied"`
	NewlyDenied  int `json:"newlyDenied"`
	NewlyAllowed int `json:"newlyAllowed"`
	// NewlyWouldDeny: requests granted as recorded (and fully, not only
	// for report-only checks) that the candidate grants only because its
	// failing checks report: denied once they are enforced.
	NewlyWouldDeny int `json:"newlyWouldDeny"`
	// Identities with at least one request newly denied, allowed or
	// would-denied.
	IdentitiesNewlyDenied    int `json:"identitiesNewlyDenied"`
	IdentitiesNewlyAllowed   int `json:"identitiesNewlyAllowed"`
	IdentitiesNewlyWouldDeny int `json:"identitiesNewlyWouldDeny"`
	// Transitions derived from the log (policies passing and failing,
	// sessions removed, grace and timeouts), all those recorded: the same
	// under the candidate, only without it (recorded), and the removals of
	// sessions the candidate refused (counted with that refusal, not as
	// changes of their own); and those only with the candidate.
	Transitions                  int `json:"transitions"`
	TransitionsUnchanged         int `json:"transitionsUnchanged"`
	TransitionsOnlyRecorded      int `json:"transitionsOnlyRecorded"`
	TransitionsOfRefusedSessions int `json:"transitionsOfRefusedSessions"`
	TransitionsOnlyCandidate     int `json:"transitionsOnlyCandidate"`
	// Sessions removed that the candidate would not remove, and sessions
	// it would remove that were kept.
	RemovalsOnlyRecorded  int `json:"removalsOnlyRecorded"`
	RemovalsOnlyCandidate int `json:"removalsOnlyCandidate"`
}

// Impact is what the candidate changes for one service or check.
type Impact struct {
	ID                     string `json:"id"`
	Name                   string `json:"name"`
	Type                   string `json:"type,omitempty"` // a check's typeId
	NewlyDeniedIdentities  int    `json:"newlyDeniedIdentities"`
	NewlyDeniedRequests    int    `json:"newlyDeniedRequests"`
	NewlyAllowedIdentities int    `json:"newlyAllowedIdentities"`
	NewlyAllowedRequests   int    `json:"newlyAllowedRequests"`
	// A report-only check's newly would-denied identities and requests.
	NewlyWouldDenyIdentities int `json:"newlyWouldDenyIdentities"`
	NewlyWouldDenyRequests   int `json:"newlyWouldDenyRequests"`
}

// LostAccess is the first moment an identity would have lost access.
type LostAccess struct {
	IdentityID   string    `json:"identityId"`
	IdentityName string    `json:"identityName"`
	At           time.Time `json:"at"`
	Seq          uint64    `json:"seq"`
	ServiceID    string    `json:"serviceId"`
	ServiceName  string    `json:"serviceName"`
	How          string    `json:"how"` // "request denied" or "session removed"
}

// FailingValue is a value reported to a check that refuses newly denied
// requests ("OS Windows 10.0.19044"), and how many identities reported it.
type FailingValue struct {
	CheckID    string `json:"checkId"`
	CheckName  string `json:"checkName"`
	CheckType  string `json:"checkType"`
	Value      string `json:"value"`
	Identities int    `json:"identities"`
	Requests   int    `json:"requests"`
}

// Outcomes of a change.
const (
	Granted     = "granted"
	Denied      = "denied"
	WouldDeny   = "would-deny" // granted only because failing checks report
	Happened    = "happened"
	NotHappened = "none"
)

// Change is one decision or transition that differs, with what was
// recorded and what the candidate would have done. Kind is
// "session-request" or a transition kind (posture.Transition*).
type Change struct {
	Seq          uint64    `json:"seq"`
	EventID      string    `json:"eventId"`
	At           time.Time `json:"at"`
	Kind         string    `json:"kind"`
	IdentityID   string    `json:"identityId"`
	IdentityName string    `json:"identityName"`
	APISessionID string    `json:"apiSessionId,omitempty"`
	ServiceID    string    `json:"serviceId,omitempty"`
	ServiceName  string    `json:"serviceName,omitempty"`
	SessionType  string    `json:"sessionType,omitempty"`
	PolicyID     string    `json:"policyId,omitempty"`
	PolicyName   string    `json:"policyName,omitempty"`
	Recorded     string    `json:"recorded"`
	Candidate    string    `json:"candidate"`
	// Failures: the failing policies and checks of the refusal (the
	// candidate's for a newly denied or would-denied request, the
	// recorded one for a newly allowed request); a transition's checks.
	// At most maxListedChecks checks are listed in all; ChecksOmitted
	// counts the rest.
	Failures      []posture.PolicyFailure   `json:"failures,omitempty"`
	Checks        []posture.TransitionCheck `json:"checks,omitempty"`
	ChecksOmitted int                       `json:"checksOmitted,omitempty"`
}

// maxListedChecks bounds the failing checks a change lists: a candidate
// of many checks and policies would otherwise list every one of them in
// every change.
const maxListedChecks = 32

// listFailures is failures with at most maxListedChecks checks in all,
// and how many it leaves out.
func listFailures(failures []posture.PolicyFailure) ([]posture.PolicyFailure, int) {
	out := make([]posture.PolicyFailure, 0, len(failures))
	left, omitted := maxListedChecks, 0
	for _, f := range failures {
		if left == 0 {
			omitted += len(f.Checks)
			continue
		}
		if len(f.Checks) > left {
			omitted += len(f.Checks) - left
			f.Checks = f.Checks[:left]
		}
		left -= len(f.Checks)
		out = append(out, f)
	}
	return out, omitted
}

// decision is a recorded session request decided again.
type decision struct {
	seq                        uint64
	eventID                    string
	at                         time.Time
	identityID, apiSessionID   string
	serviceID, typ             string
	recorded, candidate        bool
	failures, recordedFailures []posture.PolicyFailure
	// wouldDeny: the candidate grants only because its failing checks
	// report; recordedWouldDeny: so was the recorded grant.
	wouldDeny, recordedWouldDeny bool
}

// tally counts requests and distinct identities.
type tally struct {
	requests   int
	identities map[string]bool
}

func (t *tally) add(identityID string) {
	if t.identities == nil {
		t.identities = map[string]bool{}
	}
	t.requests++
	t.identities[identityID] = true
}

type impactAcc struct {
	id, name, typ              string
	denied, allowed, wouldDeny tally
}

type valueAcc struct {
	check FailingValue
	tally tally
}

// accumulator builds a report as the backtest goes.
type accumulator struct {
	max       int
	maxBytes  int
	bytes     int
	full      bool // the changes listed reached maxBytes
	totals    Totals
	denied    map[string]bool // identities newly denied
	allowed   map[string]bool
	wouldDeny map[string]bool
	services  map[string]*impactAcc
	checks    map[string]*impactAcc
	lost      map[string]LostAccess
	values    map[string]*valueAcc
	changes   []Change
	omitted   int
}

func newAccumulator(max, maxBytes int) *accumulator {
	return &accumulator{max: max, maxBytes: maxBytes, denied: map[string]bool{}, allowed: map[string]bool{}, wouldDeny: map[string]bool{}, services: map[string]*impactAcc{},
		checks: map[string]*impactAcc{}, lost: map[string]LostAccess{}, values: map[string]*valueAcc{}}
}

func (a *accumulator) change(c Change) {
	if len(a.changes) >= a.max || a.full {
		a.omitted++
		return
	}
	b, err := json.Marshal(c)
	if err != nil || a.bytes+len(b) > a.maxBytes {
		a.full = true // the changes after one left out for size are left out too: the list is the window's beginning
		a.omitted++
		return
	}
	a.bytes += len(b)
	a.changes = append(a.changes, c)
}

func impact(m map[string]*impactAcc, id, name, typ string) *impactAcc {
	i, ok := m[id]
	if !ok {
		i = &impactAcc{id: id, name: name, typ: typ}
		m[id] = i
	}
	if i.name == "" {
		i.name = name
	}
	return i
}

func (a *accumulator) lose(l LostAccess) {
	if old, ok := a.lost[l.IdentityID]; ok && !l.At.Before(old.At) {
		return
	}
	a.lost[l.IdentityID] = l
}

func (a *accumulator) decision(d decision, n names) {
	a.totals.Decisions++
	if d.recorded {
		a.totals.Granted++
	} else {
		a.totals.Denied++
	}
	newlyWouldDeny := d.recorded && d.wouldDeny && !d.recordedWouldDeny
	if d.recorded == d.candidate && !newlyWouldDeny {
		return
	}
	identity, service := n.identity(d.identityID), n.service(d.serviceID)
	c := Change{Seq: d.seq, EventID: d.eventID, At: d.at, Kind: "session-request", IdentityID: d.identityID,
		IdentityName: identity, APISessionID: d.apiSessionID, ServiceID: d.serviceID, ServiceName: service,
		SessionType: d.typ, Recorded: outcome(d.recorded), Candidate: outcome(d.candidate)}
	if d.wouldDeny {
		c.Candidate = WouldDeny
	}
	svc := impact(a.services, d.serviceID, service, "")
	switch {
	case newlyWouldDeny:
		a.totals.NewlyWouldDeny++
		a.wouldDeny[d.identityID] = true
		svc.wouldDeny.add(d.identityID)
		c.Failures, c.ChecksOmitted = listFailures(d.failures)
		reporting(d.failures, func(cf posture.CheckFailure) {
			impact(a.checks, cf.PostureCheckID, cf.PostureCheckName, string(cf.PostureCheckType)).wouldDeny.add(d.identityID)
		})
	case d.recorded:
		a.totals.NewlyDenied++
		a.denied[d.identityID] = true
		svc.denied.add(d.identityID)
		c.Failures, c.ChecksOmitted = listFailures(d.failures)
		refusing(d.failures, func(cf posture.CheckFailure) {
			impact(a.checks, cf.PostureCheckID, cf.PostureCheckName, string(cf.PostureCheckType)).denied.add(d.identityID)
			v := failingValue(cf)
			key := cf.PostureCheckID + "\x00" + v
			acc, ok := a.values[key]
			if !ok {
				acc = &valueAcc{check: FailingValue{CheckID: cf.PostureCheckID, CheckName: cf.PostureCheckName,
					CheckType: string(cf.PostureCheckType), Value: v}}
				a.values[key] = acc
			}
			acc.tally.add(d.identityID)
		})
		a.lose(LostAccess{IdentityID: d.identityID, IdentityName: identity, At: d.at, Seq: d.seq,
			ServiceID: d.serviceID, ServiceName: service, How: "request denied"})
	default:
		a.totals.NewlyAllowed++
		a.allowed[d.identityID] = true
		svc.allowed.add(d.identityID)
		c.Failures, c.ChecksOmitted = listFailures(d.recordedFailures)
		refusing(d.recordedFailures, func(cf posture.CheckFailure) {
			impact(a.checks, cf.PostureCheckID, cf.PostureCheckName, string(cf.PostureCheckType)).allowed.add(d.identityID)
		})
	}
	a.change(c)
}

// reporting calls fn once for each report-only check failing in failures.
func reporting(failures []posture.PolicyFailure, fn func(posture.CheckFailure)) {
	seen := map[string]bool{}
	for _, f := range failures {
		for _, cf := range f.Checks {
			if cf.ReportOnly && !seen[cf.PostureCheckID] {
				seen[cf.PostureCheckID] = true
				fn(cf)
			}
		}
	}
}

// refusing calls fn once for each check that refuses a request in
// failures: a check failing in several policies counts once, and a
// report-only check refuses nothing (the request's failures still list it).
func refusing(failures []posture.PolicyFailure, fn func(posture.CheckFailure)) {
	seen := map[string]bool{}
	for _, f := range failures {
		for _, cf := range f.Checks {
			if !cf.ReportOnly && !seen[cf.PostureCheckID] {
				seen[cf.PostureCheckID] = true
				fn(cf)
			}
		}
	}
}

func outcome(granted bool) string {
	if granted {
		return Granted
	}
	return Denied
}

func (a *accumulator) sameTransition(posture.Transition) {
	a.totals.Transitions++
	a.totals.TransitionsUnchanged++
}

// refusedSessionTransition counts a recorded transition of a session the
// candidate refused.
func (a *accumulator) refusedSessionTransition(posture.Transition) {
	a.totals.Transitions++
	a.totals.TransitionsOfRefusedSessions++
}

// transition records a transition that only one side derived.
func (a *accumulator) transition(t posture.Transition, recorded bool, n names) {
	c := Change{Seq: t.Cause.Seq, EventID: t.Cause.EventID, At: t.At, Kind: t.Kind, IdentityID: t.IdentityID,
		IdentityName: n.identity(t.IdentityID), APISessionID: t.APISessionID, ServiceID: t.ServiceID, ServiceName: t.ServiceName,
		PolicyID: t.PolicyID, PolicyName: t.PolicyName, Checks: t.Checks, Recorded: NotHappened, Candidate: NotHappened}
	if len(c.Checks) > maxListedChecks {
		c.Checks, c.ChecksOmitted = c.Checks[:maxListedChecks], len(c.Checks)-maxListedChecks
	}
	if recorded {
		a.totals.Transitions++
		a.totals.TransitionsOnlyRecorded++
		c.Recorded = Happened
		if t.Kind == posture.TransitionSessionRemoved {
			a.totals.RemovalsOnlyRecorded++
		}
	} else {
		a.totals.TransitionsOnlyCandidate++
		c.Candidate = Happened
		if t.Kind == posture.TransitionSessionRemoved {
			a.totals.RemovalsOnlyCandidate++
			a.lose(LostAccess{IdentityID: t.IdentityID, IdentityName: c.IdentityName, At: t.At, Seq: t.Cause.Seq,
				ServiceID: t.ServiceID, ServiceName: t.ServiceName, How: "session removed"})
		}
	}
	a.change(c)
}

// failingValue names the value a check judged: "Windows 10.0.19044" for an
// OS check, the compact JSON of the value otherwise.
func failingValue(cf posture.CheckFailure) string {
	if cf.PostureCheckType == posture.CheckOS {
		var os struct{ Type, Version string }
		if json.Unmarshal(cf.ActualValue, &os) == nil && (os.Type != "" || os.Version != "") {
			return strings.TrimSpace(os.Type + " " + os.Version)
		}
	}
	if len(cf.ActualValue) == 0 || string(cf.ActualValue) == "null" {
		return "nothing reported"
	}
	var b bytes.Buffer
	if json.Compact(&b, cf.ActualValue) != nil {
		return string(cf.ActualValue)
	}
	return b.String()
}

func (r *run) report() *Report {
	a := r.acc
	rep := &Report{Totals: a.totals, Changes: a.changes, ChangesOmitted: a.omitted}
	rep.Window.Events = r.events
	if !r.opts.From.IsZero() {
		rep.Window.From = &r.opts.From
	}
	if !r.opts.Until.IsZero() {
		rep.Window.Until = &r.opts.Until
	}
	if !r.first.IsZero() {
		rep.Window.FirstEvent, rep.Window.LastEvent = &r.first, &r.last
	}
	rep.Totals.IdentitiesNewlyDenied, rep.Totals.IdentitiesNewlyAllowed = len(a.denied), len(a.allowed)
	rep.Totals.IdentitiesNewlyWouldDeny = len(a.wouldDeny)
	rep.Changed = len(a.changes) > 0 || a.omitted > 0
	rep.Enforcements = enforcements(r.opts.Changes)
	rep.Services = impacts(a.services)
	rep.Checks = impacts(a.checks)
	rep.LostAccess = make([]LostAccess, 0, len(a.lost))
	for _, l := range a.lost {
		rep.LostAccess = append(rep.LostAccess, l)
	}
	sort.Slice(rep.LostAccess, func(i, j int) bool {
		x, y := rep.LostAccess[i], rep.LostAccess[j]
		if !x.At.Equal(y.At) {
			return x.At.Before(y.At)
		}
		return x.IdentityID < y.IdentityID
	})
	rep.FailingValues = make([]FailingValue, 0, len(a.values))
	for _, v := range a.values {
		fv := v.check
		fv.Identities, fv.Requests = len(v.tally.identities), v.tally.requests
		rep.FailingValues = append(rep.FailingValues, fv)
	}
	sort.Slice(rep.FailingValues, func(i, j int) bool {
		x, y := rep.FailingValues[i], rep.FailingValues[j]
		if x.Identities != y.Identities {
			return x.Identities > y.Identities
		}
		if x.CheckName != y.CheckName {
			return x.CheckName < y.CheckName
		}
		return x.Value < y.Value
	})
	if rep.Changes == nil {
		rep.Changes = []Change{}
	}
	// Decisions are found as events are applied and transitions at the
	// end of a batch, whose bounds depend on the read: log order.
	sort.SliceStable(rep.Changes, func(i, j int) bool {
		x, y := rep.Changes[i], rep.Changes[j]
		if x.Seq != y.Seq {
			return x.Seq < y.Seq
		}
		return changeKey(x) < changeKey(y)
	})
	return rep
}

// enforcements lists the candidate's checks that only report, by name.
func enforcements(changes []posture.Payload) []Enforcement {
	out := []Enforcement{}
	add := func(c posture.Check) {
		if e := c.Enforcement; e != nil && e.Mode == posture.ReportMode {
			out = append(out, Enforcement{CheckID: c.ID, CheckName: c.Name, EnforceAt: e.EnforceAt})
		}
	}
	for _, p := range changes {
		switch v := p.(type) {
		case posture.Created[posture.Check]:
			add(v.Entity)
		case posture.Updated[posture.Check]:
			add(v.Entity)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CheckName < out[j].CheckName })
	return out
}

func impacts(m map[string]*impactAcc) []Impact {
	out := make([]Impact, 0, len(m))
	for _, i := range m {
		out = append(out, Impact{ID: i.id, Name: i.name, Type: i.typ,
			NewlyDeniedIdentities: len(i.denied.identities), NewlyDeniedRequests: i.denied.requests,
			NewlyAllowedIdentities: len(i.allowed.identities), NewlyAllowedRequests: i.allowed.requests,
			NewlyWouldDenyIdentities: len(i.wouldDeny.identities), NewlyWouldDenyRequests: i.wouldDeny.requests})
	}
	sort.Slice(out, func(i, j int) bool {
		x, y := out[i], out[j]
		if x.NewlyDeniedIdentities != y.NewlyDeniedIdentities {
			return x.NewlyDeniedIdentities > y.NewlyDeniedIdentities
		}
		if x.NewlyAllowedIdentities != y.NewlyAllowedIdentities {
			return x.NewlyAllowedIdentities > y.NewlyAllowedIdentities
		}
		if x.NewlyWouldDenyIdentities != y.NewlyWouldDenyIdentities {
			return x.NewlyWouldDenyIdentities > y.NewlyWouldDenyIdentities
		}
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		return x.ID < y.ID
	})
	return out
}

// WriteText prints the report for a person: the totals, the impact per
// service and per check, the most common failing values, who would lose
// access first, and the changes (at most limit of them; 0: all).
func (r *Report) WriteText(w io.Writer, limit int) error {
	const tf = "2006-01-02T15:04:05.000Z07:00"
	b := &strings.Builder{}
	t := r.Totals
	if !r.Changed {
		fmt.Fprintf(b, "No change: %s replayed, %s (%d granted, %d denied) and %s decided the same.\n",
			posture.Count(r.Window.Events, "event", "events"), posture.Count(t.Decisions, "session request", "session requests"), t.Granted, t.Denied,
			posture.Count(t.Transitions, "transition", "transitions"))
	} else {
		fmt.Fprintf(b, "Changed: %s replayed; of %s (%d granted, %d denied), %d would be newly denied (%s) and %d newly allowed (%s).\n",
			posture.Count(r.Window.Events, "event", "events"), posture.Count(t.Decisions, "session request", "session requests"), t.Granted, t.Denied,
			t.NewlyDenied, posture.Count(t.IdentitiesNewlyDenied, "identity", "identities"), t.NewlyAllowed, posture.Count(t.IdentitiesNewlyAllowed, "identity", "identities"))
		if t.NewlyWouldDeny > 0 {
			fmt.Fprintf(b, "%d granted only because failing checks report would be denied once those checks are enforced (%s).\n",
				t.NewlyWouldDeny, posture.Count(t.IdentitiesNewlyWouldDeny, "identity", "identities"))
		}
		fmt.Fprintf(b, "Transitions: %d recorded (%d unchanged, %d only recorded, %d of sessions the candidate refused), %d only with the candidate; sessions removed: %d no longer, %d more.\n",
			t.Transitions, t.TransitionsUnchanged, t.TransitionsOnlyRecorded, t.TransitionsOfRefusedSessions, t.TransitionsOnlyCandidate, t.RemovalsOnlyRecorded, t.RemovalsOnlyCandidate)
	}
	for _, e := range r.Enforcements {
		when := "when its mode changes"
		if e.EnforceAt != nil {
			when = "at " + e.EnforceAt.UTC().Format(tf)
		}
		fmt.Fprintf(b, "Check %s only reports: it refuses nothing in the window, and is enforced %s.\n", posture.Printable(e.CheckName), when)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table := func(title string, header string, rows [][]any) {
		if len(rows) == 0 {
			return
		}
		fmt.Fprintf(tw, "\n%s\n%s\n", title, header)
		for _, row := range rows {
			for i, v := range row {
				if i > 0 {
					fmt.Fprint(tw, "\t")
				}
				if s, ok := v.(string); ok {
					v = posture.Printable(s) // names and reported values
				}
				fmt.Fprint(tw, v)
			}
			fmt.Fprintln(tw)
		}
	}
	impactRows := func(list []Impact) [][]any {
		var rows [][]any
		for _, i := range list {
			rows = append(rows, []any{orDash(i.Name), i.ID, i.NewlyDeniedIdentities, i.NewlyDeniedRequests, i.NewlyAllowedIdentities, i.NewlyAllowedRequests,
				i.NewlyWouldDenyIdentities, i.NewlyWouldDenyRequests})
		}
		return rows
	}
	const counts = "\tDENIED IDENTITIES\tDENIED REQUESTS\tALLOWED IDENTITIES\tALLOWED REQUESTS\tWOULD-DENY IDENTITIES\tWOULD-DENY REQUESTS"
	table("Per service:", "SERVICE\tID"+counts, impactRows(r.Services))
	table("Per check:", "CHECK\tID"+counts, impactRows(r.Checks))
	var rows [][]any
	for _, v := range r.FailingValues {
		rows = append(rows, []any{v.CheckName, v.CheckType + " " + v.Value, v.Identities, v.Requests})
	}
	table("Most common failing values:", "CHECK\tVALUE\tIDENTITIES\tREQUESTS", rows)
	rows = nil
	for _, l := range r.LostAccess {
		rows = append(rows, []any{l.At.UTC().Format(tf), orDash(l.IdentityName), l.IdentityID, orDash(l.ServiceName), l.How, l.Seq})
	}
	table("First loss of access:", "TIME\tIDENTITY\tID\tSERVICE\tHOW\tSEQ", rows)
	rows = nil
	for i, c := range r.Changes {
		if limit > 0 && i == limit {
			break
		}
		what := c.ServiceName
		if c.PolicyName != "" {
			what = "policy " + c.PolicyName
		} else if what != "" {
			what = "service " + what
		}
		// The API session tells apart the rows of one identity's sessions.
		rows = append(rows, []any{c.At.UTC().Format(tf), c.Seq, c.Kind, orDash(c.IdentityName), orDash(c.APISessionID), orDash(what), c.Recorded, c.Candidate})
	}
	table("Changes:", "TIME\tSEQ\tKIND\tIDENTITY\tAPI SESSION\tWHAT\tRECORDED\tCANDIDATE", rows)
	if err := tw.Flush(); err != nil {
		return err
	}
	shown := len(r.Changes)
	if limit > 0 {
		shown = min(shown, limit)
	}
	if more := len(r.Changes) - shown + r.ChangesOmitted; more > 0 {
		_, err := fmt.Fprintf(w, "... and %s (--json lists them).\n", posture.Count(more, "more change", "more changes"))
		return err
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// changeKey orders the changes of one event: the decision first, then the
// transitions by kind and what they are about.
func changeKey(c Change) string {
	rank := "1"
	if c.Kind == "session-request" {
		rank = "0"
	}
	return strings.Join([]string{rank, c.Kind, c.IdentityID, c.APISessionID, c.PolicyID, c.ServiceID, c.Recorded}, "\x00")
}
