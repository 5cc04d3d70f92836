package client

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// fakePosture is a PostureReader over fixed data: one service granted by
// policies whose evaluation is given.
type fakePosture struct {
	grants   []posture.Grant
	results  []posture.PolicyResult
	sessions []posture.SessionPosture
	evalAt   time.Time // the time Evaluate was last asked for
	changes  bool      // what ChangesPosture answers
}

func (f *fakePosture) ServicesFor(string, string) []posture.Grant { return f.grants }
func (f *fakePosture) Evaluate(_, _ string, _ []string, now time.Time) ([]posture.PolicyResult, error) {
	f.evalAt = now
	return f.results, nil
}
func (f *fakePosture) PostureData(string) (posture.IdentityPosture, []posture.SessionPosture, error) {
	return posture.IdentityPosture{}, f.sessions, nil
}
func (f *fakePosture) ChangesPosture(string, []posture.PostureResponse) (bool, error) {
	return f.changes, nil
}
func (f *fakePosture) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	if kind == posture.KindService && id == "svc1" {
		return json.RawMessage(`{"id":"svc1","name":"crm"}`), nil
	}
	return nil, posture.ErrNotFound
}

var handlerNow = time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)

// servePosture serves the posture-response operations of a caller over
// httptest, with the store and log given, and the writer's clock at
// handlerNow.
func servePosture(t *testing.T, store PostureReader, log *apitest.Log, method, path, body string) (*httptest.ResponseRecorder, api.ErrorBody) {
	t.Helper()
	pr := postureResponses{store: store, grace: 2 * time.Minute,
		writer: apitest.Writer(log, handlerNow)}
	e := echo.New()
	e.HTTPErrorHandler = api.ErrorHandler(slog.New(slog.DiscardHandler))
	caller := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			api.WithPrincipal(c, &api.Principal{Identity: posture.Identity{ID: "ident1"}, Session: posture.APISession{ID: "apis1", IdentityID: "ident1"}})
			return next(c)
		}
	}
	e.POST(clientPosturePath, pr.create, caller)
	e.POST(clientPosturePath+"-bulk", pr.createBulk, caller)
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	var eb api.ErrorBody
	if rec.Code >= 400 {
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil {
			t.Fatalf("error answer is not an envelope: %s", rec.Body)
		}
	}
	return rec, eb
}

const clientPosturePath = "/posture-response"

func mfaResult(check posture.Check) posture.PolicyResult {
	return posture.PolicyResult{PolicyID: "pol1", Passing: true, Checks: []posture.CheckResult{{Check: check, Pass: true}}}
}

func TestPostureResponseHandlers(t *testing.T) {
	passed := handlerNow.Add(-10 * time.Minute)
	session := []posture.SessionPosture{{APISessionID: "apis1", MFAPassedAt: &passed, WokenAt: &handlerNow}}
	grant := []posture.Grant{{ServiceID: "svc1", Policies: []string{"pol1"}}}
	onWake := posture.Check{ID: "chk1", TypeID: posture.CheckMFA, PromptOnWake: true, TimeoutSeconds: -1}
	for _, tc := range []struct {
		name       string
		store      *fakePosture
		logErr     error
		path, body string
		status     int
		code       string // error code, for an error
		field      string // the error's field
		services   string // the answer's services, as JSON
		appended   int
	}{
		{name: "OS response", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"chk-os","typeId":"OS","type":"Windows","version":"10.0.19045"}`, status: 201, services: `[]`, appended: 1},
		{name: "missing id", store: &fakePosture{}, path: clientPosturePath,
			body: `{"typeId":"OS","type":"Windows","version":"10.0.19045"}`, status: 400, code: posture.CodeCouldNotValidate, field: "id"},
		{name: "not JSON", store: &fakePosture{}, path: clientPosturePath, body: `{"id":`, status: 400, code: posture.CodeCouldNotParseBody},
		{name: "empty bulk: nothing recorded, answered as the controller answers it", store: &fakePosture{}, path: clientPosturePath + "-bulk", body: `[]`, status: 201, services: `[]`, appended: 0},
		{name: "bulk field names its index", store: &fakePosture{}, path: clientPosturePath + "-bulk",
			body: `[{"id":"a","typeId":"OS","type":"Windows","version":"10"},{"typeId":"OS"}]`, status: 400, code: posture.CodeCouldNotValidate, field: "[1].id"},
		{name: "a MAC address longer than any", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"m","typeId":"MAC","macAddresses":["aa:bb:cc:dd:ee:ff","` + strings.Repeat("a", api.MaxMAC+1) + `"]}`, status: 400, code: posture.CodeCouldNotValidate, field: "macAddresses[1]"},
		{name: "too many signers for a process", store: &fakePosture{}, path: clientPosturePath,
			body:   `{"id":"p","typeId":"PROCESS","path":"/bin/x","signerFingerprints":[` + strings.TrimSuffix(strings.Repeat(`"ab",`, api.MaxSigners+1), ",") + `]}`,
			status: 400, code: posture.CodeCouldNotValidate, field: "signerFingerprints[32]"},
		{name: "a version with a line break and an escape sequence", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"o","typeId":"OS","type":"Windows","version":"6.1\n\u001b[31m"}`, status: 400, code: posture.CodeCouldNotValidate, field: "version"},
		{name: "a process path with a bidirectional override", store: &fakePosture{}, path: clientPosturePath + "-bulk",
			body:   `[{"id":"o","typeId":"OS","type":"Windows","version":"10.0.19045"},{"id":"p","typeId":"PROCESS","path":"C:\\fdp\u202e.exe","isRunning":true}]`,
			status: 400, code: posture.CodeCouldNotValidate, field: "[1].path"},
		{name: "a MAC address with a NUL", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"m","typeId":"MAC","macAddresses":["aa:bb:cc:dd:ee:ff","aa\u0000"]}`, status: 400, code: posture.CodeCouldNotValidate, field: "macAddresses[1]"},
		{name: "a signer fingerprint with a tab", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"p","typeId":"PROCESS","path":"/bin/x","signerFingerprints":["ab\tcd"]}`, status: 400, code: posture.CodeCouldNotValidate, field: "signerFingerprints[0]"},
		{name: "a domain in another script, with a joiner", store: &fakePosture{}, path: clientPosturePath,
			body: `{"id":"d","typeId":"DOMAIN","domain":"कंपनी\u200d.local"}`, status: 201, services: `[]`, appended: 1},
		{name: "log refuses", store: &fakePosture{}, logErr: errors.New("no quorum"), path: clientPosturePath,
			body: `{"id":"chk-os","typeId":"OS","type":"Windows","version":"10"}`, status: 500, code: posture.CodeUnhandled},
		{name: "wake shortens an MFA check that prompts on it", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: session, results: []posture.PolicyResult{mfaResult(onWake)}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","woken":true}`, status: 201,
			services: `[{"id":"svc1","name":"crm","postureQueryType":"MFA","timeout":-1,"timeoutRemaining":120}]`, appended: 1},
		{name: "wake leaves a timeout that ends within the grace", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: session, results: []posture.PolicyResult{mfaResult(posture.Check{ID: "chk2", TypeID: posture.CheckMFA, PromptOnWake: true, TimeoutSeconds: 660})}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","woken":true}`, status: 201, services: `[]`, appended: 1},
		{name: "wake with a timeout beyond the grace", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: session, results: []posture.PolicyResult{mfaResult(posture.Check{ID: "chk3", TypeID: posture.CheckMFA, PromptOnWake: true, TimeoutSeconds: 3600})}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","woken":true}`, status: 201,
			services: `[{"id":"svc1","name":"crm","postureQueryType":"MFA","timeout":3600,"timeoutRemaining":120}]`, appended: 1},
		{name: "wake with a timeout beyond the grace, ignoring legacy endpoints (this client is one)", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: session, results: []posture.PolicyResult{mfaResult(posture.Check{ID: "chk4", TypeID: posture.CheckMFA, PromptOnWake: true, TimeoutSeconds: 3600, IgnoreLegacyEndpoints: true})}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","woken":true}`, status: 201,
			services: `[{"id":"svc1","name":"crm","postureQueryType":"MFA","timeout":3600,"timeoutRemaining":120}]`, appended: 1},
		{name: "unlock does not shorten a wake-only check", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: session, results: []posture.PolicyResult{mfaResult(onWake)}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","unlocked":true}`, status: 201, services: `[]`, appended: 1},
		{name: "wake without an MFA pass", path: clientPosturePath,
			store: &fakePosture{grants: grant, sessions: []posture.SessionPosture{{APISessionID: "apis1"}}, results: []posture.PolicyResult{mfaResult(onWake)}},
			body:  `{"id":"state","typeId":"ENDPOINT_STATE","woken":true}`, status: 201, services: `[]`, appended: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &apitest.Log{Err: tc.logErr}
			rec, eb := servePosture(t, tc.store, log, http.MethodPost, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.code != "" {
				if eb.Error.Code != tc.code {
					t.Fatalf("error code %s, want %s: %s", eb.Error.Code, tc.code, rec.Body)
				}
				if cause, _ := eb.Error.Cause.(map[string]any); tc.field != "" && (cause == nil || cause["field"] != tc.field) {
					t.Fatalf("error cause %v, want field %s", eb.Error.Cause, tc.field)
				}
				if strings.Contains(rec.Body.String(), "no quorum") {
					t.Fatalf("an internal error reached the caller: %s", rec.Body)
				}
			}
			if len(log.Events) != tc.appended {
				t.Fatalf("%d events appended, want %d", len(log.Events), tc.appended)
			}
			if tc.appended == 0 {
				return
			}
			e := log.Events[0]
			pl, err := e.Decode()
			if err != nil {
				t.Fatal(err)
			}
			rec2, ok := pl.(posture.PostureRecorded)
			if !ok || rec2.IdentityID != "ident1" || rec2.APISessionID != "apis1" || len(rec2.Responses) != 1 || !e.At.Equal(handlerNow) || e.Actor != "ident1" {
				t.Fatalf("appended %s %+v at %s by %s", e.Type, pl, e.At, e.Actor)
			}
			var answer struct {
				Data struct {
					Services json.RawMessage `json:"services"`
				} `json:"data"`
			}
			body, _ := io.ReadAll(rec.Body)
			if err := json.Unmarshal(body, &answer); err != nil {
				t.Fatal(err)
			}
			if string(answer.Data.Services) != tc.services {
				t.Fatalf("services %s, want %s", answer.Data.Services, tc.services)
			}
			if len(tc.store.grants) > 0 && tc.services != `[]` && !tc.store.evalAt.Equal(e.At) {
				t.Fatalf("evaluated at %s, want the event's time %s", tc.store.evalAt, e.At)
			}
		})
	}
}

// TestPostureBudgetCountsRequests: a posture response costs the budget its
// event as the log keeps it and api.RequestCost more, so that a flood of
// tiny bodies runs out as the log grows, not at their size alone, and a
// body of characters JSON escapes (< is kept as \u003c) costs what it
// keeps, not its size. A response that changes the identity's values
// costs api.TransitionCost more, for the transitions it may derive.
func TestPostureBudgetCountsRequests(t *testing.T) {
	for _, c := range []struct {
		body    string
		changes bool
	}{
		{`{"id":"x","typeId":"MAC","macAddresses":[]}`, false},
		{`{"id":"x","typeId":"OS","type":"Linux","version":"` + strings.Repeat("<", 200) + `"}`, false},
		{`{"id":"x","typeId":"OS","type":"Linux","version":"6.1.0"}`, true},
	} {
		body := c.body
		log := &apitest.Log{}
		budget := api.NewBudget(1, api.MaxBody, func() time.Time { return handlerNow })
		pr := postureResponses{store: &fakePosture{changes: c.changes}, grace: 2 * time.Minute, writer: apitest.Writer(log, handlerNow), budget: budget}
		e := echo.New()
		e.HTTPErrorHandler = api.ErrorHandler(slog.New(slog.DiscardHandler))
		e.POST(clientPosturePath, pr.create, func(next echo.HandlerFunc) echo.HandlerFunc {
			return func(c echo.Context) error {
				api.WithPrincipal(c, &api.Principal{Identity: posture.Identity{ID: "ident1"}, Session: posture.APISession{ID: "apis1", IdentityID: "ident1"}})
				return next(c)
			}
		})
		passed := 0
		for ; passed < 100_000; passed++ {
			req := httptest.NewRequest(http.MethodPost, clientPosturePath, strings.NewReader(body))
			req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Code == http.StatusTooManyRequests {
				break
			}
		}
		kept := len(log.Events[0].Data)
		cost := kept + api.RequestCost
		if c.changes {
			cost += api.TransitionCost
		}
		if want := api.MaxBody / cost; passed != want || len(log.Events) != passed {
			t.Fatalf("%d responses of %d bytes (%d kept) passed a budget of %d bytes, %d appended; want %d", passed, len(body), kept, api.MaxBody, len(log.Events), want)
		}
		if strings.Contains(body, "<") && kept < 2*len(body) {
			t.Fatalf("a body of %d bytes of < kept as %d bytes", len(body), kept)
		}
	}
}
