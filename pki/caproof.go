package pki

import (
	"crypto/x509"
	"fmt"
	"time"
)

// VerifyCAProof checks the proof of possession for an administrator-added CA
// (POST /cas/{id}/verify): proofPEM must hold a certificate whose common name
// equals token (the CA's verificationToken, never empty) and that chains to a certificate
// of caPEM at now (zero: the current time), for any key usage.
//
// Errors wrap ErrInvalidCertificate (caPEM or proofPEM holds no certificate),
// ErrInvalidCommonName (checked first, before the signature), or
// ErrCertificateFailedValidation.
func VerifyCAProof(caPEM, proofPEM []byte, token string, now time.Time) error {
	cas, err := ParseCertificatesPEM(caPEM)
	if err != nil {
		return fmt.Errorf("pki: CA PEM: %w", err)
	}
	proof, err := ParseCertificatePEM(proofPEM)
	if err != nil {
		return err
	}
	if token == "" || proof.Subject.CommonName != token {
		return fmt.Errorf("%w: %q", ErrInvalidCommonName, proof.Subject.CommonName)
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	if _, err := proof.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageAny},
	}); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificateFailedValidation, err)
	}
	return nil
}
