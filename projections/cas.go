package projections

import (
	"crypto/x509"
	"encoding/pem"
	"errors"

	"github.com/seed-0809debe/posture"
)

// CA keys (besides the entity record):
//
//	u/cas/name/<name>                -> id
//	u/cas/fingerprint/<fingerprint>  -> id
func init() {
	onEntity(entityHooks[posture.CA]{beforeDelete: func(tx *Tx, old posture.CA) error {
		// ottca enrollments of a deleted CA can never complete.
		enrollments, err := listEntities[posture.Enrollment](tx.b, posture.KindEnrollment)
		if err != nil {
			return err
		}
		for _, e := range enrollments {
			if e.CAID == old.ID {
				if err := deleteEntity(tx, e); err != nil {
					return err
				}
			}
		}
		return endCASessions(tx, old)
	}})
	on(func(tx *Tx, e posture.Event, p posture.CAVerified) error {
		ca, found, err := getOld[posture.CA](tx, posture.KindCA, p.ID)
		if err != nil || !found || ca.IsVerified {
			return err
		}
		ca.IsVerified, ca.UpdatedAt = true, e.At
		return putEntity(tx, ca)
	})
}

// CA returns the CA with the id.
func (s *Store) CA(id string) (posture.CA, error) { return Get[posture.CA](s, id) }

// CAs lists every CA in id order.
func (s *Store) CAs() ([]posture.CA, error) { return List[posture.CA](s) }

// endCASessions ends the API sessions that logged in with a certificate the
// deleted CA issued, as the controller does: its certificates no longer
// log in, and a session they opened must not outlive it. The authenticators
// stay (their certificates are refused). A session knows the CA that
// verified its certificate's chain (through intermediates too); one of an
// older log does not, and ends when the CA signed the certificate itself.
func endCASessions(tx *Tx, ca posture.CA) error {
	caCert, _ := parseCertPEM(ca.CertPEM) // parsed when the CA was added; nil if not
	authenticators, err := listEntities[posture.Authenticator](tx.b, posture.KindAuthenticator)
	if err != nil {
		return err
	}
	for _, a := range authenticators {
		if a.CertPEM == "" || a.IsIssuedByNetwork {
			continue
		}
		signed := false
		if cert, err := parseCertPEM(a.CertPEM); err == nil && caCert != nil {
			signed = cert.CheckSignatureFrom(caCert) == nil
		}
		signed = signed || a.CAID == ca.ID // enrolled with it
		verified := func(s posture.APISession) bool { return signed || s.CAID == ca.ID }
		if err := endAuthenticatorSessions(tx, a, "its CA was deleted", verified); err != nil {
			return err
		}
	}
	return nil
}

// parseCertPEM parses the first PEM block of data as a certificate.
func parseCertPEM(data string) (*x509.Certificate, error) {
	block, _ := pem.Decode([]byte(data))
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	return x509.ParseCertificate(block.Bytes)
}
