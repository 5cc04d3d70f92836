package main

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// serviceQueries reads GET /services and returns, per service id, its
// posture queries by check id.
func (n *testNode) serviceQueries(t testing.TB, tok string) map[string]map[string]struct{ IsPassing, Stale bool } {
	t.Helper()
	var services []struct {
		ID             string `json:"id"`
		PostureQueries []struct {
			PostureQueries []struct {
				ID        string `json:"id"`
				IsPassing bool   `json:"isPassing"`
				Stale     bool   `json:"stale"`
			} `json:"postureQueries"`
		} `json:"postureQueries"`
	}
	n.getJSON(t, clientAPI+"/services?limit=500", tok, &services)
	out := map[string]map[string]struct{ IsPassing, Stale bool }{}
	for _, s := range services {
		out[s.ID] = map[string]struct{ IsPassing, Stale bool }{}
		for _, set := range s.PostureQueries {
			for _, q := range set.PostureQueries {
				out[s.ID][q.ID] = struct{ IsPassing, Stale bool }{q.IsPassing, q.Stale}
			}
		}
	}
	return out
}

// TestStaleEvidence: two OS checks with a 2-second maxAgeSeconds, one that
// denies on stale evidence and one that allows it. After an OS report both
// grant sessions; when the evidence passes its age, a deadline.reached
// event is appended (once), the denying policy's session is removed, the
// client sees the query fail with stale set, the allowing one still
// passes (stale too). A resubmission of the same values is fresh evidence
// and passes again. A replay of the log from scratch gives the same
// projection, byte for byte.
func TestStaleEvidence(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	os := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	deny := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os-fresh", "operatingSystems": os, "maxAgeSeconds": 2})
	allow := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os-any-age", "operatingSystems": os, "maxAgeSeconds": 2, "onStale": "allow"})
	strict := n.create(t, admin, "services", map[string]any{"name": "strict"})
	lenient := n.create(t, admin, "services", map[string]any{"name": "lenient"})
	n.create(t, admin, "service-policies", map[string]any{"name": "strict", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + strict}, "postureCheckRoles": []string{"@" + deny}})
	n.create(t, admin, "service-policies", map[string]any{"name": "lenient", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + lenient}, "postureCheckRoles": []string{"@" + allow}})

	// The rule is validated and shown.
	if d := n.detail(t, admin, "posture-checks", deny); d["maxAgeSeconds"] != 2.0 || d["onStale"] != "deny" {
		t.Fatalf("check detail: %v", d)
	}
	if r := n.do(t, http.MethodPost, mgmt+"/posture-checks", admin, map[string]any{"typeId": "OS", "name": "bad", "operatingSystems": os, "maxAgeSeconds": 5, "onStale": "maybe"}); r.Status != http.StatusBadRequest {
		t.Fatalf("onStale maybe: %d %s", r.Status, r.Body)
	}
	// Evidence older than 10 years is no age limit a deadline can hold.
	if r := n.do(t, http.MethodPost, mgmt+"/posture-checks", admin, map[string]any{"typeId": "OS", "name": "bad", "operatingSystems": os, "maxAgeSeconds": 9500000000}); r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("maxAgeSeconds")) {
		t.Fatalf("maxAgeSeconds 9500000000: %d %s", r.Status, r.Body)
	}

	ep := n.endpoint(t, admin, "stale-laptop")
	report := func() {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": deny, "type": "Linux", "version": "6.1.0"})
		if r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	report()
	start := n.lastSeq(t)
	for _, svc := range []string{strict, lenient} {
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
			t.Fatalf("fresh evidence: %d %s", r.Status, r.Body)
		}
	}
	q := n.serviceQueries(t, ep.token)
	if !q[strict][deny].IsPassing || q[strict][deny].Stale || !q[lenient][allow].IsPassing {
		t.Fatalf("fresh queries: %+v", q)
	}
	var pd struct {
		OS struct {
			AgeSeconds    int64  `json:"ageSeconds"`
			LastUpdatedAt string `json:"lastUpdatedAt"`
		} `json:"os"`
	}
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/posture-data", admin, &pd)
	if pd.OS.LastUpdatedAt == "" || pd.OS.AgeSeconds < 0 || pd.OS.AgeSeconds > 2 {
		t.Fatalf("posture data age: %+v", pd)
	}

	// The evidence goes stale: a deadline event, and the strict session goes.
	dl := n.waitForEvent(t, start+1, posture.TypeDeadlineReached, 15*time.Second)
	if ids := n.sessionIDs(t, ep.token); len(ids) != 1 {
		t.Fatalf("sessions after the evidence went stale: %v", ids)
	}
	payload, err := dl.Decode()
	if err != nil {
		t.Fatal(err)
	}
	p := payload.(posture.DeadlineReached)
	if p.IdentityID != ep.id || p.APISessionID != ep.apiSessionID {
		t.Fatalf("deadline: %+v", p)
	}
	q = n.serviceQueries(t, ep.token)
	if q[strict][deny].IsPassing || !q[strict][deny].Stale || !q[lenient][allow].IsPassing || !q[lenient][allow].Stale {
		t.Fatalf("stale queries: %+v", q)
	}
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": strict})
	if r.Status != http.StatusConflict {
		t.Fatalf("stale evidence, deny: %d %s", r.Status, r.Body)
	}
	// Explain sees it too.
	r = n.do(t, http.MethodGet, mgmt+"/identities/"+ep.id+"/policy-advice/"+strict+"?type=Dial", admin, nil)
	if r.Status != http.StatusOK || !bytes.Contains(r.Body, []byte(`"stale":true`)) || !bytes.Contains(r.Body, []byte(`"staleAfter":`)) {
		t.Fatalf("policy advice: %d %s", r.Status, r.Body)
	}

	// Exactly one deadline event for the expiry, and a replay of the log
	// reproduces the projection (no deadline is pending now: the strict
	// check fails, the lenient one sets none).
	live := n.dumpCaughtUp(t)
	var replayed *projections.Store
	replayed, err = projections.Open(projections.Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer replayed.Close()
	deadlines := 0
	if err := n.elog.Read(t.Context(), 1, 0, func(b []posture.Event) error {
		for _, e := range b {
			if e.Type == posture.TypeDeadlineReached && e.ID == dl.ID {
				deadlines++
			}
		}
		return replayed.Apply(b)
	}); err != nil {
		t.Fatal(err)
	}
	if deadlines != 1 {
		t.Fatalf("deadline events: %d, want 1", deadlines)
	}
	var b bytes.Buffer
	if err := replayed.Dump(&b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(live, b.String()); diff != "" {
		t.Fatalf("replay differs (-live +replayed):\n%s", diff)
	}
	// The same values again are fresh evidence.
	report()
	q = n.serviceQueries(t, ep.token)
	if !q[strict][deny].IsPassing || q[strict][deny].Stale {
		t.Fatalf("refreshed queries: %+v", q)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": strict}); r.Status != http.StatusCreated {
		t.Fatalf("refreshed evidence: %d %s", r.Status, r.Body)
	}
}
