package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/smallstep/pkcs7"
)

// CA is the controller's certificate authority. Its key and certificate do
// not change after Open; a CA is safe for concurrent use.
type CA struct {
	dir   string
	opts  Options
	cert  *x509.Certificate
	key   crypto.Signer
	pem   []byte
	pkcs7 string

	mu sync.Mutex // serialises ServerCertificate's file updates
}

// Open loads the CA from dir (ca.pem, ca.key), creating what is missing: the
// directory (0700), an ECDSA P-256 key (ca.key, PKCS#8 PEM, 0600) and a
// self-signed certificate valid for 10 years (ca.pem). Open is idempotent,
// and concurrent first Opens of the same dir (several processes included)
// end up with the same key and certificate: each file is created exclusively
// and a loser of the race loads the winner's file.
//
// An existing ca.key may be ECDSA, RSA or Ed25519 (PKCS#8, SEC 1 or PKCS#1
// PEM). If ca.key exists without ca.pem, a new self-signed certificate is
// made for that key. Open fails if ca.pem does not match ca.key, is not a CA
// certificate, or has expired: a CA is never replaced silently, since that
// would invalidate every certificate it issued.
func Open(dir string, opts Options) (*CA, error) {
	if dir == "" {
		return nil, errors.New("pki: Open: empty directory")
	}
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, dirPerm); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	key, err := loadOrCreateCAKey(filepath.Join(dir, caKeyFile), opts)
	if err != nil {
		return nil, err
	}
	cert, err := loadOrCreateCACert(filepath.Join(dir, caCertFile), key, opts)
	if err != nil {
		return nil, err
	}
	if !keyMatches(cert, key) {
		return nil, fmt.Errorf("pki: %s does not match %s: %w", caCertFile, caKeyFile, ErrUnsupportedKey)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate", caCertFile)
	}
	if now := opts.Now(); now.After(cert.NotAfter) {
		return nil, fmt.Errorf("pki: CA certificate %q expired at %s", cert.Subject.CommonName, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	p7, err := degenerate(cert)
	if err != nil {
		return nil, err
	}
	return &CA{
		dir:   dir,
		opts:  opts,
		cert:  cert,
		key:   key,
		pem:   EncodePEM(cert),
		pkcs7: p7,
	}, nil
}

// Missing lists the files of a CA that dir lacks (its key, its
// certificate), which Open would create.
func Missing(dir string) []string {
	var out []string
	for _, f := range []string{caKeyFile, caCertFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); errors.Is(err, fs.ErrNotExist) {
			out = append(out, f)
		}
	}
	return out
}

func loadOrCreateCAKey(path string, opts Options) (crypto.Signer, error) {
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		if err != nil {
			return nil, err
		}
		// The CA key signs server certificates, enrollments and the log's
		// checkpoints: refuse it readable by others, as the secrets key.
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("pki: CA key %s is accessible to others (mode %o): chmod 600 it", path, fi.Mode().Perm())
		}
		return key, nil
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), opts.Rand)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	data, err := encodeKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	if err := writeExclusive(path, data, keyPerm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path)
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	return key, nil
}

func loadOrCreateCACert(path string, key crypto.Signer, opts Options) (*x509.Certificate, error) {
	cert, err := readCert(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return cert, err
	}
	name := opts.CAName
	if name == "" {
		var b [4]byte
		if _, err := io.ReadFull(opts.Rand, b[:]); err != nil {
			return nil, fmt.Errorf("pki: CA name: %w", err)
		}
		name = "postured CA " + hex.EncodeToString(b[:])
	}
	serial, err := newSerial(opts.Rand)
	if err != nil {
		return nil, err
	}
	now := opts.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"postured"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(opts.Rand, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	if err := writeExclusive(path, EncodePEM(cert), certPerm); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readCert(path)
		}
		return nil, fmt.Errorf("pki: %w", err)
	}
	return cert, nil
}

// degenerate returns the base64 of a certs-only PKCS#7 of certs, wrapped at 64
// columns, each line ending in "\n".
func degenerate(certs ...*x509.Certificate) (string, error) {
	var der []byte
	for _, c := range certs {
		der = append(der, c.Raw...)
	}
	p7, err := pkcs7.DegenerateCertificate(der)
	if err != nil {
		return "", fmt.Errorf("pki: PKCS#7: %w", err)
	}
	enc := base64.StdEncoding.EncodeToString(p7)
	var b strings.Builder
	for len(enc) > 64 {
		b.WriteString(enc[:64])
		b.WriteByte('\n')
		enc = enc[64:]
	}
	b.WriteString(enc)
	b.WriteByte('\n')
	return b.String(), nil
}

// Certificate returns the CA certificate. Callers must not modify it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// Pool returns a new pool holding the CA certificate; the caller may add to it.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// PEM returns the CA bundle (the CA certificate) in PEM. It is what clients
// must trust: the "ca" of enrollment responses and the caPool of challenges.
func (ca *CA) PEM() []byte { return append([]byte(nil), ca.pem...) }

// PKCS7 returns the CA bundle as served at /.well-known/est/cacerts: the
// base64 of a degenerate, certs-only PKCS#7 SignedData, wrapped at 64
// columns with "\n" after every line. Serve it with Content-Type
// application/pkcs7-mime and Content-Transfer-Encoding: base64.
func (ca *CA) PKCS7() (string, error) { return ca.pkcs7, nil }

// IssuedBy reports whether cert was signed by this CA (issuer name and
// signature); it does not check validity dates or usage (see Verify).
func (ca *CA) IssuedBy(cert *x509.Certificate) bool {
	return cert != nil && cert.CheckSignatureFrom(ca.cert) == nil
}

// Verify checks cert against this CA at the CA's clock; see the package
// function Verify.
func (ca *CA) Verify(cert *x509.Certificate, usage Usage) error {
	return Verify(cert, ca.Pool(), usage, ca.opts.Now())
}

// NewSigner returns an enrollment JWT signer for the TLS certificate that the
// API serves, with this CA's clock, randomness and bundle (see NewSigner).
func (ca *CA) NewSigner(cert tls.Certificate) (*Signer, error) {
	return NewSigner(cert, ca.PEM(), ca.opts)
}

// issue signs a leaf certificate for pub. NotAfter is capped at the CA's.
func (ca *CA) issue(tmpl *x509.Certificate, pub crypto.PublicKey) (*x509.Certificate, error) {
	serial, err := newSerial(ca.opts.Rand)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.BasicConstraintsValid = true
	tmpl.IsCA = false
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if _, ok := pub.(*rsa.PublicKey); ok {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	der, err := x509.CreateCertificate(ca.opts.Rand, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return nil, fmt.Errorf("pki: issue certificate: %w", err)
	}
	return x509.ParseCertificate(der)
}
