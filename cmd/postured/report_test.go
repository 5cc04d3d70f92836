package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog/natstest"
	"github.com/seed-0809debe/posture/projections"
)

// reportQuery is a posture query as a client reads it, with the fields of
// report-only checks.
type reportQuery struct {
	ID          string `json:"id"`
	IsPassing   bool   `json:"isPassing"`
	Enforcement string `json:"enforcement"`
	Message     string `json:"message"`
	EnforceAt   string `json:"enforceAt"`
}

// reportQueries reads GET /services: per service id, whether its policy
// passes and its queries by check id.
func (n *testNode) reportQueries(t testing.TB, tok string) map[string]struct {
	Passing bool
	Queries map[string]reportQuery
} {
	t.Helper()
	var services []struct {
		ID             string `json:"id"`
		PostureQueries []struct {
			IsPassing      bool          `json:"isPassing"`
			PostureQueries []reportQuery `json:"postureQueries"`
		} `json:"postureQueries"`
	}
	n.getJSON(t, clientAPI+"/services?limit=500", tok, &services)
	out := map[string]struct {
		Passing bool
		Queries map[string]reportQuery
	}{}
	for _, s := range services {
		v := out[s.ID]
		v.Queries = map[string]reportQuery{}
		for _, set := range s.PostureQueries {
			v.Passing = v.Passing || set.IsPassing
			for _, q := range set.PostureQueries {
				v.Queries[q.ID] = q
			}
		}
		out[s.ID] = v
	}
	return out
}

// TestReportOnlyChecks: a report-only OS check and a report-only MFA check,
// both with the same enforceAt, on two nodes sharing one fake clock. An
// identity with an old Windows and no MFA gets its sessions (each a
// would-deny, with actual and expected values, in the history, the
// transitions stream and the metric), sees its queries fail with the
// message while its services stay dialable; the impact lists it as losing
// both services. At enforceAt both nodes' timers append each switch once,
// the same sessions are removed on both nodes, a compliant identity keeps
// its own, and a replay of the log reproduces the projection.
func TestReportOnlyChecks(t *testing.T) {
	nc, pkiDir := natstest.Start(t, 3), t.TempDir()
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	onClock := func(c *serveCmd) { c.clock = clk }
	a, b := startClusterNode(t, nc, pkiDir, "node-a", onClock), startClusterNode(t, nc, pkiDir, "node-b", onClock)
	admin := a.adminToken(t)
	enforceAt := clk.Now().Add(time.Minute)
	at := enforceAt.Format(time.RFC3339)

	// Validation, in the envelope.
	osList := []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.19041"}}}
	for _, bad := range []struct {
		enforcement any
		field       string
	}{
		{map[string]any{"mode": "audit"}, "enforcement.mode"},
		{map[string]any{"enforceAt": at}, "enforcement.mode"},
		{map[string]any{"mode": "report", "enforceAt": "tomorrow"}, "enforcement.enforceAt"},
		{map[string]any{"mode": "report", "enforceAt": clk.Now().Add(-time.Second).Format(time.RFC3339)}, "enforcement.enforceAt"},
		{map[string]any{"mode": "report", "message": strings.Repeat("é", posture.MaxEnforcementMessage+1)}, "enforcement.message"},
		{map[string]any{"mode": "report", "message": "line\x00break"}, "enforcement.message"},
		{map[string]any{"mode": "report", "message": "install fix\u202eexe.pdf"}, "enforcement.message"},
		{map[string]any{"mode": "report", "enforceAt": "9999-12-31T23:59:59Z"}, "enforcement.enforceAt"},
		{map[string]any{"mode": "enforce", "enforceAt": clk.Now().Add(time.Hour).Format(time.RFC3339)}, "enforcement.enforceAt"},
	} {
		r := a.do(t, http.MethodPost, mgmt+"/posture-checks", admin, map[string]any{"typeId": "OS", "name": "bad", "operatingSystems": osList, "enforcement": bad.enforcement})
		_, e := r.envelope(t)
		if r.Status != http.StatusBadRequest || e.Code != posture.CodeCouldNotValidate || !bytes.Contains(r.Body, []byte(bad.field)) {
			t.Errorf("enforcement %v: %d %s, want 400 naming %s", bad.enforcement, r.Status, r.Body, bad.field)
		}
	}

	message := "Update Windows to 20H1 or later before " + at
	osCheck := a.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "windows-20h1", "operatingSystems": osList,
		"enforcement": map[string]any{"mode": "report", "enforceAt": at, "message": message}})
	mfa := a.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa",
		"enforcement": map[string]any{"mode": "report", "enforceAt": at}})
	enforced := a.create(t, admin, "posture-checks", map[string]any{"typeId": "MAC", "name": "nic", "macAddresses": []string{"aa:bb:cc:dd:ee:ff"}})
	if d := a.detail(t, admin, "posture-checks", enforced); d["enforcement"] != nil {
		t.Fatalf("a check without enforcement shows one: %v", d["enforcement"])
	}
	d := a.detail(t, admin, "posture-checks", osCheck)
	if e, _ := d["enforcement"].(map[string]any); e["mode"] != "report" || e["message"] != message ||
		e["enforceAt"] != enforceAt.Format(api.TimeFormat) {
		t.Fatalf("check enforcement: %v", d["enforcement"])
	}
	// A PATCH of another field keeps it; a PUT of what was read is valid.
	if r := a.do(t, http.MethodPatch, mgmt+"/posture-checks/"+mfa, admin, map[string]any{"tags": map[string]any{"team": "it"}}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if e, _ := a.detail(t, admin, "posture-checks", mfa)["enforcement"].(map[string]any); e["mode"] != "report" {
		t.Fatalf("enforcement after a patch of tags: %v", e)
	}

	crm := a.create(t, admin, "services", map[string]any{"name": "crm"})
	vault := a.create(t, admin, "services", map[string]any{"name": "vault"})
	a.create(t, admin, "service-policies", map[string]any{"name": "crm-os", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + osCheck}})
	a.create(t, admin, "service-policies", map[string]any{"name": "vault-mfa", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + vault}, "postureCheckRoles": []string{"@" + mfa}})

	old, current := a.endpoint(t, admin, "old-laptop", "laptops"), a.endpoint(t, admin, "new-laptop", "laptops")
	for ep, version := range map[endpoint]string{old: "10.0.17763", current: "10.0.19045"} {
		if r := a.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Windows", "version": version}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	if _, err := a.writer.AppendContext(t.Context(), api.Stamp{Actor: current.id}, posture.MFAPassed{IdentityID: current.id, APISessionID: current.apiSessionID}); err != nil {
		t.Fatal(err)
	}

	// The client sees the verdicts and the message; the services stay dialable.
	q := a.reportQueries(t, old.token)
	if !q[crm].Passing || !q[vault].Passing {
		t.Fatalf("a service whose only failing checks report is not passing: %+v", q)
	}
	if got := q[crm].Queries[osCheck]; got.IsPassing || got.Enforcement != "report" || got.Message != message || got.EnforceAt == "" {
		t.Fatalf("OS query: %+v", got)
	}
	if got := a.reportQueries(t, current.token)[crm].Queries[osCheck]; !got.IsPassing || got.Enforcement != "report" {
		t.Fatalf("OS query of the compliant identity: %+v", got)
	}
	for _, ep := range []endpoint{old, current} {
		for _, svc := range []string{crm, vault} {
			if r := a.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
				t.Fatalf("session while the checks report: %d %s", r.Status, r.Body)
			}
		}
	}
	if err := b.store.WaitFor(t.Context(), a.lastSeq(t)); err != nil {
		t.Fatal(err)
	}

	// Would-denies, on the other node: one per request, with the values.
	var wd []struct {
		ServiceID      string `json:"serviceId"`
		PolicyFailures []struct {
			Checks []struct {
				PostureCheckID string          `json:"postureCheckId"`
				ActualValue    json.RawMessage `json:"actualValue"`
				ExpectedValue  json.RawMessage `json:"expectedValue"`
				ReportOnly     bool            `json:"reportOnly"`
			} `json:"checks"`
		} `json:"policyFailures"`
	}
	b.getJSON(t, mgmt+"/identities/"+old.id+"/would-deny", admin, &wd)
	if len(wd) != 2 || wd[0].ServiceID != crm || wd[1].ServiceID != vault {
		t.Fatalf("would-denies: %+v", wd)
	}
	osFail := wd[0].PolicyFailures[0].Checks[0]
	if osFail.PostureCheckID != osCheck || !osFail.ReportOnly || !bytes.Contains(osFail.ActualValue, []byte("10.0.17763")) ||
		!bytes.Contains(osFail.ExpectedValue, []byte("10.0.19041")) {
		t.Fatalf("OS would-deny: %+v", osFail)
	}
	if mfaFail := wd[1].PolicyFailures[0].Checks[0]; mfaFail.PostureCheckID != mfa || !bytes.Contains(mfaFail.ActualValue, []byte(`"passedMfa":false`)) {
		t.Fatalf("MFA would-deny: %+v", mfaFail)
	}
	b.getJSON(t, mgmt+"/identities/"+current.id+"/would-deny", admin, &wd)
	if len(wd) != 0 {
		t.Fatalf("would-denies of the compliant identity: %+v", wd)
	}
	if r := b.do(t, http.MethodGet, mgmt+"/identities/nobody/would-deny", admin, nil); r.Status != http.StatusNotFound {
		t.Fatalf("would-deny of an unknown identity: %d %s", r.Status, r.Body)
	}
	var history []posture.HistoryEntry
	b.getJSON(t, mgmt+"/identities/"+old.id+"/posture-history", admin, &history)
	n := 0
	for _, h := range history {
		if h.Kind == posture.HistoryWouldDeny {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d would-deny entries in the history, want 2: %+v", n, history)
	}
	if got := metricValue(t, scrape(t, a.testNode), `postured_would_deny_total{check_id="`+osCheck+`"}`); got != 1 {
		t.Fatalf("would-deny metric of the OS check: %v", got)
	}

	// The impact: the old laptop fails both and would lose both services.
	var impact struct {
		FailingCount      int64  `json:"failingCount"`
		LosingAccessCount int    `json:"losingAccessCount"`
		EnforceAt         string `json:"enforceAt"`
		Identities        []struct {
			IdentityID      string `json:"identityId"`
			IdentityName    string `json:"identityName"`
			LosesAccess     bool   `json:"losesAccess"`
			SessionsRemoved int    `json:"sessionsRemoved"`
			Loses           []struct {
				ServiceName string `json:"serviceName"`
			} `json:"loses"`
		} `json:"identities"`
	}
	b.getJSON(t, mgmt+"/posture-checks/"+osCheck+"/impact", admin, &impact)
	if impact.FailingCount != 1 || impact.LosingAccessCount != 1 || len(impact.Identities) != 1 || impact.Identities[0].IdentityName != "old-laptop" ||
		!impact.Identities[0].LosesAccess || impact.Identities[0].SessionsRemoved != 1 || len(impact.Identities[0].Loses) != 1 ||
		impact.Identities[0].Loses[0].ServiceName != "crm" {
		t.Fatalf("impact: %+v", impact)
	}
	for path, want := range map[string]int{"/posture-checks/" + enforced + "/impact": http.StatusBadRequest, "/posture-checks/nope/impact": http.StatusNotFound} {
		if r := b.do(t, http.MethodGet, mgmt+path, admin, nil); r.Status != want {
			t.Fatalf("GET %s: %d %s, want %d", path, r.Status, r.Body, want)
		}
	}
	var summary struct {
		Checks []struct {
			ID                string `json:"id"`
			ReportOnlyFailing int64  `json:"reportOnlyFailing"`
			Pass              int64  `json:"pass"`
		} `json:"checks"`
	}
	b.getJSON(t, mgmt+"/posture-summary", admin, &summary)
	for _, c := range summary.Checks {
		if (c.ID == osCheck || c.ID == mfa) && (c.ReportOnlyFailing != 1 || c.Pass != 1) {
			t.Fatalf("summary of %s: %+v", c.ID, c)
		}
	}

	// enforceAt: both timers tick; each switch is one event, at enforceAt.
	start := a.lastSeq(t)
	clk.Advance(enforceAt.Sub(clk.Now()))
	for _, n := range []*clusterNode{a, b} {
		if _, err := n.deadlines.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	last := a.lastSeq(t)
	if err := b.store.WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	if err := a.store.WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	switched := map[string]int{}
	if err := b.elog.Read(t.Context(), start+1, 0, func(batch []posture.Event) error {
		for _, e := range batch {
			if e.Type != posture.TypeCheckEnforced {
				continue
			}
			p, err := e.Decode()
			if err != nil {
				return err
			}
			switched[p.(posture.CheckEnforced).CheckID]++
			if !e.At.Equal(enforceAt) {
				t.Errorf("check.enforced at %s, want %s", e.At, enforceAt)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{osCheck: 1, mfa: 1}, switched); diff != "" {
		t.Fatalf("check.enforced events (-want +got):\n%s", diff)
	}
	for _, n := range []*clusterNode{a, b} {
		if ids := n.sessionIDs(t, old.token); len(ids) != 0 {
			t.Fatalf("the old laptop's sessions outlived enforceAt: %v", ids)
		}
		if ids := n.sessionIDs(t, current.token); len(ids) != 2 {
			t.Fatalf("the compliant laptop's sessions: %v", ids)
		}
	}
	if r := b.do(t, http.MethodPost, clientAPI+"/sessions", old.token, map[string]any{"serviceId": crm}); r.Status != http.StatusConflict {
		t.Fatalf("session once enforced: %d %s", r.Status, r.Body)
	}
	if e, _ := b.detail(t, admin, "posture-checks", osCheck)["enforcement"].(map[string]any); e["mode"] != "enforce" {
		t.Fatalf("enforcement after enforceAt: %v", e)
	}
	if r := b.do(t, http.MethodGet, mgmt+"/posture-checks/"+osCheck+"/impact", admin, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("impact of an enforced check: %d %s", r.Status, r.Body)
	}
	// A switched check does not go back to reporting with its past
	// enforceAt; with none (report until changed) it may.
	if r := b.do(t, http.MethodPatch, mgmt+"/posture-checks/"+osCheck, admin, map[string]any{"enforcement": map[string]any{"mode": "report", "enforceAt": at}}); r.Status != http.StatusBadRequest {
		t.Fatalf("back to report with the past enforceAt: %d %s", r.Status, r.Body)
	}

	// The transitions: two would-denies, and per check a failing policy
	// and a removed session, each once.
	kinds := map[string]int{}
	for _, tr := range waitTransitions(t, 6, old.id, a.testNode, b.testNode) {
		kinds[tr.Kind]++
	}
	want := map[string]int{posture.TransitionWouldDeny: 2, posture.TransitionPolicyFailing: 2, posture.TransitionSessionRemoved: 2}
	if diff := cmp.Diff(want, kinds); diff != "" {
		t.Fatalf("transitions of the old laptop (-want +got):\n%s", diff)
	}

	// Both nodes agree, and a replay from scratch reproduces them.
	live := a.dumpCaughtUp(t)
	if diff := cmp.Diff(live, b.dumpCaughtUp(t)); diff != "" {
		t.Fatalf("the projections of A and B differ (-A +B):\n%s", diff)
	}
	replayed, err := projections.Open(projections.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer replayed.Close()
	if err := b.elog.Read(t.Context(), 1, 0, func(batch []posture.Event) error { return replayed.Apply(batch) }); err != nil {
		t.Fatal(err)
	}
	var dump bytes.Buffer
	if err := replayed.Dump(&dump); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, dump.String()); diff != "" {
		t.Fatalf("replay differs (-live +replayed):\n%s", diff)
	}
}
