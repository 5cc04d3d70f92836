package pki

import (
	"bytes"
	"crypto/sha1"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"time"
)

// Usage is what an issued certificate may be used for.
type Usage int

const (
	// UsageClient: TLS client authentication (identities; a router's
	// control-channel certificate).
	UsageClient Usage = iota
	// UsageServer: TLS server authentication (a router's edge listener, the
	// API server).
	UsageServer
)

func (u Usage) String() string {
	switch u {
	case UsageClient:
		return "client"
	case UsageServer:
		return "server"
	}
	return fmt.Sprintf("Usage(%d)", int(u))
}

func (u Usage) extKeyUsage() (x509.ExtKeyUsage, error) {
	switch u {
	case UsageClient:
		return x509.ExtKeyUsageClientAuth, nil
	case UsageServer:
		return x509.ExtKeyUsageServerAuth, nil
	}
	return 0, fmt.Errorf("pki: unknown certificate usage %d", int(u))
}

// backdate is subtracted from "now" for NotBefore, so that a peer whose clock
// is slightly behind still accepts a freshly issued certificate.
const backdate = time.Minute

// Fingerprint returns the certificate fingerprint as OpenZiti shows it: the
// SHA-1 of the DER encoding in lower-case hex without separators.
func Fingerprint(cert *x509.Certificate) string {
	sum := sha1.Sum(cert.Raw)
	return hex.EncodeToString(sum[:])
}

// ParseCertificatePEM returns the first certificate of PEM data; blocks of
// other types are skipped. It fails with ErrInvalidCertificate when there is
// none or it does not parse.
func ParseCertificatePEM(data []byte) (*x509.Certificate, error) {
	certs, err := parseCertificates(data, true)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// ParseCertificatesPEM returns every certificate of PEM data in order; blocks
// of other types are skipped. It fails with ErrInvalidCertificate when there
// is none or one does not parse.
func ParseCertificatesPEM(data []byte) ([]*x509.Certificate, error) {
	return parseCertificates(data, false)
}

func parseCertificates(data []byte, first bool) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCertificate, err)
		}
		certs = append(certs, cert)
		if first {
			break
		}
	}
	if len(certs) == 0 {
		return nil, fmt.Errorf("%w: no PEM CERTIFICATE block", ErrInvalidCertificate)
	}
	return certs, nil
}

// ParseCACertificatePEM returns the first certificate of PEM data and checks
// that it is a CA certificate (basic constraints with CA set) with a key
// that passes CheckKey. It is the check for a CA that an administrator adds.
func ParseCACertificatePEM(data []byte) (*x509.Certificate, error) {
	cert, err := ParseCertificatePEM(data)
	if err != nil {
		return nil, err
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("%w: %q is not a CA certificate", ErrInvalidCertificate, cert.Subject.CommonName)
	}
	if err := CheckKey(cert.PublicKey); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCertificate, err)
	}
	return cert, nil
}

// EncodePEM returns the certificates as concatenated PEM blocks, in order.
func EncodePEM(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}

// Verify checks that cert chains to one of roots (through the optional
// intermediates), is valid at now and allows usage. A zero now means the
// current time, as in x509.VerifyOptions. Failure wraps
// ErrCertificateFailedValidation.
func Verify(cert *x509.Certificate, roots *x509.CertPool, usage Usage, now time.Time, intermediates ...*x509.Certificate) error {
	eku, err := usage.extKeyUsage()
	if err != nil {
		return err
	}
	opts := x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{eku},
	}
	if len(intermediates) > 0 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range intermediates {
			opts.Intermediates.AddCert(c)
		}
	}
	if _, err := cert.Verify(opts); err != nil {
		return fmt.Errorf("%w: %v", ErrCertificateFailedValidation, err)
	}
	return nil
}

// newSerial returns a random positive 128-bit serial number.
func newSerial(r io.Reader) (*big.Int, error) {
	var b [16]byte
	for range 8 {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("pki: serial number: %w", err)
		}
		if n := new(big.Int).SetBytes(b[:]); n.Sign() > 0 {
			return n, nil
		}
	}
	return nil, fmt.Errorf("pki: serial number: random source returns only zeros")
}
