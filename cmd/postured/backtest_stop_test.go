package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections/backtest"
)

// heavyCandidate is a candidate whose every decision is costly: policies
// of the services serviceRoles select for #laptops that each require every
// one of many process checks of many processes.
func heavyCandidate(serviceRoles string, checks, processes, policies int) map[string]any {
	var cs, ps []any
	for i := range checks {
		var procs []any
		for j := range processes {
			procs = append(procs, map[string]any{"osType": "Linux", "path": fmt.Sprintf("/opt/p%d/%d", i, j)})
		}
		cs = append(cs, map[string]any{"typeId": "PROCESS_MULTI", "name": fmt.Sprintf("heavy-%d", i), "semantic": "AllOf",
			"roleAttributes": []string{"heavy"}, "processes": procs})
	}
	for i := range policies {
		ps = append(ps, map[string]any{"name": fmt.Sprintf("heavy-%d", i), "type": "Dial", "semantic": "AllOf",
			"identityRoles": []string{"#laptops"}, "serviceRoles": []string{serviceRoles}, "postureCheckRoles": []string{"#heavy"}})
	}
	return map[string]any{"postureChecks": map[string]any{"create": cs}, "servicePolicies": map[string]any{"create": ps}}
}

// startJob starts a backtest over the API: 202, with the job and its
// address.
func startJob(t *testing.T, n *testNode, admin string, candidate any) backtest.JobView {
	t.Helper()
	r := n.do(t, http.MethodPost, mgmt+"/backtests", admin, candidate)
	if r.Status != http.StatusAccepted {
		t.Fatalf("start: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var job backtest.JobView
	if err := json.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	if job.ID == "" || r.Header.Get("Location") != "./backtests/"+job.ID {
		t.Fatalf("start: %s, Location %q", data, r.Header.Get("Location"))
	}
	return job
}

// TestBacktestStop: DELETE /backtests/{id} stops a running backtest and
// forgets it, and the node's backtest slot is free again at its answer; a
// finished job is forgotten the same way.
func TestBacktestStop(t *testing.T) {
	var nodeLog lockedBuffer
	n := startTestNodeLog(t, defaultTestConfig(t.TempDir()), slog.New(slog.NewTextHandler(&nodeLog, nil)))
	admin := n.adminToken(t)
	// Twenty recorded decisions, each decided again by the candidate.
	var services []string
	for i := range 20 {
		services = append(services, n.create(t, admin, "services", map[string]any{"name": fmt.Sprintf("crm-%d", i), "roleAttributes": []string{"crm"}}))
	}
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"#crm"}})
	ep := n.endpoint(t, admin, "alice", "laptops")
	for _, svc := range services {
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
			t.Fatalf("session: %d %s", r.Status, r.Body)
		}
	}
	heavy := startJob(t, n, admin, heavyCandidate("#crm", 40, 100, 200))
	if r := n.do(t, http.MethodGet, mgmt+"/backtests/"+heavy.ID, admin, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"running"`) {
		t.Fatalf("the heavy job before its stop: %d %s", r.Status, r.Body)
	}
	began := time.Now()
	if r := n.do(t, http.MethodDelete, mgmt+"/backtests/"+heavy.ID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("stop: %d %s", r.Status, r.Body)
	}
	t.Logf("stopped in %s", time.Since(began))
	// The node's log says who stopped which job.
	if !strings.Contains(nodeLog.String(), `msg="backtest stopped and forgotten" job=`+heavy.ID+` status=running by="admin (`) {
		t.Fatalf("the node's log does not say who stopped the job:\n%s", nodeLog.String())
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/backtests/"+heavy.ID, admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/backtests/"+heavy.ID, admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	// The slot is free: another backtest starts at once, and runs to its end.
	light := startJob(t, n, admin, map[string]any{})
	r := n.do(t, http.MethodGet, mgmt+"/backtests/"+light.ID+"?wait=60", admin, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"done"`) {
		t.Fatalf("the next job: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/backtests/"+light.ID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("forget a finished job: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/backtests/"+light.ID, admin, nil), http.StatusNotFound, posture.CodeNotFound, "")

	// On the console: a running job's page has a button that stops it.
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}
	heavy = startJob(t, n, admin, heavyCandidate("#crm", 40, 100, 200))
	jobPage := "/console/backtests/" + heavy.ID
	if p := b.get(jobPage); p.Status != http.StatusOK || !strings.Contains(p.Body, `<form method="post" action="/console/backtests/`+heavy.ID+`/stop"`) {
		t.Fatalf("a running job's page has no stop button: %d\n%s", p.Status, p.Body)
	}
	if p := b.post(jobPage, jobPage+"/stop", url.Values{}); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/checks" {
		t.Fatalf("stop from the console: %d %v %s", p.Status, p.Header, p.Body)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/backtests/"+heavy.ID, admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	// A job that ended since its page was shown keeps its report: the
	// button leads to it.
	light = startJob(t, n, admin, map[string]any{})
	lightPage := "/console/backtests/" + light.ID
	if r := n.do(t, http.MethodGet, mgmt+"/backtests/"+light.ID+"?wait=60", admin, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"done"`) {
		t.Fatalf("a light job: %d %s", r.Status, r.Body)
	}
	if p := b.post(lightPage, lightPage+"/stop", url.Values{}); p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), lightPage+"?") {
		t.Fatalf("stop of a finished job from the console: %d %v", p.Status, p.Header)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/backtests/"+light.ID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("a finished job after the console's stop: %d %s", r.Status, r.Body)
	}
	// Without the CSRF token nothing is stopped.
	heavy = startJob(t, n, admin, heavyCandidate("#crm", 40, 100, 200))
	if p := b.do(http.MethodPost, "/console/backtests/"+heavy.ID+"/stop", url.Values{}); p.Status != http.StatusForbidden {
		t.Fatalf("stop without the CSRF token: %d %s", p.Status, p.Body)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/backtests/"+heavy.ID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("the job after a refused stop: %d %s", r.Status, r.Body)
	}
}
