package client

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// laptopPassword is the current password of the laptop's authenticator
// (hashed once: argon2id costs tens of milliseconds).
const laptopPassword = "laptop-password"

var laptopHash = sync.OnceValue(func() string {
	h, err := api.HashPassword(context.Background(), laptopPassword)
	if err != nil {
		panic(err)
	}
	return h
})

// withAuthenticators gives the laptop a password authenticator and a cert
// one, and the stranger a password authenticator.
func withAuthenticators(t *testing.T, s *memStore) {
	s.authenticators["auth1"] = posture.Authenticator{ID: "auth1", IdentityID: "ident1", Method: posture.MethodPassword, Username: "laptop-user",
		PasswordHash: laptopHash(), Tags: posture.Tags{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	s.authenticators["auth2"] = posture.Authenticator{ID: "auth2", IdentityID: "ident1", Method: posture.MethodCert, Fingerprint: "fp-laptop",
		IsIssuedByNetwork: false, Tags: posture.Tags{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	s.authenticators["auth3"] = posture.Authenticator{ID: "auth3", IdentityID: "ident2", Method: posture.MethodPassword, Username: "stranger-user",
		PasswordHash: "$argon2id$not-checked", Tags: posture.Tags{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	s.enrollments = []posture.Enrollment{{ID: "enr1", Method: posture.EnrollOTT, IdentityID: "ident1", JWT: "jwt", Token: "tok", ExpiresAt: handlerNow.Add(1)}}
	s.signers = []posture.ExternalJWTSigner{
		{ID: "sig1", Name: "idp", Issuer: "https://idp.example", Enabled: true, ExternalAuthURL: "https://idp.example/auth", ClientID: "postured", Scopes: []string{"openid"}},
		{ID: "sig2", Name: "old-idp", Issuer: "https://old.example", Enabled: false},
	}
}

// TestCurrentIdentityHandlers: the caller's identity, its authenticators,
// a password change (the current password first, never echoed), and the
// enabled external JWT signers.
func TestCurrentIdentityHandlers(t *testing.T) {
	runClient(t, caller, []apitest.Case{
		{Name: "currentIdentity", Method: http.MethodGet, Path: "/current-identity", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v struct {
					ID             string                    `json:"id"`
					HasAPISession  bool                      `json:"hasApiSession"`
					IsMFAEnabled   bool                      `json:"isMfaEnabled"`
					Enrollment     map[string]map[string]any `json:"enrollment"`
					Authenticators map[string]any            `json:"authenticators"`
				}
				r.DataInto(t, &v)
				if v.ID != "ident1" || !v.HasAPISession || v.IsMFAEnabled || v.Enrollment["ott"]["token"] != "tok" || v.Authenticators["updb"] == nil ||
					strings.Contains(string(r.Body), "argon2") {
					t.Fatalf("identity %s", r.Data)
				}
			}},
		{Name: "listAuthenticators: the caller's own, without hashes", Method: http.MethodGet, Path: "/current-identity/authenticators", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []api.AuthenticatorView
				r.DataInto(t, &l)
				if len(l) != 2 || l[0].ID != "auth1" || l[1].ID != "auth2" || strings.Contains(string(r.Body), "argon2") {
					t.Fatalf("authenticators %s", r.Body)
				}
			}},
		{Name: "detailAuthenticator: another identity's is not found", Method: http.MethodGet, Path: "/current-identity/authenticators/auth3",
			Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "patchAuthenticator: a new username", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `","username":"laptop-2"}`, Status: http.StatusOK, Appended: []string{posture.Updated[posture.Authenticator]{}.EventType()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				au := payload[posture.Updated[posture.Authenticator]](t, log).Entity
				if au.Username != "laptop-2" || au.PasswordHash != laptopHash() || !au.UpdatedAt.Equal(handlerNow) {
					t.Fatalf("updated %+v", au)
				}
			}},
		{Name: "updateAuthenticator: a new password is hashed", Method: http.MethodPut, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `","username":"laptop-user","password":"another-password"}`, Status: http.StatusOK,
			Appended: []string{posture.Updated[posture.Authenticator]{}.EventType()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				au := payload[posture.Updated[posture.Authenticator]](t, log).Entity
				// The new hash is sealed for the identity (the fake seals
				// reversibly); the legacy clear hash is gone.
				hash, sealed := strings.CutPrefix(au.PasswordHashSealed, "sealed:ident1:"+posture.FieldPasswordHash+":")
				if ok, err := api.CheckPassword(t.Context(), hash, "another-password"); !sealed || au.PasswordHash != "" || !ok || err != nil {
					t.Fatalf("updated %+v", au)
				}
			}},
		{Name: "updateAuthenticator: username and password are required", Method: http.MethodPut, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "username"},
		{Name: "patchAuthenticator: tags that would not show as they read", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `","tags":{"evil\u202egpj.exe":"line1\u2028line2"}}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "tags"},
		{Name: "patchAuthenticator: a wrong current password", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"wrong-password","username":"laptop-2"}`, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		{Name: "patchAuthenticator: currentPassword missing", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"username":"laptop-2"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "currentPassword"},
		{Name: "patchAuthenticator: a password of the wrong type is not echoed", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `","password":["secret-in-a-list"]}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "password",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(string(r.Body), "secret-in-a-list") || strings.Contains(string(r.Body), laptopPassword) {
					t.Fatalf("a password reached the answer: %s", r.Body)
				}
			}},
		{Name: "patchAuthenticator: a username in use", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `{"currentPassword":"` + laptopPassword + `","username":"stranger-user"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "username"},
		{Name: "patchAuthenticator: a cert authenticator", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth2",
			Body: `{"currentPassword":"` + laptopPassword + `"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "method"},
		{Name: "patchAuthenticator: another identity's is not found", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth3",
			Body: `{"currentPassword":"` + laptopPassword + `"}`, Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "patchAuthenticator: not an object", Method: http.MethodPatch, Path: "/current-identity/authenticators/auth1",
			Body: `"` + laptopPassword + `"`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "listExternalJWTSigners: the enabled ones", Method: http.MethodGet, Path: "/external-jwt-signers", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []signerView
				r.DataInto(t, &l)
				if len(l) != 1 || l[0].ID != "sig1" || *l[0].ExternalAuthURL != "https://idp.example/auth" || l[0].Scopes[0] != "openid" {
					t.Fatalf("signers %s", r.Data)
				}
			}},
	}, withAuthenticators)
}
