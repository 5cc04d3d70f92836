package console

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

func TestTimelineLanesAndMarks(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	detail := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	history := []posture.HistoryEntry{
		{Seq: 1, At: at(0), Kind: posture.HistoryAccess, Event: "apisession.created", Summary: "policy p: not applicable -> failing",
			Detail: detail(map[string]string{"policyName": "p", "from": "not applicable", "to": "failing"})},
		{Seq: 2, At: at(10), Kind: posture.HistoryPosture, Event: "posture.recorded", Summary: "OS Windows 6.1"},
		{Seq: 3, At: at(20), Kind: posture.HistorySession, Event: "session.denied", Summary: "Dial session for service crm denied"},
		{Seq: 4, At: at(30), Kind: posture.HistoryEndpoint, Event: "posture.recorded", APISessionID: "a1", Summary: "endpoint woken"},
		{Seq: 7, At: at(35), Kind: posture.HistoryMFA, Event: "mfa.passed", APISessionID: "a2", Summary: "MFA passed"},
		{Seq: 8, At: at(38), Kind: posture.HistoryDeadline, Event: "deadline.reached", APISessionID: "a1", Summary: "deadline reached"},
		{Seq: 5, At: at(40), Kind: posture.HistoryAccess, Event: "posture.recorded", Summary: "policy p: failing -> passing",
			Detail: detail(map[string]string{"policyName": "p", "from": "failing", "to": "passing"})},
		{Seq: 6, At: at(50), Kind: posture.HistorySession, Event: "session.created", Summary: "Dial session s1 for service crm eu created by policies p",
			Detail: detail(map[string]string{"sessionId": "s1", "serviceId": "svc", "type": "Dial"})},
		{Seq: 9, At: at(60), Kind: posture.HistoryWouldDeny, Event: "session.created", Summary: "Dial session for service crm eu would be denied when enforced: report-only checks failing os"},
	}
	failed := []posture.FailedServiceRequest{{ServiceID: "svc", ServiceName: "crm eu", SessionType: "Dial", When: at(20)}}
	wouldDeny := []posture.WouldDeny{{ServiceID: "svc", ServiceName: "crm eu", SessionType: "Dial", When: at(60)}}
	// The service is named as it is now; a service that is gone, as its
	// entries recorded it.
	names := func(id, recorded string) string {
		if id == "svc" {
			return "crm eu"
		}
		return recorded
	}
	tl := buildTimeline("id1", nil, history, failed, wouldDeny, nil, names, at(0), at(100), at(200))

	lanes := map[string]Lane{}
	var labels []string
	for _, l := range tl.Lanes {
		lanes[l.Label] = l
		labels = append(labels, l.Label)
	}
	want := "OS,Processes,MAC / domain,MFA,Wake / unlock,Service crm eu,Policy p"
	if got := strings.Join(labels, ","); got != want {
		t.Fatalf("lanes %s, want %s", got, want)
	}
	x := func(s int) int { return tlLabel + s*(tlWidth-tlLabel-tlMargin)/100 }
	svc := lanes["Service crm eu"].Marks
	if len(svc) != 3 || svc[0].Class != "granted" || svc[1].Class != "would-deny" || svc[2].Class != "denied" {
		t.Fatalf("service marks (denials last): %+v", svc)
	}
	if w := svc[1]; w.X != x(60) || w.Seq != 9 || !strings.Contains(w.Href, "/console/explain?") {
		t.Fatalf("would-deny mark: %+v", w)
	}
	d := svc[2]
	if d.X != x(20) || d.Seq != 3 || !strings.Contains(d.Href, "/console/explain?") || !strings.Contains(d.Href, "at=2026-11-23T10%3A00%3A20Z") || !strings.Contains(d.Href, "service=svc") {
		t.Fatalf("denial mark: %+v (x want %d)", d, x(20))
	}
	if m := lanes["OS"].Marks; len(m) != 1 || m[0].X != x(10) || m[0].Href != "#event-2" {
		t.Fatalf("OS marks: %+v", m)
	}
	if m := lanes["Wake / unlock"].Marks; len(m) != 1 || m[0].Href != "#event-4" {
		t.Fatalf("wake marks: %+v", m)
	}
	// The wake's grace runs to its own session's deadline, not to another
	// session's MFA pass.
	if g := lanes["Wake / unlock"].Segments; len(g) != 1 || g[0].Class != "grace expired" || g[0].X != x(30) || g[0].W != x(38)-x(30) || g[0].Href != "#event-8" {
		t.Fatalf("grace segments: %+v", g)
	}
	segs := lanes["Policy p"].Segments
	if len(segs) != 2 || segs[0].Class != "failing" || segs[0].X != x(0) || segs[0].W != x(40)-x(0) ||
		segs[1].Class != "passing" || segs[1].X != x(40) || segs[1].X+segs[1].W != x(100) || segs[1].Href != "#event-5" {
		t.Fatalf("policy segments: %+v", segs)
	}

	// A window that ends before the denial leaves it out.
	tl = buildTimeline("id1", nil, history[:2], failed, wouldDeny, nil, names, at(0), at(15), at(200))
	for _, l := range tl.Lanes {
		for _, m := range l.Marks {
			if m.Class == "denied" {
				t.Fatalf("denial outside the window: %+v", m)
			}
		}
	}

	// A window after the policy's changes starts with the state they left:
	// failing carried in until it passes in the window, passing carried
	// in through a window without a change (linked to the timeline around
	// the change).
	segs = policySegments(buildTimeline("id1", history[:1], history[1:7], failed, wouldDeny, nil, names, at(5), at(45), at(200)), "p")
	if len(segs) != 2 || segs[0].Class != "failing" || segs[0].X != tlLabel || !strings.HasPrefix(segs[0].Href, "?from=") ||
		!strings.HasSuffix(segs[0].Href, "#event-1") || !strings.Contains(segs[0].Title, stamp(at(0))) || segs[1].Class != "passing" {
		t.Fatalf("policy segments with a carried state: %+v", segs)
	}
	segs = policySegments(buildTimeline("id1", history[6:7], history[7:8], failed, wouldDeny, nil, names, at(45), at(55), at(200)), "p")
	if len(segs) != 1 || segs[0].Class != "passing" || segs[0].X != tlLabel || segs[0].X+segs[0].W != tlWidth-tlMargin {
		t.Fatalf("a policy passing through the window: %+v", segs)
	}
}

// policySegments are the segments of a policy's lane (none without one).
func policySegments(tl Timeline, policy string) []Segment {
	for _, l := range tl.Lanes {
		if l.Label == "Policy "+policy {
			return l.Segments
		}
	}
	return nil
}

// TestTimelineRunningGrace: a grace window running at now (the API
// session is in the grace index, and no MFA pass or deadline ended it) is
// drawn from its wake to now, marked running, and a policy's last state
// ends at now, not at a window's end in the future. A grace whose wake is
// before the window runs from the window's start.
func TestTimelineRunningGrace(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	detail := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	history := []posture.HistoryEntry{
		{Seq: 1, At: at(0), Kind: posture.HistoryAccess, Event: "apisession.created", Summary: "policy p: not applicable -> passing",
			Detail: detail(map[string]string{"policyName": "p", "from": "not applicable", "to": "passing"})},
		{Seq: 2, At: at(10), Kind: posture.HistoryEndpoint, Event: "posture.recorded", APISessionID: "a1", Summary: "endpoint woken"},
		{Seq: 3, At: at(20), Kind: posture.HistoryMFA, Event: "mfa.passed", APISessionID: "a1", Summary: "MFA passed"},
		{Seq: 4, At: at(30), Kind: posture.HistoryEndpoint, Event: "posture.recorded", APISessionID: "a1", Summary: "endpoint unlocked"},
		{Seq: 5, At: at(40), Kind: posture.HistoryEndpoint, Event: "posture.recorded", APISessionID: "a1", Summary: "endpoint woken"},
		{Seq: 6, At: at(45), Kind: posture.HistoryEndpoint, Event: "posture.recorded", APISessionID: "a3", Summary: "endpoint woken"},
	}
	names := func(id, recorded string) string { return recorded }
	x := func(s int) int { return tlLabel + s*(tlWidth-tlLabel-tlMargin)/100 }
	graces := map[string]time.Time{"a1": at(330), "a2": at(290)}
	// The window runs to 100 s; now is 60 s.
	tl := buildTimeline("id1", nil, history, nil, nil, graces, names, at(0), at(100), at(60))
	lanes := map[string]Lane{}
	for _, l := range tl.Lanes {
		lanes[l.Label] = l
	}
	segs := lanes["Wake / unlock"].Segments
	byClass := map[string][]Segment{}
	for _, g := range segs {
		byClass[g.Class] = append(byClass[g.Class], g)
	}
	if g := byClass["grace"]; len(g) != 1 || g[0].X != x(10) || g[0].W != x(20)-x(10) {
		t.Fatalf("the ended grace: %+v", segs)
	}
	run := byClass["grace running"]
	if len(run) != 2 {
		t.Fatalf("running graces (a1 from its unlock, a2 from the window's start; a3 is in none): %+v", segs)
	}
	if g := run[0]; g.X != x(30) || g.W != x(60)-x(30) || g.Href != "#event-4" || !strings.Contains(g.Title, "grace running, until 2026-11-23T10:05:30.000Z") {
		t.Errorf("a1's running grace: %+v", g)
	}
	if g := run[1]; g.X != x(0) || g.W != x(60)-x(0) || g.Href != "#session-a2" || !strings.Contains(g.Title, "before the window") {
		t.Errorf("a2's running grace: %+v", g)
	}
	if p := lanes["Policy p"].Segments; len(p) != 1 || p[0].Class != "passing" || p[0].X != x(0) || p[0].X+p[0].W != x(60) {
		t.Fatalf("the policy passes to now, not to the window's end: %+v", p)
	}

	// A window that ends before now: the grace runs to its end; one whose
	// start is not in the window is not drawn (it may start after it).
	tl = buildTimeline("id1", nil, history, nil, nil, graces, names, at(0), at(50), at(60))
	for _, l := range tl.Lanes {
		if l.Label != "Wake / unlock" {
			continue
		}
		var run []Segment
		for _, g := range l.Segments {
			if g.Class == "grace running" {
				run = append(run, g)
			}
		}
		if len(run) != 1 || run[0].X != x(30*2) || run[0].X+run[0].W != x(100) {
			t.Fatalf("running graces in an earlier window: %+v", run)
		}
	}
}

// TestTimelineLongLabels: a lane label longer than the label column is cut
// with an ellipsis; the lane keeps the whole label for its title.
func TestTimelineLongLabels(t *testing.T) {
	at := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	long := "wiki-with-a-rather-long-service-name-for-layout"
	history := []posture.HistoryEntry{{Seq: 1, At: at, Kind: posture.HistorySession, Event: "session.created",
		Summary: "Dial session s1 for service " + long + " created by policies p", Detail: json.RawMessage(`{"serviceId":"svc"}`)}}
	names := func(id, recorded string) string { return recorded }
	tl := buildTimeline("id1", nil, history, nil, nil, nil, names, at.Add(-time.Second), at.Add(time.Second), at.Add(time.Hour))
	l := tl.Lanes[len(tl.Lanes)-1]
	if l.Label != "Service "+long || l.Short != "Service wiki-with-a-ra…" || len([]rune(l.Short)) != tlLabelRunes {
		t.Fatalf("long lane: label %q, short %q", l.Label, l.Short)
	}
	if os := tl.Lanes[0]; os.Short != "OS" {
		t.Fatalf("short lane: %+v", os)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/console/identities/x":                     "/console/identities/x",
		"":                                          "/console/fleet",
		"https://evil.example/":                     "/console/fleet",
		"//evil.example/":                           "/console/fleet",
		"/console/\\evil":                           "/console/fleet",
		"/console/../\t/evil.example/x":             "/console/fleet",
		"/console/a\x00b":                           "/console/fleet",
		"/console/a\u0085b":                         "/console/fleet",
		"/edge/management/v1/x":                     "/console/fleet",
		"/console/../../evil":                       "/console/fleet",
		"/console/a/../identities/x":                "/console/identities/x",
		"/console/explain?identity=a b&service=s#x": "/console/explain?identity=a+b&service=s#x",
		`/console/fleet"><script>alert(1)</script>`: "/console/fleet%22%3E%3Cscript%3Ealert%281%29%3C/script%3E",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTicks: the axis is labelled at round moments within the window.
func TestTicks(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := func(time.Time) int { return 0 }
	for _, c := range []struct {
		from, to string
		want     []string
	}{
		// Whole seconds shown as typed: to is the end of its second.
		{"2026-11-29T08:49:00Z", "2026-11-29T08:49:05.999999999Z", []string{"08:49:00", "08:49:02", "08:49:04"}},
		{"2026-11-29T08:49:02.5Z", "2026-11-29T08:49:02.6Z", []string{"08:49:02.500", "08:49:02.550", "08:49:02.600"}},
		{"2026-11-28T10:32:17Z", "2026-11-29T10:32:17Z", []string{"12:00", "18:00", "00:00", "06:00"}},
		{"2026-11-26T10:32:17Z", "2026-11-29T10:32:17Z", []string{"Nov 27 00:00", "Nov 28 00:00", "Nov 29 00:00"}},
	} {
		var got []string
		for _, tk := range ticks(at(c.from), at(c.to), x) {
			got = append(got, tk.Label)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s to %s: %q, want %q", c.from, c.to, got, c.want)
		}
	}
}
