package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

type ownAuthenticator struct {
	ID         string         `json:"id"`
	Method     string         `json:"method"`
	IdentityID string         `json:"identityId"`
	Username   string         `json:"username"`
	Tags       map[string]any `json:"tags"`
}

func (n *testNode) ownAuthenticators(t testing.TB, tok string) []ownAuthenticator {
	t.Helper()
	r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity/authenticators", tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list own authenticators: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var out []ownAuthenticator
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCurrentIdentityAuthenticators: an identity reads only its own
// authenticators and updates its password authenticator under the seed's
// rules (section 2.7): currentPassword always required and checked (a wrong
// one is 401 and changes nothing), username 4 to 100 characters, password and
// currentPassword 5 to 100, usernames unique.
func TestCurrentIdentityAuthenticators(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	tok := n.createUser(t, "auth-user", "first-password", false)
	base := api.ClientBase + "/current-identity/authenticators/"

	own := n.ownAuthenticators(t, tok)
	if len(own) != 1 || own[0].Method != posture.MethodPassword || own[0].Username != "auth-user" {
		t.Fatalf("own authenticators: %+v", own)
	}
	id := own[0].ID
	if r := n.do(t, http.MethodGet, base+id, tok, nil); r.Status != http.StatusOK || strings.Contains(string(r.Body), "argon2") {
		t.Fatalf("get own: %d %s", r.Status, r.Body)
	}
	// Another identity's authenticator is not found, for reading and
	// writing alike.
	adminAuth := n.ownAuthenticators(t, admin)[0].ID
	expectError(t, n.do(t, http.MethodGet, base+adminAuth, tok, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodPatch, base+adminAuth, tok, map[string]any{"currentPassword": testAdminPassword, "password": "stolen-password"}), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodGet, base+"nosuchid00", tok, nil), 404, posture.CodeNotFound, "")
	// A username that looks like another's in fullwidth letters.
	expectError(t, n.do(t, http.MethodPatch, base+id, tok, map[string]any{"currentPassword": "first-password", "username": "ａｄｍｉｎ"}), 400, posture.CodeCouldNotValidate, "username")

	r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity", tok, nil)
	if data, _ := r.envelope(t); r.Status != http.StatusOK || !strings.Contains(string(data), `"name":"auth-user"`) ||
		!strings.Contains(string(data), `"isMfaEnabled":false`) || !strings.Contains(string(data), `"username":"auth-user"`) {
		t.Fatalf("current-identity: %d %s", r.Status, data)
	}

	current := "first-password"
	long := func(c string, n int) string { return strings.Repeat(c, n) }
	cases := []struct {
		name   string
		method string
		body   any
		field  string
		code   string
	}{
		{"put without currentPassword", http.MethodPut, map[string]any{"username": "auth-user", "password": "new-password"}, "currentPassword", posture.CodeCouldNotValidate},
		{"patch without currentPassword", http.MethodPatch, map[string]any{"password": "new-password"}, "currentPassword", posture.CodeCouldNotValidate},
		{"patch null currentPassword", http.MethodPatch, map[string]any{"currentPassword": nil, "password": "new-password"}, "currentPassword", posture.CodeCouldNotValidate},
		{"currentPassword too short", http.MethodPatch, map[string]any{"currentPassword": "1234"}, "currentPassword", posture.CodeCouldNotValidate},
		{"currentPassword too long", http.MethodPatch, map[string]any{"currentPassword": long("p", 101)}, "currentPassword", posture.CodeCouldNotValidate},
		{"put without username", http.MethodPut, map[string]any{"currentPassword": current, "password": "new-password"}, "username", posture.CodeCouldNotValidate},
		{"put without password", http.MethodPut, map[string]any{"currentPassword": current, "username": "auth-user"}, "password", posture.CodeCouldNotValidate},
		{"username too short", http.MethodPatch, map[string]any{"currentPassword": current, "username": "abc"}, "username", posture.CodeCouldNotValidate},
		{"username too long", http.MethodPut, map[string]any{"currentPassword": current, "username": long("u", 101), "password": "new-password"}, "username", posture.CodeCouldNotValidate},
		{"password too short", http.MethodPut, map[string]any{"currentPassword": current, "username": "auth-user", "password": "1234"}, "password", posture.CodeCouldNotValidate},
		{"password too long", http.MethodPatch, map[string]any{"currentPassword": current, "password": long("p", 101)}, "password", posture.CodeCouldNotValidate},
		{"username not a string", http.MethodPatch, map[string]any{"currentPassword": current, "username": 12}, "username", posture.CodeCouldNotValidate},
		{"bad tag value", http.MethodPatch, map[string]any{"currentPassword": current, "tags": map[string]any{"n": 1}}, "tags.n", posture.CodeCouldNotValidate},
		{"username taken", http.MethodPatch, map[string]any{"currentPassword": current, "username": "admin"}, "username", posture.CodeCouldNotValidate},
		{"not an object", http.MethodPatch, `[1]`, "", posture.CodeCouldNotParseBody},
		{"not JSON", http.MethodPut, `{`, "", posture.CodeCouldNotParseBody},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := n.do(t, c.method, base+id, tok, c.body)
			expectError(t, r, 400, c.code, c.field)
			if strings.Contains(string(r.Body), "new-password") || strings.Contains(string(r.Body), current) {
				t.Fatalf("the error echoes a password: %s", r.Body)
			}
		})
	}

	// A wrong current password is 401 and changes nothing.
	for _, method := range []string{http.MethodPut, http.MethodPatch} {
		r := n.do(t, method, base+id, tok, map[string]any{"currentPassword": "wrong-password", "username": "renamed-user", "password": "new-password"})
		expectError(t, r, 401, posture.CodeUnauthorized, "")
	}
	n.login(t, api.ClientBase, "auth-user", current)
	if got := n.ownAuthenticators(t, tok)[0].Username; got != "auth-user" {
		t.Fatalf("username changed to %q by a refused update", got)
	}

	// The bounds are inclusive: 4 and 100 characters for a username, 5
	// and 100 for a password.
	steps := []struct {
		method             string
		username, password string
	}{
		{http.MethodPatch, "abcd", ""},
		{http.MethodPatch, long("u", 100), ""},
		{http.MethodPatch, "", "12345"},
		{http.MethodPatch, "", long("p", 100)},
		{http.MethodPut, "auth-user-2", "second-password"},
	}
	username := "auth-user"
	for _, s := range steps {
		body := map[string]any{"currentPassword": current}
		if s.username != "" {
			body["username"] = s.username
		}
		if s.password != "" {
			body["password"] = s.password
		}
		if r := n.do(t, s.method, base+id, tok, body); r.Status != http.StatusOK {
			t.Fatalf("%s %+v: %d %s", s.method, s, r.Status, r.Body)
		}
		if s.username != "" {
			username = s.username
		}
		if s.password != "" {
			current = s.password
		}
		n.login(t, api.ClientBase, username, current)
	}
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate?method=password", "", map[string]string{"username": "auth-user", "password": "first-password"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("old credentials still work: %d", r.Status)
	}

	// A patch with null username and password changes only the tags; a
	// full update without tags clears them.
	if r := n.do(t, http.MethodPatch, base+id, tok, map[string]any{"currentPassword": current, "username": nil, "password": nil, "tags": map[string]any{"team": "blue", "on": true}}); r.Status != http.StatusOK {
		t.Fatalf("patch tags: %d %s", r.Status, r.Body)
	}
	got := n.ownAuthenticators(t, tok)[0]
	if got.Username != "auth-user-2" || got.Tags["team"] != "blue" || got.Tags["on"] != true {
		t.Fatalf("after a tag patch: %+v", got)
	}
	n.login(t, api.ClientBase, "auth-user-2", current)
	if r := n.do(t, http.MethodPut, base+id, tok, map[string]any{"currentPassword": current, "username": "auth-user-2", "password": current}); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	if got := n.ownAuthenticators(t, tok)[0]; len(got.Tags) != 0 {
		t.Fatalf("tags after a full update without tags: %v", got.Tags)
	}
}

// TestDeletedAuthenticatorEndsItsSessions: deleting an authenticator ends
// the API sessions that logged in with it, and only those: the identity's
// session of another authenticator goes on (a removed password must not
// keep working through a token it got before). A rebuilt projection ends
// the same sessions.
func TestDeletedAuthenticatorEndsItsSessions(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	id, enr := n.enrolledIdentity(t, admin, "two-ways", map[string]any{"ott": true})
	_, cert := n.enrollOTT(t, enr.Token)
	pwAuth := n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "two-ways-user", "password": "two-ways-password"})
	pwTok := n.login(t, api.ClientBase, "two-ways-user", "two-ways-password")
	certTok, _ := n.certSession(t, cert)
	current := func(tok string) int {
		return n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", tok, nil).Status
	}
	if current(pwTok) != http.StatusOK || current(certTok) != http.StatusOK {
		t.Fatal("the sessions do not work before the delete")
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/authenticators/"+pwAuth, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete authenticator: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", pwTok, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	if got := current(certTok); got != http.StatusOK {
		t.Fatalf("the certificate's session after the password's delete: %d", got)
	}
	if got := n.apiSessionsOf(t, "two-ways"); got != 1 {
		t.Fatalf("%d API sessions left, want 1", got)
	}
	expectRebuiltEqual(t, n, cfg)
}

// TestAdminSetsAuthenticators: an administrator sets a updb authenticator's
// password and username on the management API (PUT needs both, PATCH
// either), without the current password; the identity then logs in with
// the new ones only. A certificate authenticator and a taken username are
// refused and change nothing. The admin's own authenticators are on the
// management API too.
func TestAdminSetsAuthenticators(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	n.createUser(t, "taken-name", "taken-password", false)
	tok := n.createUser(t, "forgetful", "first-password", false)
	id := n.ownAuthenticators(t, tok)[0].ID
	path := mgmt + "/authenticators/" + id

	expectError(t, n.do(t, http.MethodPut, path, admin, map[string]any{"password": "second-password"}), 400, posture.CodeCouldNotValidate, "username")
	expectError(t, n.do(t, http.MethodPatch, path, admin, map[string]any{"password": "abc"}), 400, posture.CodeCouldNotValidate, "password")
	expectError(t, n.do(t, http.MethodPatch, path, admin, map[string]any{"username": "taken-name"}), 400, posture.CodeCouldNotValidate, "username")
	expectError(t, n.do(t, http.MethodPatch, path, tok, map[string]any{"password": "second-password"}), 401, posture.CodeUnauthorized, "")
	n.login(t, api.ClientBase, "forgetful", "first-password") // nothing changed

	if r := n.do(t, http.MethodPatch, path, admin, map[string]any{"password": "second-password"}); r.Status != http.StatusOK {
		t.Fatalf("patch password: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate?method=password", "", map[string]string{"username": "forgetful", "password": "first-password"}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old password still logs in: %d %s", r.Status, r.Body)
	}
	n.login(t, api.ClientBase, "forgetful", "second-password")
	if r := n.do(t, http.MethodPut, path, admin, map[string]any{"username": "remembered", "password": "third-password", "tags": map[string]any{"reset": "ticket-42"}}); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	n.login(t, api.ClientBase, "remembered", "third-password")
	var got ownAuthenticator
	data, _ := n.do(t, http.MethodGet, path, admin, nil).envelope(t)
	if err := json.Unmarshal(data, &got); err != nil || got.Username != "remembered" || got.Tags["reset"] != "ticket-42" {
		t.Fatalf("after put: %s", data)
	}

	// A certificate authenticator has no password to set.
	device, enr := n.enrolledIdentity(t, admin, "cert-device", map[string]any{"ott": true})
	n.enrollOTT(t, enr.Token)
	certAuth, _ := n.listIDs(t, admin, "/identities/"+device+"/authenticators", "")
	if len(certAuth) != 1 {
		t.Fatalf("cert-device authenticators: %v", certAuth)
	}
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/authenticators/"+certAuth[0], admin, map[string]any{"password": "second-password"}), 400, posture.CodeCouldNotValidate, "method")

	// The default admin's credentials are its own: another admin may not
	// change, add or remove its authenticators or remove its MFA, and no
	// one may enroll it (every admin reads an enrollment's token). Its
	// password is changed with the current one only, even by itself.
	n.createUser(t, "second-admin", "second-admin-password", true)
	second := n.login(t, api.ManagementBase, "second-admin", "second-admin-password")
	adminAuth := n.ownAuthenticators(t, admin)[0].ID
	adminID := n.ownAuthenticators(t, admin)[0].IdentityID
	seq := n.lastSeq(t)
	for _, token := range []string{second, admin} {
		expectError(t, n.do(t, http.MethodPatch, mgmt+"/authenticators/"+adminAuth, token, map[string]any{"password": "taken-over"}), 401, posture.CodeUnauthorized, "")
		expectError(t, n.do(t, http.MethodPost, mgmt+"/enrollments", token, map[string]any{"method": "ott", "identityId": adminID}), 400, posture.CodeCouldNotValidate, "identityId")
		expectError(t, n.do(t, http.MethodDelete, mgmt+"/identities/"+adminID+"/mfa", token, nil), 401, posture.CodeUnauthorized, "")
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", second,
		map[string]any{"method": "updb", "identityId": adminID, "username": "admin-too", "password": "taken-over"}), 401, posture.CodeUnauthorized, "")
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/authenticators/"+adminAuth, second, nil), 401, posture.CodeUnauthorized, "")
	if got := n.lastSeq(t); got != seq {
		t.Fatalf("refused changes of the default admin appended events: %d -> %d", seq, got)
	}
	// An enrollment of the default admin an older node made is not redeemed.
	token, now := posture.NewToken(), time.Now().UTC()
	planted := posture.Enrollment{ID: posture.NewID(), Method: posture.EnrollOTT, IdentityID: adminID, TokenHash: posture.HashToken(token),
		ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	last, err := n.elog.Append(t.Context(), posture.MustEvent(posture.Created[posture.Enrollment]{Entity: planted}, now))
	if err != nil || n.store.WaitFor(t.Context(), last) != nil {
		t.Fatal(err)
	}
	r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ott&token=" + token,
		contentType: "application/x-pem-file", body: []byte(csrPEM(t, newKey(t), "admin"))})
	expectError(t, r, 400, posture.CodeInvalidEnrollmentToken, "")
	if got := n.lastSeq(t); got != last {
		t.Fatalf("a refused enrollment of the default admin appended events: %d -> %d", last, got)
	}
	n.login(t, api.ManagementBase, "admin", testAdminPassword) // unchanged

	// The admin's own, as on the client API: the current password is asked.
	own, _ := n.listIDs(t, admin, "/current-identity/authenticators", "")
	if len(own) != 1 {
		t.Fatalf("admin's own authenticators: %v", own)
	}
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/current-identity/authenticators/"+own[0], admin, map[string]any{"password": "new-admin-password"}), 400, posture.CodeCouldNotValidate, "currentPassword")
}
