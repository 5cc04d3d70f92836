package client

import (
	"net/http"
	"strings"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// IdentityStore is what the current-identity, MFA and external JWT signer
// operations read (projections.Store implements it).
type IdentityStore interface {
	AuthenticatorReader
	MFAReader
	ExtJWTStore
	ExternalJWTSigners() ([]posture.ExternalJWTSigner, error)
	ClientInfo(identityID string) (posture.ClientInfo, error)
	IdentityEnrollments(identityID string) ([]posture.Enrollment, error)
	// EnrollmentByUsername finds the pending updb enrollment that holds a
	// username: a new username is free of authenticators and of those.
	EnrollmentByUsername(username string) (posture.Enrollment, error)
}

// AuthenticatorReader is what the current identity's authenticator
// operations read (currentidentity.go).
type AuthenticatorReader interface {
	Authenticator(id string) (posture.Authenticator, error)
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	IdentityAuthenticators(identityID string) ([]posture.Authenticator, error)
}

// MFAReader is what the MFA operations read: the identity's enrollment
// (mfa.go).
type MFAReader interface {
	MFA(identityID string) (posture.MFA, error)
}

// ExtJWTStore is what the verifier of external JWTs reads: the signer of
// an issuer, and the identity a token names (extjwt.go).
type ExtJWTStore interface {
	ExternalJWTSignerByIssuer(issuer string) (posture.ExternalJWTSigner, error)
	Identity(id string) (posture.Identity, error)
	IdentityByExternalID(externalID string) (posture.Identity, error)
}

// SharedRoutes are the client API's operations the management API serves
// too, as OpenZiti's does: an admin who logs in there with MFA finishes the
// login there (the partial API session is the same); the current identity,
// its MFA and its authenticators (read, changed, a certificate extended),
// as the ziti CLI manages an admin's own; and the public enrollment
// documents. What a client's session may do there, only an admin's may do
// on the management API.
func (a *API) SharedRoutes() []api.Route {
	var out []api.Route
	for _, r := range append(a.identityRoutes(), a.enrollRoutes()...) {
		shared := r.Path == "/authenticate/mfa" || r.Path == "/.well-known/est/cacerts" || r.Path == "/network-jwts" ||
			strings.HasPrefix(r.Path, "/current-identity")
		if !shared {
			continue
		}
		if r.Access == api.Session || r.Access == api.Partial && r.Path != "/authenticate/mfa" {
			r.Access = api.Admin
		}
		out = append(out, r)
	}
	return out
}

// identityRoutes are the current identity's operations: MFA, authenticators,
// the identity itself, external JWT signers.
func (a *API) identityRoutes() []api.Route {
	m := a.mfa()
	return []api.Route{
		{Method: http.MethodPost, Path: "/authenticate/mfa", Access: api.Partial, Handler: m.authenticateMFA},
		{Method: http.MethodGet, Path: "/current-identity/mfa", Access: api.Partial, Handler: m.detailMFA},
		{Method: http.MethodPost, Path: "/current-identity/mfa", Access: api.Partial, Handler: m.enrollMFA},
		{Method: http.MethodDelete, Path: "/current-identity/mfa", Access: api.Session, Handler: m.deleteMFA},
		{Method: http.MethodPost, Path: "/current-identity/mfa/verify", Access: api.Partial, Handler: m.verifyMFA},
		{Method: http.MethodGet, Path: "/current-identity/mfa/qr-code", Access: api.Partial, Handler: m.mfaQRCode},
		{Method: http.MethodGet, Path: "/current-identity/mfa/recovery-codes", Access: api.Session, Handler: m.detailRecoveryCodes},
		{Method: http.MethodPost, Path: "/current-identity/mfa/recovery-codes", Access: api.Session, Handler: m.regenerateRecoveryCodes},
		{Method: http.MethodGet, Path: "/current-identity", Access: api.Session, Handler: a.currentIdentity},
		{Method: http.MethodGet, Path: "/current-identity/authenticators", Access: api.Session, Handler: a.listAuthenticators},
		{Method: http.MethodGet, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.detailAuthenticator},
		{Method: http.MethodPut, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.updateAuthenticator},
		{Method: http.MethodPatch, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.patchAuthenticator},
		{Method: http.MethodGet, Path: "/external-jwt-signers", Access: api.Public, Handler: a.listExternalJWTSigners},
	}
}
