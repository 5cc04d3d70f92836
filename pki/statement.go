package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// statementPrefix starts every statement the CA signs. A certificate
// signature is over DER, which starts with 0x30 (SEQUENCE); a statement
// starts with 'p', so no statement is ever a valid TBSCertificate or CRL and
// a statement signature cannot be passed off as one.
const statementPrefix = "postured statement\x00"

// ErrBadStatementSignature is returned by VerifyStatement when a signature
// does not verify.
var ErrBadStatementSignature = errors.New("pki: statement signature does not verify")

// SignStatement signs msg with the CA key for one purpose (for example "log
// checkpoint"): the signed bytes are a fixed prefix, the purpose, a zero
// byte and msg, so that a signature made for one purpose never verifies for
// another. ECDSA and RSA (PKCS #1 v1.5) sign the SHA-256 of those bytes,
// Ed25519 the bytes themselves. Anyone with the CA certificate can check it
// with VerifyStatement; the key never leaves the CA.
func (ca *CA) SignStatement(purpose string, msg []byte) ([]byte, error) {
	if err := checkPurpose(purpose); err != nil {
		return nil, err
	}
	signed := statement(purpose, msg)
	var (
		sig []byte
		err error
	)
	switch ca.key.Public().(type) {
	case ed25519.PublicKey:
		sig, err = ca.key.Sign(ca.opts.Rand, signed, crypto.Hash(0))
	case *ecdsa.PublicKey, *rsa.PublicKey:
		sum := sha256.Sum256(signed)
		sig, err = ca.key.Sign(ca.opts.Rand, sum[:], crypto.SHA256)
	default:
		return nil, fmt.Errorf("%w: %T", ErrUnsupportedKey, ca.key.Public())
	}
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", purpose, err)
	}
	return sig, nil
}

// VerifyStatement checks that sig is cert's key's signature of msg for
// purpose, as made by CA.SignStatement. It does not check the certificate's
// validity dates: a statement signed while the CA was valid stays checkable.
func VerifyStatement(cert *x509.Certificate, purpose string, msg, sig []byte) error {
	if err := checkPurpose(purpose); err != nil {
		return err
	}
	var algo x509.SignatureAlgorithm
	switch cert.PublicKey.(type) {
	case ed25519.PublicKey:
		algo = x509.PureEd25519
	case *ecdsa.PublicKey:
		algo = x509.ECDSAWithSHA256
	case *rsa.PublicKey:
		algo = x509.SHA256WithRSA
	default:
		return fmt.Errorf("%w: %T", ErrUnsupportedKey, cert.PublicKey)
	}
	if err := cert.CheckSignature(algo, statement(purpose, msg), sig); err != nil {
		return fmt.Errorf("%w: %v", ErrBadStatementSignature, err)
	}
	return nil
}

// KeyID is the lower-case hex SHA-256 of a certificate's DER encoding: the
// key id that signed statements carry to name the certificate they verify
// with.
func KeyID(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.Raw)
	return hex.EncodeToString(sum[:])
}

func checkPurpose(purpose string) error {
	if purpose == "" || strings.ContainsRune(purpose, 0) {
		return fmt.Errorf("pki: statement purpose %q: must be non-empty without a zero byte", purpose)
	}
	return nil
}

func statement(purpose string, msg []byte) []byte {
	out := make([]byte, 0, len(statementPrefix)+len(purpose)+1+len(msg))
	out = append(out, statementPrefix...)
	out = append(out, purpose...)
	out = append(out, 0)
	return append(out, msg...)
}
