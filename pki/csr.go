package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultValidity is the lifetime of a certificate signed from a CSR when the
// SignRequest gives no NotAfter.
const DefaultValidity = 365 * 24 * time.Hour

// MinRSABits is the smallest RSA key a CSR or a certificate an
// administrator adds may carry (NIST SP 800-131A); MaxCSRNames and
// MaxCSRSubject bound a CSR's subject alternative names and its subject
// (DER), far more than a router or an endpoint needs.
const (
	MinRSABits    = 2048
	MaxCSRNames   = 100
	MaxCSRSubject = 1024
)

// CheckKey refuses a public key that is not ECDSA on P-256 or a larger
// curve, Ed25519, or RSA of at least MinRSABits bits.
func CheckKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if n := k.N.BitLen(); n < MinRSABits {
			return fmt.Errorf("a %d-bit RSA key is too weak (at least %d bits)", n, MinRSABits)
		}
	case *ecdsa.PublicKey:
		if k.Curve.Params().BitSize < 256 {
			return fmt.Errorf("ECDSA on %s is too weak (P-256, P-384 or P-521)", k.Curve.Params().Name)
		}
	case ed25519.PublicKey:
	default:
		return fmt.Errorf("unsupported public key type %T (ECDSA, RSA or Ed25519)", pub)
	}
	return nil
}

// SignRequest says how SignCSR issues a certificate.
type SignRequest struct {
	// CommonName replaces the CSR's common name; empty keeps the CSR's. The
	// rest of the CSR's subject is kept as requested.
	CommonName string
	// NotAfter ends the validity; zero means now + DefaultValidity. It is
	// capped at the CA certificate's NotAfter and must be after now.
	NotAfter time.Time
	// Usage selects the extended key usage: UsageClient (ClientAuth, the
	// default) or UsageServer (ServerAuth, for a router's server CSR).
	Usage Usage
	// Taken are certificates whose names the CSR may not ask for (the
	// controllers' own, for a router's server CSR): a host name or an
	// address one of them is valid for, or a wildcard that covers one of
	// their names, is refused with ErrInvalidCSR.
	Taken []*x509.Certificate
}

// ParseCSR decodes and checks a PKCS#10 certificate signing request given as
// PEM ("CERTIFICATE REQUEST" or "NEW CERTIFICATE REQUEST"), DER, or base64 of
// DER without PEM headers. Errors wrap ErrMissingCSR (empty input),
// ErrInvalidCSR (not a CSR, or a key type other than ECDSA, RSA, Ed25519), or
// ErrCSRSignature (the self-signature does not verify). Its key must pass
// CheckKey, its subject be at most MaxCSRSubject bytes, and it may ask for
// at most MaxCSRNames subject alternative names.
func ParseCSR(data []byte) (*x509.CertificateRequest, error) {
	der, err := csrDER(data)
	if err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCSR, err)
	}
	if err := CheckKey(csr.PublicKey); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCSR, err)
	}
	if n := len(csr.RawSubject); n > MaxCSRSubject {
		return nil, fmt.Errorf("%w: a subject of %d bytes (at most %d)", ErrInvalidCSR, n, MaxCSRSubject)
	}
	if n := len(csr.DNSNames) + len(csr.IPAddresses) + len(csr.EmailAddresses) + len(csr.URIs); n > MaxCSRNames {
		return nil, fmt.Errorf("%w: %d subject alternative names (at most %d)", ErrInvalidCSR, n, MaxCSRNames)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCSRSignature, err)
	}
	return csr, nil
}

func csrDER(data []byte) ([]byte, error) {
	// DER first: trimming "spaces" would damage binary input.
	if len(data) > 0 && data[0] == 0x30 {
		return data, nil
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return nil, ErrMissingCSR
	}
	if bytes.Contains(text, []byte("-----BEGIN")) {
		var der []byte
		for rest := text; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			switch {
			case block == nil && der == nil:
				return nil, fmt.Errorf("%w: no PEM CERTIFICATE REQUEST block", ErrInvalidCSR)
			case block == nil:
				return der, nil
			case block.Type != "CERTIFICATE REQUEST" && block.Type != "NEW CERTIFICATE REQUEST":
			case der != nil: // which one is meant?
				return nil, fmt.Errorf("%w: more than one PEM CERTIFICATE REQUEST block", ErrInvalidCSR)
			default:
				der = block.Bytes
			}
		}
	}
	compact := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		}
		return r
	}, string(text))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if der, err := enc.DecodeString(compact); err == nil && len(der) > 0 && der[0] == 0x30 {
			return der, nil
		}
	}
	return nil, fmt.Errorf("%w: neither PEM, DER nor base64", ErrInvalidCSR)
}

// SignCSR checks a CSR (see ParseCSR) and issues a certificate for its key:
// a random 128-bit serial, NotBefore one minute before now, the CSR's subject
// (common name per req.CommonName) and the CSR's DNS, IP, e-mail and URI
// names, the extended key usage of req.Usage, KeyUsage DigitalSignature (and
// KeyEncipherment for RSA keys). It returns the certificate and its PEM (the
// leaf only; append PEM() for a chain).
func (ca *CA) SignCSR(csrData []byte, req SignRequest) (*x509.Certificate, []byte, error) {
	csr, err := ParseCSR(csrData)
	if err != nil {
		return nil, nil, err
	}
	eku, err := req.Usage.extKeyUsage()
	if err != nil {
		return nil, nil, err
	}
	if name, ok := takenName(csr, req.Taken); ok {
		return nil, nil, fmt.Errorf("%w: it names %s, which a controller's own certificate is for (a router on a controller's host needs a name of its own, such as a DNS alias)", ErrInvalidCSR, name)
	}
	now := ca.opts.Now()
	notAfter := req.NotAfter
	if notAfter.IsZero() {
		notAfter = now.Add(DefaultValidity)
	}
	if !notAfter.After(now) {
		return nil, nil, fmt.Errorf("pki: NotAfter %s is not after now", notAfter.UTC().Format(time.RFC3339))
	}
	subject := csr.Subject
	subject.ExtraNames = nil
	if req.CommonName != "" {
		subject.CommonName = req.CommonName
	}
	cert, err := ca.issue(&x509.Certificate{
		Subject:        subject,
		NotBefore:      now.Add(-backdate),
		NotAfter:       notAfter,
		ExtKeyUsage:    []x509.ExtKeyUsage{eku},
		DNSNames:       csr.DNSNames,
		IPAddresses:    csr.IPAddresses,
		EmailAddresses: csr.EmailAddresses,
		URIs:           csr.URIs,
	}, csr.PublicKey)
	if err != nil {
		return nil, nil, err
	}
	return cert, EncodePEM(cert), nil
}

// takenName returns the first name of the CSR that one of the certificates
// is valid for, or that a wildcard of the CSR covers among their names.
func takenName(csr *x509.CertificateRequest, taken []*x509.Certificate) (string, bool) {
	names := slices.Clone(csr.DNSNames)
	for _, ip := range csr.IPAddresses {
		names = append(names, ip.String())
	}
	for _, name := range names {
		for _, cert := range taken {
			if cert.VerifyHostname(name) == nil {
				return name, true
			}
			if suffix, ok := strings.CutPrefix(name, "*."); ok {
				for _, have := range cert.DNSNames {
					if _, rest, ok := strings.Cut(have, "."); ok && strings.EqualFold(rest, suffix) {
						return name, true
					}
				}
			}
		}
	}
	return "", false
}
