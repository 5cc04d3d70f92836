package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/big"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// Signer signs enrollment JWTs and challenges with the private key of the TLS
// certificate that the API serves. OpenZiti SDKs verify an enrollment JWT
// with the public key of the certificate they are served at its issuer URL,
// so the two must be the same. A Signer is safe for concurrent use.
type Signer struct {
	key    crypto.Signer
	leaf   *x509.Certificate
	chain  [][]byte
	kid    string
	alg    string
	method jwt.SigningMethod
	hash   crypto.Hash
	size   int // bytes per ECDSA coordinate; 0 for RSA
	caPEM  []byte
	opts   Options

	mu      sync.Mutex
	network map[string]string // NetworkJWT cache by address
}

// NewSigner returns a Signer for cert (leaf first, then its chain; Leaf is
// parsed if unset). The key id is the hex SHA-1 of the leaf DER (Fingerprint)
// and the algorithm follows the key: ES256, ES384, ES512 for ECDSA P-256,
// P-384, P-521, RS256 for RSA; anything else fails with ErrUnsupportedKey, as
// does a private key that does not match the leaf. caPEM is the trust bundle
// reported as caPool by Challenge.
func NewSigner(cert tls.Certificate, caPEM []byte, opts Options) (*Signer, error) {
	if len(cert.Certificate) == 0 {
		return nil, errors.New("pki: NewSigner: certificate has no chain")
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidCertificate, err)
		}
	}
	key, ok := cert.PrivateKey.(crypto.Signer)
	if !ok || !keyMatches(leaf, key) {
		return nil, fmt.Errorf("%w: private key does not match the certificate", ErrUnsupportedKey)
	}
	s := &Signer{
		key:     key,
		leaf:    leaf,
		chain:   cert.Certificate,
		kid:     Fingerprint(leaf),
		caPEM:   append([]byte(nil), caPEM...),
		opts:    opts.withDefaults(),
		network: map[string]string{},
	}
	var err error
	if s.alg, s.hash, s.size, err = algorithmFor(leaf.PublicKey); err != nil {
		return nil, err
	}
	s.method = jwt.GetSigningMethod(s.alg)
	return s, nil
}

// algorithmFor returns the JWS algorithm, its hash, and the ECDSA coordinate
// size for a public key.
func algorithmFor(pub crypto.PublicKey) (alg string, hash crypto.Hash, size int, err error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ES256", crypto.SHA256, 32, nil
		case elliptic.P384():
			return "ES384", crypto.SHA384, 48, nil
		case elliptic.P521():
			return "ES512", crypto.SHA512, 66, nil
		}
		return "", 0, 0, fmt.Errorf("%w: ECDSA curve %s", ErrUnsupportedKey, k.Curve.Params().Name)
	case *rsa.PublicKey:
		return "RS256", crypto.SHA256, 0, nil
	}
	return "", 0, 0, fmt.Errorf("%w: %T", ErrUnsupportedKey, pub)
}

// KeyID returns the key id: the hex SHA-1 of the leaf certificate's DER.
func (s *Signer) KeyID() string { return s.kid }

// Algorithm returns the JWS algorithm name (ES256, ES384, ES512 or RS256).
func (s *Signer) Algorithm() string { return s.alg }

// Certificate returns the leaf certificate whose key signs.
func (s *Signer) Certificate() *x509.Certificate { return s.leaf }

// sign signs data the JWS way: ECDSA as the fixed-size R||S concatenation,
// RSA as PKCS#1 v1.5.
func (s *Signer) sign(data []byte) ([]byte, error) {
	h := s.hash.New()
	h.Write(data)
	sig, err := s.key.Sign(s.opts.Rand, h.Sum(nil), s.hash)
	if err != nil {
		return nil, fmt.Errorf("pki: sign: %w", err)
	}
	if s.size == 0 {
		return sig, nil
	}
	var rs struct{ R, S *big.Int }
	if rest, err := asn1.Unmarshal(sig, &rs); err != nil || len(rest) > 0 {
		return nil, fmt.Errorf("pki: sign: malformed ECDSA signature")
	}
	out := make([]byte, 2*s.size)
	rs.R.FillBytes(out[:s.size])
	rs.S.FillBytes(out[s.size:])
	return out, nil
}

// newUUID returns a random (version 4) UUID in canonical form.
func newUUID(r io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("pki: uuid: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

// isUUID reports whether s is a UUID in the 8-4-4-4-12 hex form (any case,
// any version).
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// thumbprint is the JWK x5t: SHA-1 of the leaf DER.
func thumbprint(cert *x509.Certificate) []byte {
	sum := sha1.Sum(cert.Raw)
	return sum[:]
}
