package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

const clientAPI = api.ClientBase

// endpoint is an enrolled identity with a password and a logged-in API
// session.
type endpoint struct {
	id, token, apiSessionID string
}

func (n *testNode) endpoint(t testing.TB, admin, name string, attrs ...string) endpoint {
	t.Helper()
	id := n.create(t, admin, "identities", map[string]any{"name": name, "type": "Device", "roleAttributes": attrs})
	n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": name, "password": name + "-password"})
	tok := n.login(t, clientAPI, name, name+"-password")
	data, _ := n.do(t, http.MethodGet, clientAPI+"/current-api-session", tok, nil).envelope(t)
	var s api.APISessionView
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return endpoint{id: id, token: tok, apiSessionID: s.ID}
}

// dial asks for a Dial session of a service and returns its id.
func (n *testNode) dial(t testing.TB, tok, serviceID string) string {
	t.Helper()
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", tok, map[string]any{"serviceId": serviceID, "type": "Dial"})
	data, _ := r.envelope(t)
	var s struct{ ID string }
	if r.Status != http.StatusCreated || json.Unmarshal(data, &s) != nil {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	return s.ID
}

func (n *testNode) sessionIDs(t testing.TB, tok string) []string {
	t.Helper()
	r := n.do(t, http.MethodGet, clientAPI+"/sessions", tok, nil)
	var env struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	var ids []string
	for _, s := range env.Data {
		ids = append(ids, s.ID)
	}
	return ids
}

// waitForEvent follows the log from its current end until an event of the
// type appears, then waits until the projection has applied it: a barrier,
// not a poll.
func (n *testNode) waitForEvent(t testing.TB, from uint64, typ string, within time.Duration) posture.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), within)
	defer cancel()
	var found posture.Event
	stop := context.Canceled
	err := n.elog.Consume(ctx, from, func(batch []posture.Event) error {
		for _, e := range batch {
			if e.Type == typ {
				found = e
				return stop
			}
		}
		return nil
	})
	if found.Seq == 0 {
		t.Fatalf("no %s event within %s: %v", typ, within, err)
	}
	if err := n.store.WaitFor(ctx, found.Seq); err != nil {
		t.Fatal(err)
	}
	return found
}

func (n *testNode) lastSeq(t testing.TB) uint64 {
	last, err := n.elog.LastSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return last
}

func (n *testNode) getJSON(t testing.TB, path, tok string, v any) {
	t.Helper()
	r := n.do(t, http.MethodGet, path, tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Body)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, env.Data)
	}
}

// TestPostureDeniesThenGrants is the posture engine end to end over HTTPS:
// a policy with an OS check denies a session (409, recorded with actual and
// expected values); the right posture lets it through; posture that stops
// matching removes the session; a second policy without checks always
// grants; posture data and the failure ring survive a restart and a rebuild.
func TestPostureDeniesThenGrants(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	crm := n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "modern-windows",
		"operatingSystems": []any{map[string]any{"type": "WINDOWS", "versions": []string{">=10.0.19041 <11.0.0"}}}})
	macCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MAC", "name": "known-nic", "macAddresses": []string{"AA:BB:CC:DD:EE:FF"}})
	policy := n.create(t, admin, "service-policies", map[string]any{"name": "laptops-dial-crm", "type": "Dial",
		"identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + osCheck, "@" + macCheck}})
	ep := n.endpoint(t, admin, "laptop-1", "laptops")

	// The service is listed with its posture queries, failing.
	var services []map[string]any
	n.getJSON(t, clientAPI+"/services", ep.token, &services)
	if len(services) != 1 || services[0]["id"] != crm {
		t.Fatalf("services: %v", services)
	}
	sets := services[0]["postureQueries"].([]any)
	if len(sets) != 1 || sets[0].(map[string]any)["isPassing"] != false || services[0]["permissions"].([]any)[0] != "Dial" {
		t.Fatalf("posture queries: %v", services[0])
	}

	// No posture yet: denied, and recorded.
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm, "type": "Dial"})
	_, e := r.envelope(t)
	if r.Status != http.StatusConflict || e.Code != posture.CodeInvalidPosture || !strings.Contains(string(r.Body), policy) {
		t.Fatalf("session without posture: %d %s", r.Status, r.Body)
	}
	var failed []posture.FailedServiceRequest
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/failed-service-requests", admin, &failed)
	if len(failed) != 1 || failed[0].ServiceName != "crm" || failed[0].SessionType != "Dial" || len(failed[0].PolicyFailures[0].Checks) != 2 {
		t.Fatalf("failed requests: %+v", failed)
	}
	os := failed[0].PolicyFailures[0].Checks[1]
	if os.PostureCheckType != posture.CheckOS {
		os = failed[0].PolicyFailures[0].Checks[0]
	}
	var expected []posture.OperatingSystem
	if err := json.Unmarshal(os.ExpectedValue, &expected); err != nil || expected[0].Versions[0] != ">=10.0.19041 <11.0.0" || len(os.ActualValue) == 0 {
		t.Fatalf("OS failure values: actual %s expected %s", os.ActualValue, os.ExpectedValue)
	}

	// A bulk of nothing: [] records nothing; null or no body is refused.
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", ep.token, []any{}); r.Status != http.StatusCreated {
		t.Fatalf("posture bulk []: %d %s", r.Status, r.Body)
	}
	for _, body := range []string{"null", ""} {
		r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/posture-response-bulk", token: ep.token, contentType: "application/json", body: []byte(body)})
		expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotParseBody, "")
	}

	// The right posture (bulk, with the seed's build-as-patch rule) grants.
	r = n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", ep.token, []any{
		map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "10.0", "build": "19045"},
		map[string]any{"id": macCheck, "typeId": "MAC", "macAddresses": []string{"aa-bb-cc-dd-ee-ff", "11:22:33:44:55:66"}},
	})
	if r.Status != http.StatusCreated {
		t.Fatalf("posture bulk: %d %s", r.Status, r.Body)
	}
	r = n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm})
	if r.Status != http.StatusCreated {
		t.Fatalf("session with posture: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var sess map[string]any
	_ = json.Unmarshal(data, &sess)
	if sess["type"] != "Dial" || sess["serviceId"] != crm || strings.Count(sess["token"].(string), ".") != 2 {
		t.Fatalf("session: %v", sess)
	}
	if ids := n.sessionIDs(t, ep.token); len(ids) != 1 {
		t.Fatalf("sessions: %v", ids)
	}
	// The identity's other API sessions list it too, as they read it.
	if ids := n.sessionIDs(t, n.login(t, clientAPI, "laptop-1", "laptop-1-password")); len(ids) != 1 || ids[0] != sess["id"] {
		t.Fatalf("sessions from another login of the identity: %v", ids)
	}
	// The session token is read as the Go SDK reads it to refresh a
	// session (GetSessionFromJwt: its claims unverified, the service as
	// subject, the session as the token's id), and it is a valid
	// session-token for that service's edge router list.
	var claims struct {
		jwt.RegisteredClaims
		APISessionID string `json:"z_asid"`
		IdentityID   string `json:"z_iid"`
		Type         string `json:"z_st"`
	}
	if _, _, err := jwt.NewParser().ParseUnverified(sess["token"].(string), &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Subject != crm || claims.ID != sess["id"] || claims.APISessionID != sess["apiSessionId"] ||
		claims.IdentityID != sess["identityId"] || claims.Type != "Dial" {
		t.Fatalf("session token claims %+v, session %v", claims, sess)
	}
	req := n.doHeader(t, http.MethodGet, clientAPI+"/services/"+claims.Subject+"/edge-routers", ep.token, "session-token", sess["token"].(string))
	if req.Status != http.StatusOK {
		t.Fatalf("edge routers with the session token: %d %s", req.Status, req.Body)
	}
	other := n.create(t, admin, "services", map[string]any{"name": "other"})
	expectError(t, n.doHeader(t, http.MethodGet, clientAPI+"/services/"+other+"/edge-routers", ep.token, "session-token", sess["token"].(string)),
		http.StatusUnauthorized, posture.CodeUnauthorized, "")

	// Posture that stops matching removes the session and moves the
	// service-update indicator.
	var before, after map[string]string
	n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &before)
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "6.1.7601"}); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	if ids := n.sessionIDs(t, ep.token); len(ids) != 0 {
		t.Fatalf("the session outlived its failing policy: %v", ids)
	}
	n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &after)
	if !later(t, after["lastChangeAt"], before["lastChangeAt"]) {
		t.Fatalf("service-update indicator did not move: %v -> %v", before, after)
	}

	// A second policy without checks always grants.
	n.create(t, admin, "service-policies", map[string]any{"name": "everyone-dials-crm", "type": "Dial",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + crm}})
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm}); r.Status != http.StatusCreated {
		t.Fatalf("with a check-less policy: %d %s", r.Status, r.Body)
	}
	// Bind needs a Bind policy.
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm, "type": "Bind"}), 400, posture.CodeCouldNotValidate, "serviceId")
	// As the controller answers: a service the identity has no policy for,
	// and one that does not exist (or no longer does), are 404, on which
	// an SDK refreshes its list of services; the answers do not tell them
	// apart.
	hidden := n.create(t, admin, "services", map[string]any{"name": "hidden"})
	answer := func(serviceID string) api.APIError {
		r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": serviceID})
		expectError(t, r, 404, posture.CodeNotFound, "")
		_, e := r.envelope(t)
		e.RequestID, e.Message = "", strings.ReplaceAll(e.Message, serviceID, "")
		return e
	}
	if a, b := answer(hidden), answer("nope"); !cmp.Equal(a, b) {
		t.Fatalf("a hidden service and a nonexistent one are told apart:\n%s", cmp.Diff(a, b))
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/services/"+hidden, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": hidden}), 404, posture.CodeNotFound, "")

	// Posture data in the seed's shape.
	var pd map[string]any
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/posture-data", admin, &pd)
	osData := pd["os"].(map[string]any)
	if osData["type"] != "windows" || osData["version"] != "6.1.7601" || osData["postureCheckId"] != osCheck || pd["mac"].(map[string]any)["addresses"].([]any)[0] != "aabbccddeeff" {
		t.Fatalf("posture data: %v", pd)
	}
	if _, ok := pd["apiSessionPostureData"].(map[string]any)[ep.apiSessionID]; !ok {
		t.Fatalf("no API session posture data: %v", pd)
	}

	// Restart, then rebuild: posture data and the failure ring are the same.
	snapshot := func(n *testNode) (string, string) {
		pd := n.do(t, http.MethodGet, mgmt+"/identities/"+ep.id+"/posture-data", n.adminToken(t), nil)
		fr := n.do(t, http.MethodGet, mgmt+"/identities/"+ep.id+"/failed-service-requests", n.adminToken(t), nil)
		return dataOf(t, pd), dataOf(t, fr)
	}
	pd0, fr0 := snapshot(n)
	n.srv.Close()
	n.Close()
	n = startTestNode(t, cfg)
	pd1, fr1 := snapshot(n)
	n.srv.Close()
	n.Close()
	if err := removeProjections(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	pd2, fr2 := snapshot(n)
	if diff := cmp.Diff(pd0, pd1); diff != "" {
		t.Errorf("posture data changed over a restart:\n%s", diff)
	}
	if diff := cmp.Diff(fr0, fr1); diff != "" {
		t.Errorf("failure ring changed over a restart:\n%s", diff)
	}
	if pd0 != pd2 || fr0 != fr2 {
		t.Errorf("posture data or failure ring changed over a rebuild:\n%s\n%s", cmp.Diff(pd0, pd2), cmp.Diff(fr0, fr2))
	}
}

// later reports whether the RFC 3339 time a is after b.
func later(t testing.TB, a, b string) bool {
	t.Helper()
	ta, err := time.Parse(time.RFC3339Nano, a)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := time.Parse(time.RFC3339Nano, b)
	if err != nil {
		t.Fatal(err)
	}
	return ta.After(tb)
}

func dataOf(t testing.TB, r response) string {
	t.Helper()
	data, _ := r.envelope(t)
	return string(data)
}

func removeProjections(dataDir string) error {
	return os.RemoveAll(filepath.Join(dataDir, "projections"))
}

// TestFailureRingKeepsTheLast50 denies 51 requests: the oldest is dropped.
func TestFailureRingKeepsTheLast50(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	svc := n.create(t, admin, "services", map[string]any{"name": "svc"})
	check := n.create(t, admin, "posture-checks", map[string]any{"typeId": "DOMAIN", "name": "corp", "domains": []string{"corp.example"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"#all"}, "postureCheckRoles": []string{"@" + check}})
	ep := n.endpoint(t, admin, "ring-1")
	for i := range 51 {
		n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": check, "typeId": "DOMAIN", "domain": "home-" + itoa(i)})
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusConflict {
			t.Fatalf("request %d: %d", i, r.Status)
		}
	}
	var failed []posture.FailedServiceRequest
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/failed-service-requests", admin, &failed)
	if len(failed) != 50 {
		t.Fatalf("%d failed requests kept", len(failed))
	}
	first := string(failed[0].PolicyFailures[0].Checks[0].ActualValue)
	last := string(failed[49].PolicyFailures[0].Checks[0].ActualValue)
	if first != `"home-1"` || last != `"home-50"` {
		t.Fatalf("ring order: first %s last %s", first, last)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestLosingAGrantRemovesSessions: a session goes with the last policy that
// granted it, whichever way the grant is lost: the identity loses the role
// the policy selects, the policy is deleted, the service loses the role the
// policy selects, or the service is deleted. Policies without checks, here:
// no verdict changes, only the grant.
func TestLosingAGrantRemovesSessions(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	policy := func() string {
		return n.create(t, admin, "service-policies", map[string]any{"name": "laptops-dial-apps-" + posture.NewID()[:8], "type": "Dial",
			"identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	}
	p := policy()
	ep := n.endpoint(t, admin, "laptop-1", "laptops")
	dial := func() {
		t.Helper()
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
			t.Fatalf("session: %d %s", r.Status, r.Body)
		}
	}
	change := func(what, method, path string, body any) {
		t.Helper()
		dial()
		var before, after map[string]string
		n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &before)
		if r := n.do(t, method, mgmt+path, admin, body); r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", what, r.Status, r.Body)
		}
		if ids := n.sessionIDs(t, ep.token); len(ids) != 0 {
			t.Fatalf("after %s the session is still there: %v", what, ids)
		}
		n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &after)
		if !later(t, after["lastChangeAt"], before["lastChangeAt"]) {
			t.Fatalf("after %s the service-update indicator did not move: %v -> %v", what, before, after)
		}
	}

	change("the identity lost its role", http.MethodPatch, "/identities/"+ep.id, map[string]any{"roleAttributes": []string{}})
	n.do(t, http.MethodPatch, mgmt+"/identities/"+ep.id, admin, map[string]any{"roleAttributes": []string{"laptops"}})
	change("the policy was deleted", http.MethodDelete, "/service-policies/"+p, nil)
	policy()
	change("the service lost its role", http.MethodPatch, "/services/"+svc, map[string]any{"roleAttributes": []string{}})
	n.do(t, http.MethodPatch, mgmt+"/services/"+svc, admin, map[string]any{"roleAttributes": []string{"apps"}})
	change("the service was deleted", http.MethodDelete, "/services/"+svc, nil)
}

// A session decided on a state that changed before its event was applied
// is not created: the projection applies the session only while a policy
// grants it, and keeps the first session of an API session, type and
// service. So concurrent requests for one session answer one session, and
// a session whose grant a posture or policy change took away in between
// does not stay (the API then answers the refusal the state gives).
func TestSessionsFollowTheLogOrder(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	check := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "win", "roleAttributes": []string{"win"},
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.19041"}}}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"#apps"}, "postureCheckRoles": []string{"#win"}})
	ep := n.endpoint(t, admin, "laptop", "laptops")
	report := func(version string) {
		t.Helper()
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": version}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	report("10.0.19045")

	// 32 requests at once for the same session: one session.
	ids := make(chan string, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc, "type": "Dial"})
			if r.Status != http.StatusCreated {
				t.Errorf("session: %d %s", r.Status, r.Body)
				return
			}
			var s struct{ ID string }
			data, _ := r.envelope(t)
			_ = json.Unmarshal(data, &s)
			ids <- s.ID
		})
	}
	wg.Wait()
	close(ids)
	answered := map[string]bool{}
	for id := range ids {
		answered[id] = true
	}
	if listed := n.sessionIDs(t, ep.token); len(answered) != 1 || len(listed) != 1 || !answered[listed[0]] {
		t.Fatalf("32 concurrent requests answered sessions %v; listed %v", answered, listed)
	}
	var first string
	for id := range answered {
		first = id
	}

	// A session decided before a failing posture fact, whose event comes
	// after it: appended here as the API would, in that order.
	w := &api.Writer{Log: n.elog, Barrier: n.store, Now: time.Now}
	if _, err := w.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.SessionDeleted{ID: first, IdentityID: ep.id}); err != nil {
		t.Fatal(err)
	}
	report("6.1.7601")
	late := posture.Session{ID: posture.NewID(), IdentityID: ep.id, APISessionID: ep.apiSessionID, ServiceID: svc, Type: posture.Dial, CreatedAt: time.Now().UTC()}
	if _, err := w.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.SessionCreated{Session: late, Policies: []string{"laptops"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.store.Session(late.ID); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("a session applied after its grant was gone: %v", err)
	}
	if listed := n.sessionIDs(t, ep.token); len(listed) != 0 {
		t.Fatalf("sessions listed after the grant was gone: %v", listed)
	}
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}), http.StatusConflict, posture.CodeInvalidPosture, "")
}

// TestWriteBudget: an identity whose requests ask a node to keep more than
// --write-budget-kib allows, past its 2 MiB burst, is answered 429 with
// Retry-After and nothing is appended, whatever it asks: a posture
// response, a session request that would be refused (its refusal, which
// carries the identity's posture, is kept too), a login, an MFA
// enrollment, a change of its authenticator. A wrong password is still
// answered 401. Other identities are not affected. The node's clock stands
// still: the budget does not refill meanwhile.
func TestWriteBudget(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.WriteBudgetKiB = 1
	cfg.clock = clockwork.NewFakeClockAt(time.Now().UTC())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	mac := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MAC", "name": "nic", "roleAttributes": []string{"nic"},
		"macAddresses": []string{"aa:bb:cc:dd:ee:ff"}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "crm-nic", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"#nic"}})
	greedy, other := n.endpoint(t, admin, "greedy"), n.endpoint(t, admin, "other")
	// Many addresses, none the check's: a refusal of greedy's keeps them all.
	var addrs []string
	for i := range 400 {
		addrs = append(addrs, fmt.Sprintf("02:00:00:00:%02x:%02x", i/256, i%256))
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", greedy.token, map[string]any{"id": mac, "typeId": "MAC", "macAddresses": addrs}); r.Status != http.StatusCreated {
		t.Fatalf("MAC addresses: %d %s", r.Status, r.Body)
	}
	same := "/bin/same"
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", greedy.token, map[string]any{"id": "proc", "typeId": "PROCESS", "path": same, "isRunning": true}); r.Status != http.StatusCreated {
		t.Fatalf("a process: %d %s", r.Status, r.Body)
	}
	// Spend the burst: 200 responses of 4,000-byte paths (about 800 KB)
	// twice, then smaller ones until the budget refuses them.
	var bulk []map[string]any
	for i := range 200 {
		bulk = append(bulk, map[string]any{"id": "proc", "typeId": "PROCESS", "path": fmt.Sprintf("/%03d/%s", i, strings.Repeat("a", 3995)), "isRunning": true})
	}
	for range 2 {
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", greedy.token, bulk); r.Status != http.StatusCreated {
			t.Fatalf("within the burst: %d %s", r.Status, r.Body)
		}
	}
	refused := func(r response, what string) {
		t.Helper()
		if _, e := r.envelope(t); r.Status != http.StatusTooManyRequests || e.Code != posture.CodeTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s past the budget: %d %s, Retry-After %q; want 429 %s with Retry-After", what, r.Status, r.Body, r.Header.Get("Retry-After"), posture.CodeTooManyRequests)
		}
	}
	before := n.lastSeq(t)
	refused(n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", greedy.token, bulk), "a posture response")
	if after := n.lastSeq(t); after != before {
		t.Fatalf("a refused posture response appended to the log: sequence %d, then %d", before, after)
	}
	// New processes change greedy's values, which costs api.TransitionCost
	// more; the same process again does not: it spends the rest.
	for _, size := range []int{4000, 1000, 100, 0} {
		for i := 0; ; i++ {
			path := fmt.Sprintf("/%d/%d/%s", size, i, strings.Repeat("b", size))
			if size == 0 {
				path = same
			}
			r := n.do(t, http.MethodPost, clientAPI+"/posture-response", greedy.token, map[string]any{"id": "proc", "typeId": "PROCESS", "path": path, "isRunning": true})
			if r.Status == http.StatusTooManyRequests {
				break
			}
			if r.Status != http.StatusCreated || i > 1000 {
				t.Fatalf("spending the budget: %d %s", r.Status, r.Body)
			}
		}
	}
	before = n.lastSeq(t)
	refused(n.do(t, http.MethodPost, clientAPI+"/sessions", greedy.token, map[string]any{"serviceId": svc}), "a refused session request")
	refused(n.do(t, http.MethodPost, clientAPI+"/authenticate?method=password", "", map[string]any{"username": "greedy", "password": "greedy-password"}), "a login")
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/authenticate?method=password", "", map[string]any{"username": "greedy", "password": "wrong-password"}),
		http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	refused(n.do(t, http.MethodPost, clientAPI+"/current-identity/mfa", greedy.token, nil), "an MFA enrollment")
	var authenticators []struct{ ID string }
	n.getJSON(t, clientAPI+"/current-identity/authenticators", greedy.token, &authenticators)
	refused(n.do(t, http.MethodPatch, clientAPI+"/current-identity/authenticators/"+authenticators[0].ID, greedy.token,
		map[string]any{"currentPassword": "greedy-password", "tags": map[string]any{"note": strings.Repeat("t", 4000)}}), "a change of its authenticator")
	if after := n.lastSeq(t); after != before {
		t.Fatalf("requests refused by the budget appended to the log: sequence %d, then %d", before, after)
	}
	small := map[string]any{"id": "os", "typeId": "OS", "type": "Linux", "version": "6.1.0"}
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", other.token, small); r.Status != http.StatusCreated {
		t.Fatalf("another identity was refused: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/sessions", other.token, map[string]any{"serviceId": svc}), http.StatusConflict, posture.CodeInvalidPosture, "")
}
