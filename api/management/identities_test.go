package management

import (
	"encoding/json"
	"errors"
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

// identityStore is a Store with one identity; the methods an identity's
// view does not read are left to the embedded nil Store (a call panics and
// names the method).
type identityStore struct {
	Store
	identity posture.Identity
	authErr  error
}

func (s identityStore) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	if kind != posture.KindIdentity || id != s.identity.ID {
		return nil, posture.ErrNotFound
	}
	return json.Marshal(s.identity)
}

func (s identityStore) IdentityAuthenticators(string) ([]posture.Authenticator, error) {
	return []posture.Authenticator{{ID: "auth1", IdentityID: s.identity.ID, Method: posture.MethodPassword, Username: "laptop"}}, s.authErr
}

func (s identityStore) ClientInfo(id string) (posture.ClientInfo, error) {
	return posture.ClientInfo{IdentityID: id}, nil
}

func (s identityStore) HasAPISession(string) (bool, error) { return true, nil }

// mfaStore answers the MFA reads of api.Login.
type mfaStore struct {
	api.LoginStore
	mfa posture.MFA
	err error
}

func (s mfaStore) MFA(string) (posture.MFA, error) { return s.mfa, s.err }

// TestIdentityDetail: GET /identities/:id answers the identity with what
// it reads beside it, and a read that fails (other than not found) fails
// the request with 500, without showing the cause.
func TestIdentityDetail(t *testing.T) {
	at := time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)
	laptop := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}, CreatedAt: at, UpdatedAt: at}
	for _, tc := range []struct {
		name    string
		id      string
		store   identityStore
		login   mfaStore
		status  int
		code    string
		checkOK func(t *testing.T, data map[string]any)
	}{
		{name: "found, MFA verified", id: "ident1", store: identityStore{identity: laptop}, login: mfaStore{mfa: posture.MFA{Verified: true}},
			status: http.StatusOK, checkOK: func(t *testing.T, d map[string]any) {
				if d["name"] != "laptop" || d["isMfaEnabled"] != true || d["hasApiSession"] != true {
					t.Fatalf("identity %v", d)
				}
			}},
		{name: "no MFA enrollment reads as not enabled", id: "ident1", store: identityStore{identity: laptop}, login: mfaStore{err: posture.ErrNotFound},
			status: http.StatusOK, checkOK: func(t *testing.T, d map[string]any) {
				if d["isMfaEnabled"] != false {
					t.Fatalf("identity %v", d)
				}
			}},
		{name: "unknown identity", id: "ident9", store: identityStore{identity: laptop}, login: mfaStore{err: posture.ErrNotFound},
			status: http.StatusNotFound, code: posture.CodeNotFound},
		{name: "authenticators cannot be read", id: "ident1", store: identityStore{identity: laptop, authErr: errors.New("pebble: disk I/O")},
			login: mfaStore{err: posture.ErrNotFound}, status: http.StatusInternalServerError, code: posture.CodeUnhandled},
		{name: "MFA cannot be read", id: "ident1", store: identityStore{identity: laptop}, login: mfaStore{err: errors.New("pebble: disk I/O")},
			status: http.StatusInternalServerError, code: posture.CodeUnhandled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &API{Store: tc.store, Login: &api.Login{Store: tc.login}, Writer: apitest.Writer(&apitest.Log{}, handlerNow)}
			e := echo.New()
			e.HTTPErrorHandler = api.ErrorHandler(slog.New(slog.DiscardHandler))
			e.GET("/identities/:id", a.identities().detail)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/identities/"+tc.id, nil))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var env struct {
				Data  map[string]any `json:"data"`
				Error api.APIError   `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
				t.Fatalf("not an envelope: %s", rec.Body)
			}
			if tc.code != "" {
				if env.Error.Code != tc.code {
					t.Fatalf("error %s, want %s", env.Error.Code, tc.code)
				}
				if strings.Contains(rec.Body.String(), "disk") {
					t.Fatalf("the cause reached the caller: %s", rec.Body)
				}
				return
			}
			tc.checkOK(t, env.Data)
		})
	}
}
