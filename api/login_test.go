package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// loginStore is what authentication reads: identities, password
// authenticators and MFA enrollments in memory.
type loginStore struct {
	apitest.Entities // config types
	identities       map[string]posture.Identity
	authenticators   []posture.Authenticator
	mfa              map[string]posture.MFA
	// sessions are the API sessions the fake projection started, by token
	// hash.
	sessions map[string]posture.APISession
}

func (s loginStore) APISessionByTokenHash(h string) (posture.APISession, error) {
	if a, ok := s.sessions[h]; ok {
		return a, nil
	}
	return posture.APISession{}, posture.ErrNotFound
}

func (s loginStore) Identity(id string) (posture.Identity, error) {
	if i, ok := s.identities[id]; ok {
		return i, nil
	}
	return posture.Identity{}, posture.ErrNotFound
}

func (s loginStore) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	for _, au := range s.authenticators {
		if au.Username == username {
			return au, nil
		}
	}
	return posture.Authenticator{}, posture.ErrNotFound
}

func (s loginStore) MFA(identityID string) (posture.MFA, error) {
	if m, ok := s.mfa[identityID]; ok {
		return m, nil
	}
	return posture.MFA{}, posture.ErrNotFound
}

// TestLoginHandlers: POST /authenticate with a password opens an API
// session (partial when the identity has verified MFA); every failure of
// the credentials is the same 401 and writes nothing; the current API
// session is read and ended.
func TestLoginHandlers(t *testing.T) {
	now := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	hash, err := api.HashPassword(t.Context(), "laptop-password")
	if err != nil {
		t.Fatal(err)
	}
	store := loginStore{
		identities: map[string]posture.Identity{
			"ident1": {ID: "ident1", Name: "laptop"},
			"ident2": {ID: "ident2", Name: "phone", Disabled: true},
			"ident3": {ID: "ident3", Name: "admin", IsAdmin: true},
		},
		authenticators: []posture.Authenticator{
			{ID: "auth1", IdentityID: "ident1", Method: posture.MethodPassword, Username: "laptop-user", PasswordHash: hash},
			{ID: "auth2", IdentityID: "ident2", Method: posture.MethodPassword, Username: "phone-user", PasswordHash: hash},
			{ID: "auth3", IdentityID: "ident3", Method: posture.MethodPassword, Username: "admin-user", PasswordHash: hash},
			{ID: "auth4", IdentityID: "ident9", Method: posture.MethodPassword, Username: "orphan-user", PasswordHash: hash},
			{ID: "auth5", IdentityID: "ident1", Method: posture.MethodPassword, Username: "raced-user", PasswordHash: hash},
		},
		mfa:      map[string]posture.MFA{"ident3": {ID: "mfa3", IdentityID: "ident3", Verified: true}},
		Entities: apitest.Entities{},
	}
	store.Put(t, posture.ConfigType{ID: "ct1", Name: "intercept.v1"})
	store.Put(t, posture.ConfigType{ID: "ct2", Name: "host.v1"})
	login := func(user, password string) string {
		return `{"username":"` + user + `","password":"` + password + `","configTypes":["all"],"sdkInfo":{"type":"ziti-sdk-c","version":"1.0.0"}}`
	}
	created := posture.APISessionCreated{}.EventType()
	session := &api.Principal{Identity: posture.Identity{ID: "ident1", Name: "laptop"},
		Session: posture.APISession{ID: "apis1", IdentityID: "ident1", CreatedAt: now, LastActivityAt: now, ConfigTypes: []string{}}}
	cases := []apitest.Case{
		{Name: "Authenticate: a password opens an API session", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("laptop-user", "laptop-password"),
			Status: http.StatusOK, Appended: []string{created},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				s := log.Payload(t, 0).(posture.APISessionCreated).APISession
				var v struct {
					Token      string `json:"token"`
					IdentityID string `json:"identityId"`
				}
				r.DataInto(t, &v)
				if token := r.Header.Get(api.HeaderSession); token == "" || token != v.Token || s.TokenHash != api.TokenHash(token) ||
					strings.Contains(string(log.Events[0].Data), token) || s.IdentityID != "ident1" || s.AuthenticatorID != "auth1" ||
					s.MFARequired || s.SDKInfo.Version != "1.0.0" || !s.CreatedAt.Equal(now) || r.Header.Get("expires-at") == "" {
					t.Fatalf("session %+v, answered %s %v", s, r.Data, r.Header)
				}
			}},
		{Name: "Authenticate: what a client reports of itself that would not show as it reads is replaced, not refused", Method: http.MethodPost, Path: "/authenticate?method=password",
			Body:   `{"username":"laptop-user","password":"laptop-password","envInfo":{"hostname":"a\u0000b\u202e","os":"linux","osVersion":"h\u3164\u2800\ue000x 12.1"},"sdkInfo":{"type":"ziti-sdk-c","version":"\u001b[31mred"}}`,
			Status: http.StatusOK, Appended: []string{created},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				s := log.Payload(t, 0).(posture.APISessionCreated).APISession
				if s.EnvInfo.Hostname != "a\uFFFDb\uFFFD" || s.EnvInfo.OS != "linux" || s.EnvInfo.OSVersion != "h\uFFFD\uFFFD\uFFFDx 12.1" || s.SDKInfo.Version != "\uFFFD[31mred" || s.SDKInfo.Type != "ziti-sdk-c" {
					t.Fatalf("env %+v, sdk %+v", s.EnvInfo, s.SDKInfo)
				}
			}},
		{Name: "Authenticate: verified MFA makes the session partial", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("admin-user", "laptop-password"),
			Status: http.StatusOK, Appended: []string{created},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				if s := log.Payload(t, 0).(posture.APISessionCreated).APISession; !s.MFARequired || !strings.Contains(string(r.Data), `"typeId":"MFA"`) {
					t.Fatalf("session %+v, answered %s", s, r.Data)
				}
			}},
		{Name: "Authenticate: config types by name become ids, and what is no config type is left out", Method: http.MethodPost, Path: "/authenticate?method=password",
			Body:   `{"username":"laptop-user","password":"laptop-password","configTypes":["intercept.v1","nope","ct2","host.v1"]}`,
			Status: http.StatusOK, Appended: []string{created},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				var v struct {
					ConfigTypes []string `json:"configTypes"`
				}
				r.DataInto(t, &v)
				if s := log.Payload(t, 0).(posture.APISessionCreated).APISession; !slices.Equal(s.ConfigTypes, []string{"ct1", "ct2"}) || !slices.Equal(v.ConfigTypes, s.ConfigTypes) {
					t.Fatalf("config types %q, answered %q", s.ConfigTypes, v.ConfigTypes)
				}
			}},
		{Name: "Authenticate: a login the projection starts no session of (its authenticator changed meanwhile) fails", Method: http.MethodPost,
			Path: "/authenticate?method=password", Body: login("raced-user", "laptop-password"),
			Status: http.StatusUnauthorized, Code: posture.CodeInvalidAuth, Appended: []string{created},
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if token := r.Header.Get(api.HeaderSession); token != "" {
					t.Fatalf("a refused login answered the token %q", token)
				}
			}},
		{Name: "Authenticate: a wrong password", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("laptop-user", "wrong-password"),
			Status: http.StatusUnauthorized, Code: posture.CodeInvalidAuth},
		{Name: "Authenticate: an unknown username", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("nobody-user", "laptop-password"),
			Status: http.StatusUnauthorized, Code: posture.CodeInvalidAuth},
		{Name: "Authenticate: the identity is gone", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("orphan-user", "laptop-password"),
			Status: http.StatusUnauthorized, Code: posture.CodeInvalidAuth},
		{Name: "Authenticate: a disabled identity", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("phone-user", "laptop-password"),
			Status: http.StatusUnauthorized, Code: posture.CodeInvalidAuth},
		{Name: "Authenticate: a short password is refused before it is checked, and not echoed", Method: http.MethodPost, Path: "/authenticate?method=password",
			Body: login("laptop-user", "1234"), Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "password",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(string(r.Body), "1234") {
					t.Fatalf("the password reached the answer: %s", r.Body)
				}
			}},
		{Name: "Authenticate: a short username", Method: http.MethodPost, Path: "/authenticate?method=password", Body: login("abc", "laptop-password"),
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "username"},
		{Name: "Authenticate: method missing", Method: http.MethodPost, Path: "/authenticate", Body: login("laptop-user", "laptop-password"),
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "method"},
		{Name: "Authenticate: method unknown", Method: http.MethodPost, Path: "/authenticate?method=kerberos", Body: login("laptop-user", "laptop-password"),
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "method"},
		{Name: "Authenticate: ext-jwt not enabled", Method: http.MethodPost, Path: "/authenticate?method=ext-jwt", Body: `{}`,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidAuthMethod},
		{Name: "Authenticate: malformed JSON", Method: http.MethodPost, Path: "/authenticate?method=password", Body: `{"username":`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "Authenticate: a password of the wrong type", Method: http.MethodPost, Path: "/authenticate?method=password", Body: `{"username":"laptop-user","password":12345}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "Authenticate: configTypes that are not strings", Method: http.MethodPost, Path: "/authenticate?method=password",
			Body: `{"username":"laptop-user","password":"laptop-password","configTypes":[1]}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "Authenticate: more configTypes than a client needs", Method: http.MethodPost, Path: "/authenticate?method=password",
			Body:   `{"username":"laptop-user","password":"laptop-password","configTypes":[` + strings.TrimSuffix(strings.Repeat(`"c",`, api.MaxConfigTypes+1), ",") + `]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: fmt.Sprintf("configTypes[%d]", api.MaxConfigTypes)},
	}
	serve := func(who *api.Principal) func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		return func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
			store := store
			store.sessions = map[string]posture.APISession{}
			log := &apitest.Log{Apply: func(e posture.Event) {
				// The fake projection refuses raced-user's logins, as the
				// real one refuses a login whose authenticator changed
				// after the login read it.
				if p, err := e.Decode(); err == nil {
					if c, ok := p.(posture.APISessionCreated); ok && c.APISession.AuthenticatorID != "auth5" {
						store.sessions[c.APISession.TokenHash] = c.APISession
					}
				}
			}}
			w := apitest.Writer(log, now)
			l := &api.Login{Store: store, Writer: w, Auth: &api.Auth{Sessions: store, Log: log, Now: w.Now, Timeout: 30 * time.Minute}}
			return l.Routes(api.Partial), who, log
		}
	}
	apitest.Run(t, cases, serve(nil))
	apitest.Run(t, []apitest.Case{
		{Name: "CurrentSession", Method: http.MethodGet, Path: "/current-api-session", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(string(r.Data), `"id":"apis1"`) {
					t.Fatalf("session %s", r.Data)
				}
			}},
		{Name: "Logout", Method: http.MethodDelete, Path: "/current-api-session", Status: http.StatusOK, Appended: []string{posture.APISessionDeleted{}.EventType()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if d := log.Payload(t, 0).(posture.APISessionDeleted); d.ID != "apis1" || d.Reason != posture.EndLogout {
					t.Fatalf("deleted %+v", d)
				}
			}},
	}, serve(session))
}
