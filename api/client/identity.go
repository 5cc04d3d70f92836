package client

import (
	"net/http"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// IdentityStore is what the current-identity, MFA and external JWT signer
// operations read (projections.Store implements it).
type IdentityStore interface {
	Identity(id string) (posture.Identity, error)
	IdentityByExternalID(externalID string) (posture.Identity, error)
	Authenticator(id string) (posture.Authenticator, error)
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	IdentityAuthenticators(identityID string) ([]posture.Authenticator, error)
	MFA(identityID string) (posture.MFA, error)
	ExternalJWTSigners() ([]posture.ExternalJWTSigner, error)
	ExternalJWTSignerByIssuer(issuer string) (posture.ExternalJWTSigner, error)
	ClientInfo(identityID string) (posture.ClientInfo, error)
	IdentityEnrollments(identityID string) ([]posture.Enrollment, error)
}

// identityRoutes are the current identity's operations: MFA, authenticators,
// the identity itself, external JWT signers.
func (a *API) identityRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodPost, Path: "/authenticate/mfa", Access: api.Partial, Handler: a.authenticateMFA},
		{Method: http.MethodGet, Path: "/current-identity/mfa", Access: api.Partial, Handler: a.detailMFA},
		{Method: http.MethodPost, Path: "/current-identity/mfa", Access: api.Partial, Handler: a.enrollMFA},
		{Method: http.MethodDelete, Path: "/current-identity/mfa", Access: api.Session, Handler: a.deleteMFA},
		{Method: http.MethodPost, Path: "/current-identity/mfa/verify", Access: api.Partial, Handler: a.verifyMFA},
		{Method: http.MethodGet, Path: "/current-identity/mfa/qr-code", Access: api.Partial, Handler: a.mfaQRCode},
		{Method: http.MethodGet, Path: "/current-identity/mfa/recovery-codes", Access: api.Session, Handler: a.detailRecoveryCodes},
		{Method: http.MethodPost, Path: "/current-identity/mfa/recovery-codes", Access: api.Session, Handler: a.regenerateRecoveryCodes},
		{Method: http.MethodGet, Path: "/current-identity", Access: api.Session, Handler: a.currentIdentity},
		{Method: http.MethodGet, Path: "/current-identity/authenticators", Access: api.Session, Handler: a.listAuthenticators},
		{Method: http.MethodGet, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.detailAuthenticator},
		{Method: http.MethodPut, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.updateAuthenticator},
		{Method: http.MethodPatch, Path: "/current-identity/authenticators/:id", Access: api.Session, Handler: a.patchAuthenticator},
		{Method: http.MethodGet, Path: "/external-jwt-signers", Access: api.Public, Handler: a.listExternalJWTSigners},
	}
}
