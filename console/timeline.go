package console

import (
	"encoding/json"
	"fmt"
	"html/template"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// Timeline is an identity's history drawn as lanes: one per posture fact
// (OS, processes, MAC and domain, MFA, wake and unlock), one per service
// policy (passing or failing over time) and one per service (sessions
// granted and requests denied). Each mark links to the event that caused
// it; a denial also links to explain at its moment.
type Timeline struct {
	From, To time.Time
	Width    int
	Height   int
	Lanes    []Lane
	Ticks    []Tick
}

// Lane is one row of the timeline.
type Lane struct {
	Label string
	// Short is the label as the label column shows it: cut with an
	// ellipsis when it is longer than tlLabelRunes (the page gives the
	// whole label as its title).
	Short string
	// Narrow is the label as a narrow screen's label column shows it, in
	// a larger font (tlNarrowRunes).
	Narrow   string
	Y        int
	Marks    []Mark
	Segments []Segment
}

// Mark is one event on a lane.
type Mark struct {
	X     int
	Class string // fact, granted, denied, ended
	At    time.Time
	Title string
	Href  string
	Seq   uint64
}

// Segment is a span of a policy's state.
type Segment struct {
	X, W  int
	Class string // passing, failing; grace, grace expired (after a wake or unlock)
	Title string
	Href  string
}

// Tick is a time label on the axis.
type Tick struct {
	X     int
	Label string
}

// Geometry of the SVG (user units; the SVG scales to the page's width).
const (
	tlWidth = 1000
	tlLabel = 180 // the label column
	// tlLabelRunes is the longest label the label column shows whole (at
	// 12px, a wide sans-serif's characters are up to about 7 units).
	tlLabelRunes = 23
	// tlNarrowRunes is the same for the label column a narrow screen
	// keeps in view, at 15px.
	tlNarrowRunes = 19
	tlLane        = 34
	tlTop         = 24
	tlMarkR       = 6
	tlMargin      = 10
)

// buildTimeline lays out the entries of the window [from, to] at now.
// A service's lane is named by serviceName (the service's name now, or
// the one its entries recorded when it is gone). graces are the identity's
// API sessions in a grace window at now, with the window's end
// (Store.Graces). Nothing is drawn past now: a policy's last state
// and a running grace end there. Its cost follows the entries: the page
// holds at most maxTimelineEntries of them.
func buildTimeline(identityID string, carried, history []posture.HistoryEntry, failed []posture.FailedServiceRequest, wouldDeny []posture.WouldDeny,
	graces map[string]time.Time, serviceName func(id, recorded string) string, from, to, now time.Time) Timeline {
	tl := Timeline{From: from, To: to, Width: tlWidth}
	span := to.Sub(from)
	x := func(t time.Time) int {
		if span <= 0 {
			return tlLabel
		}
		f := float64(t.Sub(from)) / float64(span)
		f = min(max(f, 0), 1)
		return tlLabel + int(f*float64(tlWidth-tlLabel-tlMargin))
	}
	lanes := map[string]*Lane{}
	var order []string
	lane := func(label string) *Lane {
		if l, ok := lanes[label]; ok {
			return l
		}
		lanes[label] = &Lane{Label: label}
		order = append(order, label)
		return lanes[label]
	}
	// The fact lanes come first, in a fixed order, even when empty.
	for _, l := range []string{"OS", "Processes", "MAC / domain", "MFA", "Wake / unlock"} {
		lane(l)
	}
	eventHref := func(seq uint64) string { return fmt.Sprintf("#event-%d", seq) }
	type policyState struct {
		at, since time.Time // since: of the change, before the window for a state carried into it
		state     string
		seq       uint64
	}
	policies := map[string][]policyState{}
	var policyOrder []string
	access := func(h posture.HistoryEntry, at time.Time) {
		var t struct {
			PolicyName string `json:"policyName"`
			To         string `json:"to"`
		}
		if json.Unmarshal(h.Detail, &t) == nil && t.PolicyName != "" {
			if _, ok := policies[t.PolicyName]; !ok {
				policyOrder = append(policyOrder, t.PolicyName)
			}
			policies[t.PolicyName] = append(policies[t.PolicyName], policyState{at, h.At, t.To, h.Seq})
		}
	}
	// carried are each policy's last change before the window: its state
	// at the window's start.
	for _, h := range carried {
		access(h, from)
	}
	for _, h := range history {
		m := Mark{X: x(h.At), Class: "fact", At: h.At, Title: stamp(h.At) + " " + h.Summary, Href: eventHref(h.Seq), Seq: h.Seq}
		switch h.Kind {
		case posture.HistoryPosture:
			switch {
			case strings.HasPrefix(h.Summary, "OS "):
				lane("OS").Marks = append(lane("OS").Marks, m)
			case strings.HasPrefix(h.Summary, "process "):
				lane("Processes").Marks = append(lane("Processes").Marks, m)
			default:
				lane("MAC / domain").Marks = append(lane("MAC / domain").Marks, m)
			}
		case posture.HistoryMFA, posture.HistoryDeadline:
			lane("MFA").Marks = append(lane("MFA").Marks, m)
		case posture.HistoryEndpoint:
			lane("Wake / unlock").Marks = append(lane("Wake / unlock").Marks, m)
		case posture.HistoryCredential:
			lane("Credentials").Marks = append(lane("Credentials").Marks, m)
		case posture.HistoryAccess:
			access(h, h.At)
		case posture.HistorySession:
			var d struct {
				ServiceID string `json:"serviceId"`
			}
			if json.Unmarshal(h.Detail, &d) == nil && d.ServiceID != "" {
				name := serviceName(d.ServiceID, serviceOf(h.Summary))
				m.Class = "granted"
				if strings.HasSuffix(h.Summary, "deleted by the client") || strings.Contains(h.Summary, " removed") {
					m.Class = "ended"
				}
				l := lane("Service " + name)
				l.Marks = append(l.Marks, m)
			}
		}
	}
	// Denials come from the failed requests (they name the service); each
	// links to its event (the session.denied entry at the same moment) and
	// to explain at that moment. Would-denies come from their ring too.
	sessionSeq := map[int64]uint64{} // a session entry's time: its event
	for _, h := range history {
		if h.Kind == posture.HistorySession || h.Kind == posture.HistoryWouldDeny {
			sessionSeq[h.At.UnixNano()] = h.Seq
		}
	}
	denial := func(class, serviceID, recorded, sessionType string, when time.Time, title string) {
		if when.Before(from) || when.After(to) {
			return
		}
		q := url.Values{"identity": {identityID}, "service": {serviceID}, "type": {sessionType}, "at": {when.UTC().Format(time.RFC3339Nano)}}
		name := serviceName(serviceID, recorded)
		l := lane("Service " + name)
		l.Marks = append(l.Marks, Mark{X: x(when), Class: class, At: when, Seq: sessionSeq[when.UnixNano()],
			Title: stamp(when) + " " + sessionType + " session for " + name + " " + title,
			Href:  "/console/explain?" + q.Encode()})
	}
	for _, f := range failed {
		denial("denied", f.ServiceID, f.ServiceName, f.SessionType, f.When, "denied")
	}
	for _, w := range wouldDeny {
		denial("would-deny", w.ServiceID, w.ServiceName, w.SessionType, w.When, "granted; report-only checks would deny it")
	}
	// Grace: from a wake or unlock to what ended it for that API session,
	// an MFA pass or a deadline reached. Read from the newest entry back,
	// each API session's next end is at hand. A wake or unlock with no end
	// yet, of an API session in a grace window now, is the running grace:
	// drawn to now, marked running (the first wake or unlock since the
	// session's last end starts it).
	next := map[string]posture.HistoryEntry{}
	started := map[string]posture.HistoryEntry{} // a running grace's first wake or unlock since its last end
	endpointLane := lane("Wake / unlock")
	for i := len(history) - 1; i >= 0; i-- {
		h := history[i]
		switch h.Kind {
		case posture.HistoryMFA, posture.HistoryDeadline:
			next[h.APISessionID] = h
			continue
		case posture.HistoryEndpoint:
		default:
			continue
		}
		e, ok := next[h.APISessionID]
		if !ok {
			if _, in := graces[h.APISessionID]; in {
				started[h.APISessionID] = h
			}
			continue
		}
		what := "until MFA passed at " + stamp(e.At)
		class := "grace"
		if e.Kind == posture.HistoryDeadline {
			what, class = "grace ended, "+e.Summary, "grace expired"
		}
		x0, x1 := x(h.At), x(e.At)
		endpointLane.Segments = append(endpointLane.Segments, Segment{X: x0, W: max(x1-x0, 2), Class: class, Href: eventHref(e.Seq),
			Title: stamp(h.At) + " " + h.Summary + ": " + what})
	}
	// A running grace runs to now (or the window's end). In a window that
	// reaches now, one whose wake or unlock is before the window (or not
	// among the entries shown) runs from the window's start, and links to
	// its API session; in an earlier window its start is not known.
	graceIDs := make([]string, 0, len(graces))
	for id := range graces {
		graceIDs = append(graceIDs, id)
	}
	sort.Strings(graceIDs)
	end := earliest(now, to)
	for _, id := range graceIDs {
		start, href, what := from, "#session-"+id, "API session "+id+" (its wake or unlock is before the window)"
		if h, ok := started[id]; ok {
			start, href, what = h.At, eventHref(h.Seq), stamp(h.At)+" "+h.Summary
		} else if _, ended := next[id]; ended || to.Before(now) {
			continue
		}
		if end.Before(from) || !end.After(start) {
			continue
		}
		x0, x1 := x(start), x(end)
		endpointLane.Segments = append(endpointLane.Segments, Segment{X: x0, W: max(x1-x0, 2), Class: "grace running", Href: href,
			Title: what + ": grace running, until " + stamp(graces[id]) + " unless MFA passes"})
	}
	for _, name := range policyOrder {
		l := lane("Policy " + name)
		states := policies[name]
		for i, s := range states {
			end := earliest(to, now)
			if i+1 < len(states) {
				end = states[i+1].at
			}
			if !end.After(s.at) && i+1 == len(states) {
				continue // a last state that starts after now (or the window's end)
			}
			class := "failing"
			switch s.state {
			case "passing":
				class = "passing"
			case "not applicable":
				continue
			}
			href := eventHref(s.seq)
			if s.since.Before(from) { // the change is on the timeline around it
				href = "?from=" + urlEscape(s.since.Add(-time.Hour).UTC().Format(time.RFC3339)) +
					"&to=" + urlEscape(s.since.Add(time.Hour).UTC().Format(time.RFC3339)) + href
			}
			x0, x1 := x(s.at), x(end)
			l.Segments = append(l.Segments, Segment{X: x0, W: max(x1-x0, 2), Class: class, Href: href,
				Title: stamp(s.since) + " policy " + name + " " + s.state})
		}
	}
	for i, label := range order {
		l := lanes[label]
		l.Y = tlTop + i*tlLane
		l.Short = shorten(label, tlLabelRunes)
		l.Narrow = shorten(label, tlNarrowRunes)
		// Denials are drawn last, on top of marks near them.
		sort.SliceStable(l.Marks, func(a, b int) bool {
			da, db := l.Marks[a].Class == "denied", l.Marks[b].Class == "denied"
			if da != db {
				return db
			}
			return l.Marks[a].At.Before(l.Marks[b].At)
		})
		tl.Lanes = append(tl.Lanes, *l)
	}
	tl.Height = tlTop + len(order)*tlLane + 8
	tl.Ticks = ticks(from, to, x)
	return tl
}

// tickSteps are the steps between an axis's labels, the first that gives
// at most five labels in the window being taken.
var tickSteps = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour,
	24 * time.Hour, 2 * 24 * time.Hour, 7 * 24 * time.Hour, 14 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// ticks labels the axis at round moments (UTC) within [from, to]: whole
// seconds, minutes, hours or days as the window allows, at most five.
func ticks(from, to time.Time, x func(time.Time) int) []Tick {
	span := to.Sub(from)
	step := tickSteps[len(tickSteps)-1]
	for _, s := range tickSteps {
		if span/s <= 4 {
			step = s
			break
		}
	}
	layout := "15:04"
	switch {
	case step < time.Second:
		layout = "15:04:05.000"
	case step < time.Minute:
		layout = "15:04:05"
	case span > 48*time.Hour:
		layout = "Jan 2 15:04"
	}
	var out []Tick
	// The first multiple of the step at or after from (counted from Go's
	// zero time, a UTC midnight).
	first := from.Truncate(step)
	if first.Before(from) {
		first = first.Add(step)
	}
	for t := first; !t.After(to) && len(out) < 6; t = t.Add(step) {
		out = append(out, Tick{X: x(t), Label: t.UTC().Format(layout)})
	}
	return out
}

// earliest is the earlier of two moments.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// shorten cuts s to at most n characters, the last an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return strings.TrimRight(string(r[:n-1]), " ") + "…"
}

// stamp is a moment as the timeline's titles show it (UTC, milliseconds).
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// serviceOf reads the service name of a session history summary ("Dial
// session <id> for service <name> ...").
func serviceOf(summary string) string {
	_, rest, ok := strings.Cut(summary, " for service ")
	if !ok {
		return "?"
	}
	name, _, _ := strings.Cut(rest, " ")
	return name
}

// age is how long ago a moment was, for people ("never" for zero).
func age(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

func joinComma(s []string) string { return strings.Join(s, ", ") }

// when is a moment as the console's tables show it: UTC to the
// millisecond, always as wide (stamp), in a <time> element that holds the
// whole moment (as its title too). The zero time is "—".
func when(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	full := template.HTMLEscapeString(t.UTC().Format(time.RFC3339Nano))
	return template.HTML(`<time datetime="` + full + `" title="` + full + `">` + stamp(t) + `</time>`)
}

var funcs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return stamp(t)
	},
	"timep": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return stamp(*t)
	},
	"when": when,
	"whenp": func(t *time.Time) template.HTML {
		if t == nil {
			return "—"
		}
		return when(*t)
	},
	"rfc3339nano": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"deref":       func(t *time.Time) time.Time { return *t },
	"raw":         func(m json.RawMessage) string { return string(m) },
	"join":        joinComma,
	"add":         func(a, b int) int { return a + b },
	"jsonv": func(v any) string {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // html/template escapes the text
		_ = enc.Encode(v)
		return strings.TrimSpace(b.String())
	},
}
