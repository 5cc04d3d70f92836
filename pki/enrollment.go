package pki

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Enrollment methods (the em claim).
const (
	MethodOTT     = "ott"
	MethodOTTCA   = "ottca"
	MethodUPDB    = "updb"
	MethodEROTT   = "erott"
	MethodCA      = "ca"
	MethodNetwork = "network"
)

// NetworkAudience is the aud of the network JWT.
const NetworkAudience = "openziti-enroller"

// EnrollmentClaims are the claims of an OpenZiti enrollment JWT.
type EnrollmentClaims struct {
	Method      string    // em: ott, ottca, updb, erott, ca, network
	Issuer      string    // iss: "https://<edge api address>"
	Subject     string    // sub: identity or router id
	Token       string    // jti: the enrollment token (a UUID)
	ExpiresAt   time.Time // exp, whole seconds; zero: no exp claim
	Audience    []string  // aud; nil is written as [""]
	Controllers []string  // ctrls: peer controller URLs (HA); omitted if empty
}

// wireClaims is the JSON form, with keys and shapes as OpenZiti writes them.
type wireClaims struct {
	Method      string           `json:"em"`
	Issuer      string           `json:"iss,omitempty"`
	Subject     string           `json:"sub,omitempty"`
	ID          string           `json:"jti,omitempty"`
	ExpiresAt   *jwt.NumericDate `json:"exp,omitempty"`
	Audience    audience         `json:"aud"`
	Controllers []string         `json:"ctrls,omitempty"`
}

func (c *wireClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.ExpiresAt, nil }
func (c *wireClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (c *wireClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c *wireClaims) GetIssuer() (string, error)                   { return c.Issuer, nil }
func (c *wireClaims) GetSubject() (string, error)                  { return c.Subject, nil }
func (c *wireClaims) GetAudience() (jwt.ClaimStrings, error) {
	return jwt.ClaimStrings(c.Audience), nil
}

// audience is always written as an array and read from an array or a string.
type audience []string

func (a audience) MarshalJSON() ([]byte, error) {
	if a == nil {
		return []byte("[]"), nil
	}
	return json.Marshal([]string(a))
}

func (a *audience) UnmarshalJSON(b []byte) error {
	var cs jwt.ClaimStrings
	if err := cs.UnmarshalJSON(b); err != nil {
		return err
	}
	*a = audience(cs)
	return nil
}

// SignEnrollment returns the compact JWT for c, signed with the signer's key,
// with header {alg, kid, typ:"JWT"}. The caller picks the expiry (OpenZiti's
// default for identities is 180 minutes).
func (s *Signer) SignEnrollment(c EnrollmentClaims) (string, error) {
	w := &wireClaims{
		Method:      c.Method,
		Issuer:      c.Issuer,
		Subject:     c.Subject,
		ID:          c.Token,
		Audience:    audience(c.Audience),
		Controllers: c.Controllers,
	}
	if w.Audience == nil {
		w.Audience = audience{""}
	}
	if !c.ExpiresAt.IsZero() {
		w.ExpiresAt = jwt.NewNumericDate(c.ExpiresAt)
	}
	tok, err := s.Sign(w)
	if err != nil {
		return "", fmt.Errorf("pki: enrollment JWT: %w", err)
	}
	return tok, nil
}

// Sign returns a compact JWT of any claims, signed with the signer's key,
// with header {alg, kid, typ:"JWT"}.
func (s *Signer) Sign(claims jwt.Claims) (string, error) {
	tok := jwt.NewWithClaims(s.method, claims)
	tok.Header["kid"] = s.kid
	signing, err := tok.SigningString()
	if err != nil {
		return "", err
	}
	sig, err := s.sign([]byte(signing))
	if err != nil {
		return "", err
	}
	return signing + "." + tok.EncodeSegment(sig), nil
}

// Parse verifies a JWT made by Sign into claims: the signer's algorithm and
// key, and exp by the signer's clock. Errors wrap ErrTokenExpired or
// ErrTokenInvalid.
func (s *Signer) Parse(token string, claims jwt.Claims) error {
	_, err := jwt.ParseWithClaims(strings.TrimSpace(token), claims, func(t *jwt.Token) (any, error) {
		if kid, ok := t.Header["kid"]; ok && kid != s.kid {
			return nil, fmt.Errorf("%w: %v", ErrUnknownKey, kid)
		}
		return s.leaf.PublicKey, nil
	}, jwt.WithValidMethods([]string{s.alg}), jwt.WithTimeFunc(s.opts.Now))
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return fmt.Errorf("%w: %v", ErrTokenExpired, err)
	case err != nil:
		return fmt.Errorf("%w: %v", ErrTokenInvalid, err)
	}
	return nil
}

// ParseEnrollment verifies a JWT made by SignEnrollment (or NetworkJWT): the
// algorithm must be the signer's, a kid header if present must be the
// signer's key id, the signature must verify with the signer's public key and
// exp, if present, must not have passed by the signer's clock. Errors wrap
// ErrTokenExpired or ErrTokenInvalid.
func (s *Signer) ParseEnrollment(token string) (*EnrollmentClaims, error) {
	var w wireClaims
	if err := s.Parse(token, &w); err != nil {
		return nil, err
	}
	c := &EnrollmentClaims{
		Method:      w.Method,
		Issuer:      w.Issuer,
		Subject:     w.Subject,
		Token:       w.ID,
		Audience:    []string(w.Audience),
		Controllers: w.Controllers,
	}
	if w.ExpiresAt != nil {
		c.ExpiresAt = w.ExpiresAt.Time
	}
	return c, nil
}

// NetworkJWT returns the network JWT for the API address addr ("host:port"):
// em "network", iss = sub = "https://<addr>/", aud ["openziti-enroller"], a
// random UUID jti and no exp. As in OpenZiti it is made once per Signer (per
// addr) and then returned unchanged; a re-issued server certificate means a
// new Signer and so a new token.
func (s *Signer) NetworkJWT(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tok, ok := s.network[addr]; ok {
		return tok, nil
	}
	jti, err := newUUID(s.opts.Rand)
	if err != nil {
		return "", err
	}
	url := "https://" + addr + "/"
	tok, err := s.SignEnrollment(EnrollmentClaims{
		Method:   MethodNetwork,
		Issuer:   url,
		Subject:  url,
		Token:    jti,
		Audience: []string{NetworkAudience},
	})
	if err != nil {
		return "", err
	}
	s.network[addr] = tok
	return tok, nil
}
