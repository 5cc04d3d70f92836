package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"time"
)

// serviceValidity is the lifetime of a service certificate.
const serviceValidity = 365 * 24 * time.Hour

// ServiceCertificate issues a certificate with a new ECDSA P-256 key for a
// service that postured's clients reach over TLS besides the API, such as
// the embedded NATS server or the servers of a NATS cluster. It is valid for
// both ServerAuth and ClientAuth (NATS cluster routes dial each other), for
// the given names (see ServerCertificate for their forms), for one year but
// not beyond the CA. Nothing is stored: a caller that needs the files
// writes them (EncodePEM, EncodeKeyPEM).
func (ca *CA) ServiceCertificate(sans []string) (tls.Certificate, error) {
	dnsNames, ips, cn, err := splitSANs(sans)
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), ca.opts.Rand)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: service key: %w", err)
	}
	now := ca.opts.Now()
	leaf, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, Organization: []string{"postured"}},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(serviceValidity),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, key.Public())
	if err != nil {
		return tls.Certificate{}, err
	}
	return ca.tlsCertificate(leaf, key), nil
}

// EncodeKeyPEM returns the PKCS#8 PEM encoding of a private key.
func EncodeKeyPEM(key crypto.PrivateKey) ([]byte, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("pki: %T is not a signing key: %w", key, ErrUnsupportedKey)
	}
	return encodeKey(signer)
}
