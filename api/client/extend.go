package client

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// extendable reads one of the caller's cert authenticators issued by the
// network, the only kind that can be extended.
func (a *API) extendable(c echo.Context, id string) (posture.Authenticator, error) {
	au, err := a.ownAuthenticator(c, id)
	if err != nil {
		return au, err
	}
	if au.Method != posture.MethodCert {
		return au, posture.Invalid("id", "only a cert authenticator can be extended", au.Method)
	}
	if !au.IsIssuedByNetwork {
		return au, posture.Invalid("id", "only a certificate issued by this network can be extended", au.ID)
	}
	return au, nil
}

// presents reports whether the request's TLS client certificate is the
// certificate with the fingerprint.
func presents(c echo.Context, fingerprint string) bool {
	chain := peerChain(c)
	return len(chain) > 0 && pki.Fingerprint(chain[0]) == fingerprint
}

type extendResponse struct {
	ClientCert string `json:"clientCert"`
	CA         string `json:"ca"`
}

// extendAuthenticator is POST /current-identity/authenticators/:id/extend
// {clientCertCsr}: a new certificate for a cert authenticator issued by the
// network. The request must present the authenticator's current
// certificate over mutual TLS. The old certificate stays in force until
// extend-verify.
func (a *API) extendAuthenticator(c echo.Context) error {
	id := c.Param("id")
	au, err := a.extendable(c, id)
	if err != nil {
		return err
	}
	if !presents(c, au.Fingerprint) {
		return &posture.Error{Code: posture.CodeUnauthorized, Message: "extension must be requested with the authenticator's current client certificate on the TLS connection"}
	}
	var req struct {
		ClientCertCSR string `json:"clientCertCsr"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	if req.ClientCertCSR == "" {
		return posture.Invalid("clientCertCsr", "is required: a PEM certificate signing request", nil)
	}
	cert, certPEM, err := a.sign("clientCertCsr", []byte(req.ClientCertCSR), pki.SignRequest{CommonName: au.IdentityID, Usage: pki.UsageClient})
	if err != nil {
		return err
	}
	x := posture.CertExtension{
		AuthenticatorID: au.ID, IdentityID: au.IdentityID, CertPEM: string(certPEM),
		Fingerprint: pki.Fingerprint(cert), CreatedAt: a.Writer.Now().UTC(),
	}
	err = a.Writer.Model(c, api.Budgeted(c, a.Budget, au.IdentityID, func() ([]posture.Payload, error) {
		cur, err := a.extendable(c, id)
		if err != nil {
			return nil, err
		}
		if cur.Fingerprint != au.Fingerprint {
			return nil, &posture.Error{Code: posture.CodeUnauthorized, Message: "the authenticator's certificate changed meanwhile"}
		}
		return []posture.Payload{posture.CertExtended{Extension: x}}, nil
	}))
	if err != nil {
		return err
	}
	return api.OK(c, extendResponse{ClientCert: x.CertPEM, CA: string(a.PKI.PEM())})
}

// extendVerifyAuthenticator is POST
// /current-identity/authenticators/:id/extend-verify {clientCert}: the
// identity shows the certificate the extension issued; it replaces the old
// one, which no longer authenticates.
func (a *API) extendVerifyAuthenticator(c echo.Context) error {
	id := c.Param("id")
	if _, err := a.extendable(c, id); err != nil {
		return err
	}
	var req struct {
		ClientCert string `json:"clientCert"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	if req.ClientCert == "" {
		return posture.Invalid("clientCert", "is required: the PEM certificate the extension returned", nil)
	}
	cert, err := pki.ParseCertificatePEM([]byte(req.ClientCert))
	if err != nil {
		return posture.Invalid("clientCert", "must be a PEM certificate", nil)
	}
	fp := pki.Fingerprint(cert)
	err = a.Writer.Model(c, api.Budgeted(c, a.Budget, api.PrincipalOf(c).Identity.ID, func() ([]posture.Payload, error) {
		x, err := a.Enroll.CertExtension(id)
		if errors.Is(err, posture.ErrNotFound) {
			return nil, posture.Invalid("id", "the authenticator has no extension to verify", id)
		}
		if err != nil {
			return nil, err
		}
		if x.Fingerprint != fp {
			return nil, posture.Invalid("clientCert", "is not the certificate the last extension issued", fp)
		}
		return []posture.Payload{posture.CertExtensionVerified{AuthenticatorID: id, Fingerprint: fp}}, nil
	}))
	if err != nil {
		return err
	}
	return api.Empty(c)
}
