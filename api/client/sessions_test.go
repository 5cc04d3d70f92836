package client

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// The model of the session and service tests: the crm service, granted to
// the laptop for Dial by pol1, which requires an OS check.
var (
	crm     = posture.Service{ID: "svc1", Name: "crm", RoleAttributes: []string{"crm"}, Configs: []string{}, TerminatorStrategy: "smartrouting", Tags: posture.Tags{}}
	erp     = posture.Service{ID: "svc2", Name: "erp", RoleAttributes: []string{"erp"}, Configs: []string{}, Tags: posture.Tags{}}
	osCheck = posture.Check{ID: "chk1", Name: "windows", TypeID: posture.CheckOS}
	router  = posture.EdgeRouter{ID: "er1", Name: "edge-1", Hostname: "edge-1.example", RoleAttributes: []string{}, Tags: posture.Tags{}}
)

// grantCRM sets the store up with crm granted through pol1, passing or
// not.
func grantCRM(passing bool) func(t *testing.T, s *memStore) {
	return func(t *testing.T, s *memStore) {
		s.put(t, crm)
		s.put(t, erp)
		s.put(t, osCheck)
		s.put(t, router)
		s.grants = []posture.Grant{{ServiceID: "svc1", Policies: []string{"pol1"}}}
		s.reachable["ident1"], s.reachable["svc1"] = []string{"er1"}, []string{"er1"}
		check := posture.CheckResult{Check: osCheck, Pass: passing, Actual: json.RawMessage(`{"type":"Windows","version":"6.1.7601"}`),
			Expected: json.RawMessage(`[{"type":"Windows","versions":[">=10.0.19041"]}]`)}
		s.results = []posture.PolicyResult{{PolicyID: "pol1", PolicyName: "crm-dial", Type: posture.Dial, Passing: passing, Checks: []posture.CheckResult{check}}}
	}
}

// TestSessionHandlers: a session is granted by one passing policy, refused
// (and the refusal recorded) when none passes, and listed, read and
// deleted by its own identity only.
func TestSessionHandlers(t *testing.T) {
	own := posture.Session{ID: "ses1", IdentityID: "ident1", APISessionID: "apis1", ServiceID: "svc1", Type: posture.Dial,
		TokenSealed: "sealed:ident1:" + posture.FieldSessionToken + ":jwt-of-ses1", CreatedAt: handlerNow.Add(-time.Minute)}
	theirs := posture.Session{ID: "ses2", IdentityID: "ident2", APISessionID: "apis2", ServiceID: "svc1", Type: posture.Dial, CreatedAt: handlerNow}
	sibling := posture.Session{ID: "ses3", IdentityID: "ident1", APISessionID: "apis3", ServiceID: "svc1", Type: posture.Dial, CreatedAt: handlerNow}
	withSessions := func(passing bool, sessions ...posture.Session) func(t *testing.T, s *memStore) {
		return func(t *testing.T, s *memStore) {
			grantCRM(passing)(t, s)
			for _, x := range sessions {
				s.sessions[x.ID] = x
			}
		}
	}
	runClientCases(t, caller, []clientCase{
		{grantCRM(true), apitest.Case{Name: "createSession: granted", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","type":"Dial"}`,
			Status: http.StatusCreated, Appended: []string{posture.TypeSessionCreated},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				created := payload[posture.SessionCreated](t, log)
				var v sessionView
				r.DataInto(t, &v)
				if v.ID != created.Session.ID || v.Service.Name != "crm" || v.Token == "" || strings.HasPrefix(v.Token, "sealed:") ||
					!strings.HasPrefix(created.Session.TokenSealed, "sealed:ident1:") || len(created.Policies) != 1 || len(v.EdgeRouters) != 1 {
					t.Fatalf("session %s from %+v", r.Data, created)
				}
			}}},
		{grantCRM(true), apitest.Case{Name: "createSession: type defaults to Dial, in any case", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","type":"dial"}`,
			Status: http.StatusCreated, Appended: []string{posture.TypeSessionCreated}}},
		{withSessions(true, own), apitest.Case{Name: "createSession: the API session's session of the service is answered again", Method: http.MethodPost, Path: "/sessions",
			Body: `{"serviceId":"svc1"}`, Status: http.StatusCreated,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v sessionView
				r.DataInto(t, &v)
				if v.ID != "ses1" || v.Token != "jwt-of-ses1" {
					t.Fatalf("session %s", r.Data)
				}
			}}},
		{grantCRM(false), apitest.Case{Name: "createSession: refused and recorded", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","type":"Dial"}`,
			Status: http.StatusConflict, Code: posture.CodeInvalidPosture, Appended: []string{posture.TypeSessionDenied},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				d := payload[posture.SessionDenied](t, log)
				if d.IdentityID != "ident1" || d.ServiceName != "crm" || len(d.PolicyFailures) != 1 || d.PolicyFailures[0].Checks[0].PostureCheckID != "chk1" ||
					string(d.PolicyFailures[0].Checks[0].ActualValue) != `{"type":"Windows","version":"6.1.7601"}` {
					t.Fatalf("denied %+v", d)
				}
				cause, _ := json.Marshal(r.Error.Cause)
				if !strings.Contains(string(cause), `"data":{"pol1":[{"id":"chk1","isPassing":false,"typeId":"OS"}]}`) {
					t.Fatalf("cause %s", cause)
				}
			}}},
		{grantCRM(true), apitest.Case{Name: "createSession: a service without a policy reads as unknown", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc2"}`,
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{grantCRM(true), apitest.Case{Name: "createSession: service unknown", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc9"}`,
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{grantCRM(true), apitest.Case{Name: "createSession: serviceId missing", Method: http.MethodPost, Path: "/sessions", Body: `{"type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "serviceId"}},
		{grantCRM(true), apitest.Case{Name: "createSession: type unknown", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","type":"Host"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "type"}},
		{grantCRM(true), apitest.Case{Name: "createSession: serviceId of the wrong type", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":1}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody}},
		{grantCRM(true), apitest.Case{Name: "createSession: malformed JSON", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1"`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody}},
		{grantCRM(true), apitest.Case{Name: "createSession: tags that are not strings", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","tags":{"a":{"b":1}}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "tags.a"}},
		{grantCRM(true), apitest.Case{Name: "createSession: a tag value with a control character", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","tags":{"k":"v\u202e\u001b[2J"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "tags.k"}},
		{grantCRM(true), apitest.Case{Name: "createSession: a tag name with a control character", Method: http.MethodPost, Path: "/sessions", Body: `{"serviceId":"svc1","tags":{"k\u0000":"v"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "tags"}},
		{withSessions(true, own), apitest.Case{Name: "createSession: bad tags are refused also when the session is answered again", Method: http.MethodPost, Path: "/sessions",
			Body: `{"serviceId":"svc1","tags":{"a":{"b":1}}}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "tags.a"}},
		{withSessions(true, own, theirs, sibling), apitest.Case{Name: "listSessions: the identity's own, from each of its API sessions", Method: http.MethodGet, Path: "/sessions", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []sessionView
				r.DataInto(t, &l)
				if len(l) != 2 || l[0].ID != "ses1" || l[0].Token != "jwt-of-ses1" || l[1].ID != "ses3" {
					t.Fatalf("sessions %s", r.Data)
				}
			}}},
		{withSessions(true, own, theirs), apitest.Case{Name: "detailSession: another identity's is not found", Method: http.MethodGet, Path: "/sessions/ses2",
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{withSessions(true, own), apitest.Case{Name: "deleteSession", Method: http.MethodDelete, Path: "/sessions/ses1", Status: http.StatusOK, Appended: []string{posture.TypeSessionDeleted}}},
		{withSessions(true, own, theirs), apitest.Case{Name: "deleteSession: another identity's is not found", Method: http.MethodDelete, Path: "/sessions/ses2",
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
	})
}

// TestServiceHandlers: the services an identity may reach with their
// posture queries, the edge routers and the service-update indicator.
func TestServiceHandlers(t *testing.T) {
	admin := *caller
	admin.Identity.IsAdmin = true
	cases := []apitest.Case{
		{Name: "listServices: with the policy's posture queries", Method: http.MethodGet, Path: "/services", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []serviceView
				r.DataInto(t, &l)
				if len(l) != 1 || l[0].Name != "crm" || len(l[0].Permissions) != 1 || l[0].Permissions[0] != posture.Dial ||
					len(l[0].PostureQueries) != 1 || l[0].PostureQueries[0].PostureQueries[0].QueryType != "OS" || l[0].PostureQueries[0].IsPassing {
					t.Fatalf("services %s", r.Data)
				}
			}},
		{Name: "listServices: a roleFilter that matches none", Method: http.MethodGet, Path: "/services?roleFilter=%23erp", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if string(r.Data) != "[]" {
					t.Fatalf("services %s", r.Data)
				}
			}},
		{Name: "detailService", Method: http.MethodGet, Path: "/services/svc1", Status: http.StatusOK},
		{Name: "detailService: one not granted is not found", Method: http.MethodGet, Path: "/services/svc2", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "serviceEdgeRouters", Method: http.MethodGet, Path: "/services/svc1/edge-routers", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(string(r.Data), `"hostname":"edge-1.example"`) {
					t.Fatalf("routers %s", r.Data)
				}
			}},
		{Name: "serviceEdgeRouters: a session token that is no JWT", Method: http.MethodGet, Path: "/services/svc1/edge-routers",
			Header: map[string]string{"session-token": "garbage"}, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		{Name: "serviceEdgeRouters: a service not granted", Method: http.MethodGet, Path: "/services/svc2/edge-routers", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "serviceTerminators: none", Method: http.MethodGet, Path: "/services/svc1/terminators", Status: http.StatusOK},
		{Name: "serviceUpdates: at the earliest the API session's start", Method: http.MethodGet, Path: "/current-api-session/service-updates", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if d := string(r.Data); d != `{"lastChangeAt":"2026-04-01T11:00:00.000Z"}` {
					t.Fatalf("updates %s", d)
				}
			}},
		{Name: "currentIdentityEdgeRouters", Method: http.MethodGet, Path: "/current-identity/edge-routers", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(string(r.Data), `"id":"er1"`) {
					t.Fatalf("routers %s", r.Data)
				}
			}},
	}
	runClient(t, caller, cases, grantCRM(false))
	// An admin may see any service that exists, granted or not.
	runClient(t, &admin, []apitest.Case{
		{Name: "serviceTerminators: an admin sees any service that exists", Method: http.MethodGet, Path: "/services/svc2/terminators", Status: http.StatusOK},
	}, grantCRM(true))
}

// TestSessionTokenLayouts: GET /services/{id}/edge-routers takes a
// session-token of the layout the Go SDK reads (the service as subject, the
// session as the token's id) and one of the earlier layout (the session as
// subject), for the session's own service only.
func TestSessionTokenLayouts(t *testing.T) {
	ca, signer := testPKI(t)
	sign := func(claims jwt.Claims) string {
		tok, err := signer.Sign(claims)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := jwt.NewNumericDate(handlerNow)
	current := sign(sessionClaims{jwtRegistered: jwt.RegisteredClaims{Subject: "svc1", ID: "ses1", IssuedAt: now},
		APISessionID: "apis1", IdentityID: "ident1", Type: posture.Dial})
	earlier := sign(jwt.MapClaims{"sub": "ses1", "jti": posture.NewToken(), "iat": now, "identityId": "ident1", "serviceId": "svc1", "type": posture.Dial})
	forOther := sign(sessionClaims{jwtRegistered: jwt.RegisteredClaims{Subject: "svc1", ID: "ses2", IssuedAt: now}})
	cases := []apitest.Case{
		{Name: "the current layout", Method: http.MethodGet, Path: "/services/svc1/edge-routers",
			Header: map[string]string{"session-token": current}, Status: http.StatusOK},
		{Name: "the earlier layout", Method: http.MethodGet, Path: "/services/svc1/edge-routers",
			Header: map[string]string{"session-token": earlier}, Status: http.StatusOK},
		{Name: "another identity's session", Method: http.MethodGet, Path: "/services/svc1/edge-routers",
			Header: map[string]string{"session-token": forOther}, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		{Name: "another service", Method: http.MethodGet, Path: "/services/svc2/edge-routers",
			Header: map[string]string{"session-token": current}, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		{Name: "the earlier layout, another service", Method: http.MethodGet, Path: "/services/svc2/edge-routers",
			Header: map[string]string{"session-token": earlier}, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		// A session stored with a token of the earlier layout is answered
		// with one of the current layout.
		{Name: "a session made by an earlier version", Method: http.MethodGet, Path: "/sessions/ses1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v sessionView
				r.DataInto(t, &v)
				var claims sessionClaims
				if _, _, err := jwt.NewParser().ParseUnverified(v.Token, &claims); err != nil || claims.Subject != "svc1" || claims.ID != "ses1" ||
					claims.APISessionID != "apis1" || claims.IdentityID != "ident1" || claims.Type != posture.Dial {
					t.Fatalf("token %s: %+v %v", v.Token, claims, err)
				}
			}},
	}
	apitest.Run(t, cases, func(t *testing.T, c apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		store, log := newMemStore(), &apitest.Log{}
		store.identities[laptop.ID], store.identities[stranger.ID] = laptop, stranger
		grantCRM(true)(t, store)
		store.sessions["ses1"] = posture.Session{ID: "ses1", IdentityID: "ident1", APISessionID: "apis1", ServiceID: "svc1", Type: posture.Dial,
			TokenSealed: "sealed:ident1:" + posture.FieldSessionToken + ":" + earlier}
		store.sessions["ses2"] = posture.Session{ID: "ses2", IdentityID: "ident2", APISessionID: "apis2", ServiceID: "svc1", Type: posture.Dial}
		return newClientAPI(store, log, ca, signer).Routes(), caller, log
	})
}
