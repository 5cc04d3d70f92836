package client

import (
	"crypto/x509"
	"errors"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// CertAuthStore is what certificate login reads (projections.Store
// implements it).
type CertAuthStore interface {
	Identity(id string) (posture.Identity, error)
	AuthenticatorByFingerprint(fp string) (posture.Authenticator, error)
	CAs() ([]posture.CA, error)
}

// CertAuth verifies the client certificates of POST
// /authenticate?method=cert (it is an api.CertVerifier). The leaf must be
// the current certificate of a cert authenticator (matched by fingerprint),
// valid now for client authentication, and issued either by postured's CA
// (an authenticator issued by the network) or by a verified CA with
// authentication enabled.
type CertAuth struct {
	CA    *pki.CA
	Store CertAuthStore
}

// VerifyCert implements api.CertVerifier.
func (v *CertAuth) VerifyCert(chain []*x509.Certificate) (api.Credential, error) {
	if len(chain) == 0 {
		return api.Credential{}, invalidAuth("no client certificate")
	}
	leaf := chain[0]
	au, err := v.Store.AuthenticatorByFingerprint(pki.Fingerprint(leaf))
	if errors.Is(err, posture.ErrNotFound) || (err == nil && au.Method != posture.MethodCert) {
		return api.Credential{}, invalidAuth("the client certificate is not the certificate of an authenticator")
	}
	if err != nil {
		return api.Credential{}, err
	}
	cred := api.Credential{Authenticator: au}
	if au.IsIssuedByNetwork {
		if err := pki.Verify(leaf, v.CA.Pool(), pki.UsageClient, time.Time{}, chain[1:]...); err != nil {
			return api.Credential{}, invalidAuth("the client certificate failed validation: it is expired, not yet valid or not for client authentication")
		}
	} else {
		cas, err := v.Store.CAs()
		if err != nil {
			return api.Credential{}, err
		}
		for _, ca := range cas {
			if ca.IsVerified && ca.IsAuthEnabled && issuedBy(ca, chain) {
				cred.CAID = ca.ID
				break
			}
		}
		if cred.CAID == "" {
			return api.Credential{}, invalidAuth("the client certificate was not issued by a verified CA with authentication enabled, or is not valid now")
		}
	}
	identity, err := v.Store.Identity(au.IdentityID)
	if errors.Is(err, posture.ErrNotFound) {
		return api.Credential{}, invalidAuth("the identity of the certificate no longer exists")
	}
	cred.Identity = identity
	return cred, err
}
