package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"math/big"
	"strings"
)

// JWKS is a JSON Web Key Set (RFC 7517), the body of GET /enroll/jwks.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWK is a public JSON Web Key. Binary members are base64url without padding,
// except X5C, which is standard base64 DER (leaf first).
type JWK struct {
	KeyType   string   `json:"kty"`           // "EC" or "RSA"
	KeyID     string   `json:"kid,omitempty"` // hex SHA-1 of the leaf DER
	Use       string   `json:"use,omitempty"` // "sig"
	Algorithm string   `json:"alg,omitempty"` // ES256, ES384, ES512, RS256
	Curve     string   `json:"crv,omitempty"` // EC: P-256, P-384, P-521
	X         string   `json:"x,omitempty"`   // EC
	Y         string   `json:"y,omitempty"`   // EC
	N         string   `json:"n,omitempty"`   // RSA modulus
	E         string   `json:"e,omitempty"`   // RSA exponent
	X5C       []string `json:"x5c,omitempty"` // certificate chain
	X5T       string   `json:"x5t,omitempty"` // SHA-1 thumbprint of the leaf
}

// JWKS returns the enrollment key set: the one key of this signer.
func (s *Signer) JWKS() JWKS {
	return JWKS{Keys: []JWK{s.JWK()}}
}

// JWK returns the signer's public key as a JWK, with its certificate chain.
func (s *Signer) JWK() JWK {
	k := JWK{
		KeyID:     s.kid,
		Use:       "sig",
		Algorithm: s.alg,
		X5T:       base64.RawURLEncoding.EncodeToString(thumbprint(s.leaf)),
	}
	for _, der := range s.chain {
		k.X5C = append(k.X5C, base64.StdEncoding.EncodeToString(der))
	}
	switch pub := s.leaf.PublicKey.(type) {
	case *ecdsa.PublicKey:
		// NewSigner only admits named curves, so Bytes cannot fail.
		b, _ := pub.Bytes() // 0x04 || X || Y
		k.KeyType = "EC"
		k.Curve = pub.Curve.Params().Name
		k.X = base64.RawURLEncoding.EncodeToString(b[1 : 1+s.size])
		k.Y = base64.RawURLEncoding.EncodeToString(b[1+s.size:])
	case *rsa.PublicKey:
		k.KeyType = "RSA"
		k.N = base64.RawURLEncoding.EncodeToString(pub.N.Bytes())
		k.E = base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes())
	}
	return k
}

// PublicKey rebuilds the public key from the JWK members (kty, crv, x, y or
// n, e); the certificate chain is not consulted.
func (k JWK) PublicKey() (crypto.PublicKey, error) {
	switch k.KeyType {
	case "EC":
		var curve elliptic.Curve
		switch k.Curve {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("%w: JWK curve %q", ErrUnsupportedKey, k.Curve)
		}
		size := (curve.Params().BitSize + 7) / 8
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) != size || len(y) != size {
			return nil, fmt.Errorf("%w: JWK x/y are not %d-byte base64url values", ErrUnsupportedKey, size)
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
		if err != nil {
			return nil, fmt.Errorf("%w: JWK: %v", ErrUnsupportedKey, err)
		}
		return pub, nil
	case "RSA":
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("%w: JWK n/e are not base64url integers", ErrUnsupportedKey)
		}
		exp := new(big.Int).SetBytes(e)
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}, nil
	}
	return nil, fmt.Errorf("%w: JWK kty %q", ErrUnsupportedKey, k.KeyType)
}

// ChallengeResponse is the body of POST /enroll/challenge.
type ChallengeResponse struct {
	Algorithm string `json:"algorithm"` // JWS algorithm of the signature
	CAPool    string `json:"caPool"`    // PEM trust bundle
	KeyID     string `json:"kid"`
	Signature string `json:"signature"` // base64url, no padding
}

// Challenge proves possession of the key keyID by signing nonce, which must
// be a UUID (ErrInvalidNonce otherwise; checked first). keyID must be this
// signer's key id, compared case-insensitively (ErrUnknownKey otherwise).
// The signature covers the nonce's bytes exactly as given, hashed per the
// algorithm: for ES* it is the JWS R||S form, for RS256 PKCS#1 v1.5 over
// SHA-256.
func (s *Signer) Challenge(keyID, nonce string) (ChallengeResponse, error) {
	if !isUUID(nonce) {
		return ChallengeResponse{}, fmt.Errorf("%w: %q", ErrInvalidNonce, nonce)
	}
	if !strings.EqualFold(keyID, s.kid) {
		return ChallengeResponse{}, fmt.Errorf("%w: %q", ErrUnknownKey, keyID)
	}
	sig, err := s.sign([]byte(nonce))
	if err != nil {
		return ChallengeResponse{}, err
	}
	return ChallengeResponse{
		Algorithm: s.alg,
		CAPool:    string(s.caPEM),
		KeyID:     s.kid,
		Signature: base64.RawURLEncoding.EncodeToString(sig),
	}, nil
}

// VerifyChallenge checks a challenge response against the JWK that the key
// set published: same kid, an algorithm that fits the key (and the JWK's alg
// if it names one), and a signature over nonce that verifies. Failure wraps
// ErrChallengeFailed (or ErrUnsupportedKey for an unusable JWK).
func VerifyChallenge(jwk JWK, nonce string, resp ChallengeResponse) error {
	if !strings.EqualFold(resp.KeyID, jwk.KeyID) {
		return fmt.Errorf("%w: kid %q, want %q", ErrChallengeFailed, resp.KeyID, jwk.KeyID)
	}
	if jwk.Algorithm != "" && resp.Algorithm != jwk.Algorithm {
		return fmt.Errorf("%w: algorithm %q, key says %q", ErrChallengeFailed, resp.Algorithm, jwk.Algorithm)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		return err
	}
	alg, hash, size, err := algorithmFor(pub)
	if err != nil {
		return err
	}
	if resp.Algorithm != alg {
		return fmt.Errorf("%w: algorithm %q does not fit a %s key", ErrChallengeFailed, resp.Algorithm, alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(resp.Signature, "="))
	if err != nil {
		return fmt.Errorf("%w: signature is not base64url", ErrChallengeFailed)
	}
	h := hash.New()
	h.Write([]byte(nonce))
	digest := h.Sum(nil)
	ok := false
	switch pub := pub.(type) {
	case *ecdsa.PublicKey:
		if len(sig) == 2*size {
			r := new(big.Int).SetBytes(sig[:size])
			s := new(big.Int).SetBytes(sig[size:])
			ok = ecdsa.Verify(pub, digest, r, s)
		}
	case *rsa.PublicKey:
		ok = rsa.VerifyPKCS1v15(pub, hash, digest, sig) == nil
	}
	if !ok {
		return ErrChallengeFailed
	}
	return nil
}
