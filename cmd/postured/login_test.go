package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

func TestPasswordLogin(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))

	for _, base := range []string{api.ClientBase, api.ManagementBase, "/edge/v1", ""} {
		r := n.do(t, http.MethodPost, base+"/authenticate?method=password", "", map[string]string{"username": "admin", "password": testAdminPassword})
		if r.Status != http.StatusOK {
			t.Fatalf("%s: login %d %s", base, r.Status, r.Body)
		}
		data, _ := r.envelope(t)
		var s api.APISessionView
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		tok := r.Header.Get(api.HeaderSession)
		if s.Token != tok || !posture.IsToken(tok) || s.Identity.Name != "admin" {
			t.Fatalf("%s: session %+v, header token %q", base, s, tok)
		}
		if r.Header.Get("expiration-seconds") != "1800" || r.Header.Get("expires-at") == "" {
			t.Fatalf("%s: expiry headers %v", base, r.Header)
		}
		// The answer holds the token: no cache may keep it.
		if r.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("%s: Cache-Control %q on the login's answer", base, r.Header.Get("Cache-Control"))
		}
		cur := n.do(t, http.MethodGet, base+"/current-api-session", tok, nil)
		if cur.Status != http.StatusOK {
			t.Fatalf("%s: current-api-session %d %s", base, cur.Status, cur.Body)
		}
	}

	cases := []struct {
		name, query string
		body        any
		status      int
		code, field string
	}{
		{"wrong password", "password", map[string]string{"username": "admin", "password": "wrong-password"}, 401, posture.CodeInvalidAuth, ""},
		{"unknown user", "password", map[string]string{"username": "nobody", "password": "wrong-password"}, 401, posture.CodeInvalidAuth, ""},
		{"short username", "password", map[string]string{"username": "adm", "password": "wrong-password"}, 400, posture.CodeCouldNotValidate, "username"},
		{"long username", "password", map[string]string{"username": strings.Repeat("a", 101), "password": "wrong-password"}, 400, posture.CodeCouldNotValidate, "username"},
		{"short password", "password", map[string]string{"username": "admin", "password": "1234"}, 400, posture.CodeCouldNotValidate, "password"},
		{"long password", "password", map[string]string{"username": "admin", "password": strings.Repeat("p", 101)}, 400, posture.CodeCouldNotValidate, "password"},
		{"no body", "password", nil, 400, posture.CodeCouldNotValidate, "username"},
		{"bad json", "password", "{", 400, posture.CodeCouldNotParseBody, ""},
		{"wrong types", "password", `{"username": 12}`, 400, posture.CodeCouldNotParseBody, ""},
		{"unknown method", "magic", map[string]string{"username": "admin", "password": testAdminPassword}, 400, posture.CodeCouldNotValidate, "method"},
		{"no method", "", map[string]string{"username": "admin", "password": testAdminPassword}, 400, posture.CodeCouldNotValidate, "method"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate?method="+c.query, "", c.body)
			_, e := r.envelope(t)
			if r.Status != c.status || e.Code != c.code || e.RequestID == "" {
				t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, c.status, c.code)
			}
			if c.field != "" {
				cause, _ := json.Marshal(e.Cause)
				if !strings.Contains(string(cause), `"field":"`+c.field+`"`) {
					t.Fatalf("cause %s does not name %s", cause, c.field)
				}
			}
			if strings.Contains(string(r.Body), testAdminPassword) {
				t.Fatal("the error echoes the password")
			}
		})
	}
}

func TestLogoutEndsTheAPISession(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.login(t, api.ClientBase, "admin", testAdminPassword)
	if r := n.do(t, http.MethodDelete, api.ClientBase+"/current-api-session", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("logout: %d %s", r.Status, r.Body)
	}
	r := n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", tok, nil)
	if _, e := r.envelope(t); r.Status != http.StatusUnauthorized || e.Code != posture.CodeUnauthorized {
		t.Fatalf("after logout: %d %s", r.Status, r.Body)
	}
}

func TestIdleAPISessionExpires(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.APISessionTimeout = 2 * time.Second
	n := startTestNode(t, cfg)
	now := time.Now()
	clock := func() time.Time { return now }
	n.auth.Now = clock
	tok := n.login(t, api.ClientBase, "admin", testAdminPassword)

	now = now.Add(1500 * time.Millisecond)
	if r := n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("within the timeout: %d", r.Status)
	}
	now = now.Add(2 * time.Second)
	r := n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", tok, nil)
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("after the idle timeout: %d %s", r.Status, r.Body)
	}
}

// TestDisabledIdentityCannotLogIn: a disabled identity is refused with its
// password, answered as a wrong password is (the answer does not tell that
// the password was right), and with its certificate; enabled again, both
// work.
func TestDisabledIdentityCannotLogIn(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id, enr := n.enrolledIdentity(t, admin, "laptop", map[string]any{"ott": true})
	_, cert := n.enrollOTT(t, enr.Token)
	n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "laptop", "password": "laptop-password"})
	password := func() response {
		return n.do(t, http.MethodPost, clientAPI+"/authenticate?method=password", "", map[string]string{"username": "laptop", "password": "laptop-password"})
	}
	disable := func(disabled bool) {
		t.Helper()
		if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+id, admin, map[string]any{"disabled": disabled}); r.Status != http.StatusOK {
			t.Fatalf("disabled=%v: %d %s", disabled, r.Status, r.Body)
		}
	}
	disable(true)
	right, wrong := password(), n.do(t, http.MethodPost, clientAPI+"/authenticate?method=password", "", map[string]string{"username": "laptop", "password": "wrong-password"})
	_, re := right.envelope(t)
	_, we := wrong.envelope(t)
	if right.Status != http.StatusUnauthorized || right.Status != wrong.Status || re.Code != we.Code || re.Message != we.Message {
		t.Fatalf("a disabled identity's right password: %d %s; a wrong one: %d %s", right.Status, right.Body, wrong.Status, wrong.Body)
	}
	expectAuthFailure(t, n.certLogin(t, cert), "")
	disable(false)
	if r := password(); r.Status != http.StatusOK {
		t.Fatalf("password login once enabled: %d %s", r.Status, r.Body)
	}
	if r := n.certLogin(t, cert); r.Status != http.StatusOK {
		t.Fatalf("cert login once enabled: %d %s", r.Status, r.Body)
	}
}

// TestAdminListsAndEndsSessions: the management API lists every identity's
// API sessions and sessions, without their tokens, and an admin ends them:
// a session ended is gone for its owner; an API session ended no longer
// authenticates, and its sessions end with it.
func TestAdminListsAndEndsSessions(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "laptop", "laptops")
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	sess := n.dial(t, ep.token, svc)

	var apiSessions []map[string]any
	n.getJSON(t, mgmt+"/api-sessions?filter="+url.QueryEscape(`identityId="`+ep.id+`"`), admin, &apiSessions)
	if len(apiSessions) != 1 || apiSessions[0]["id"] != ep.apiSessionID || apiSessions[0]["token"] != nil ||
		apiSessions[0]["identity"].(map[string]any)["name"] != "laptop" {
		t.Fatalf("the endpoint's API sessions: %v", apiSessions)
	}
	var sessions []map[string]any
	n.getJSON(t, mgmt+"/sessions", admin, &sessions)
	if len(sessions) != 1 || sessions[0]["id"] != sess || sessions[0]["token"] != nil || sessions[0]["apiSessionId"] != ep.apiSessionID ||
		sessions[0]["service"].(map[string]any)["name"] != "crm" {
		t.Fatalf("sessions: %v", sessions)
	}
	if routers, ok := sessions[0]["edgeRouters"].([]any); !ok || len(routers) != 0 {
		t.Fatalf("a session's online edge routers (none without a data plane): %v", sessions[0]["edgeRouters"])
	}
	if r := n.do(t, http.MethodGet, mgmt+"/sessions/"+sess, admin, nil); r.Status != http.StatusOK || strings.Contains(string(r.Body), `"token"`) {
		t.Fatalf("session detail: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/sessions/"+sess, ep.token, nil), 401, posture.CodeUnauthorized, "")

	// deleteOnce deletes at path from 8 requests at once: one ends it, once
	// (one event of the type), the others find it gone.
	deleteOnce := func(path, eventType string) {
		t.Helper()
		from := n.lastSeq(t) + 1
		statuses := make(chan int, 8)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { statuses <- n.do(t, http.MethodDelete, path, admin, nil).Status })
		}
		wg.Wait()
		close(statuses)
		var got []int
		for s := range statuses {
			got = append(got, s)
		}
		slices.Sort(got)
		if got[0] != http.StatusOK || got[1] != http.StatusNotFound || got[7] != http.StatusNotFound {
			t.Fatalf("concurrent deletes of %s: %v", path, got)
		}
		ends := 0
		if err := n.elog.Read(t.Context(), from, 0, func(b []posture.Event) error {
			for _, e := range b {
				if e.Type == eventType {
					ends++
				}
			}
			return nil
		}); err != nil || ends != 1 {
			t.Fatalf("concurrent deletes of %s: %d %s events (%v)", path, ends, eventType, err)
		}
	}

	// The admin ends the session: its owner no longer has it.
	deleteOnce(mgmt+"/sessions/"+sess, posture.SessionDeleted{}.EventType())
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/sessions/"+sess, ep.token, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/sessions/"+sess, admin, nil), 404, posture.CodeNotFound, "")

	// The admin ends the API session: its token no longer authenticates,
	// and the session made on it ends too.
	again := n.dial(t, ep.token, svc)
	deleteOnce(mgmt+"/api-sessions/"+ep.apiSessionID, posture.APISessionDeleted{}.EventType())
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/current-api-session", ep.token, nil), 401, posture.CodeUnauthorized, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/sessions/"+again, admin, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/api-sessions/"+ep.apiSessionID, admin, nil), 404, posture.CodeNotFound, "")
}
