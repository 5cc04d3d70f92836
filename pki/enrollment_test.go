package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
)

// serverSigner returns a CA, its clock, the API server certificate and a
// Signer built from it.
func serverSigner(t *testing.T) (*CA, *clock, tls.Certificate, *Signer) {
	t.Helper()
	ca, clk, _ := openCA(t)
	cert, err := ca.ServerCertificate([]string{"localhost", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := ca.NewSigner(cert)
	if err != nil {
		t.Fatal(err)
	}
	return ca, clk, cert, s
}

// signerWithKey returns a Signer whose certificate (issued by ca) holds key.
func signerWithKey(t *testing.T, ca *CA, key crypto.Signer) (*Signer, tls.Certificate) {
	t.Helper()
	leaf, _, err := ca.SignCSR(makeCSR(t, key, "ctrl", []string{"localhost"}, nil), SignRequest{Usage: UsageServer})
	if err != nil {
		t.Fatal(err)
	}
	cert := tls.Certificate{Certificate: [][]byte{leaf.Raw, ca.Certificate().Raw}, PrivateKey: key}
	s, err := ca.NewSigner(cert)
	if err != nil {
		t.Fatal(err)
	}
	return s, cert
}

func TestEnrollmentJWTVerifiesWithServerKey(t *testing.T) {
	_, clk, cert, s := serverSigner(t)
	claims := EnrollmentClaims{
		Method:      MethodOTT,
		Issuer:      "https://localhost:1280",
		Subject:     "identity-1",
		Token:       "5f1b6a8e-4c2f-4a51-9b0e-7d1e2f3a4b5c",
		ExpiresAt:   clk.Now().Add(180 * time.Minute),
		Controllers: []string{"https://ctrl2:1280"},
	}
	token, err := s.SignEnrollment(claims)
	if err != nil {
		t.Fatal(err)
	}

	// As an SDK does: verify with the public key of the served certificate.
	sum := sha1.Sum(cert.Leaf.Raw)
	var got jwt.MapClaims
	parsed, err := jwt.ParseWithClaims(token, &got, func(tok *jwt.Token) (any, error) {
		return cert.Leaf.PublicKey, nil
	}, jwt.WithValidMethods([]string{"ES256"}), jwt.WithTimeFunc(clk.Now), jwt.WithExpirationRequired())
	if err != nil {
		t.Fatal(err)
	}
	if kid := parsed.Header["kid"]; kid != hex.EncodeToString(sum[:]) || kid != s.KeyID() {
		t.Errorf("kid = %v, want the leaf thumbprint %x", kid, sum)
	}
	want := jwt.MapClaims{
		"em":    "ott",
		"iss":   "https://localhost:1280",
		"sub":   "identity-1",
		"jti":   claims.Token,
		"exp":   float64(claims.ExpiresAt.Unix()),
		"aud":   []any{""},
		"ctrls": []any{"https://ctrl2:1280"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claims (-want +got):\n%s", d)
	}

	back, err := s.ParseEnrollment(token)
	if err != nil {
		t.Fatal(err)
	}
	claims.Audience = []string{""}
	if d := cmp.Diff(&claims, back); d != "" {
		t.Errorf("ParseEnrollment (-want +got):\n%s", d)
	}

	clk.Advance(181 * time.Minute)
	if _, err := s.ParseEnrollment(token); !errors.Is(err, ErrTokenExpired) {
		t.Errorf("expired: err = %v", err)
	}
}

func TestParseEnrollmentRejects(t *testing.T) {
	ca, clk, _, s := serverSigner(t)
	token, err := s.SignEnrollment(EnrollmentClaims{Method: MethodOTT, Token: "t", ExpiresAt: clk.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := signerWithKey(t, ca, newP256(t))
	foreign, err := other.SignEnrollment(EnrollmentClaims{Method: MethodOTT, Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"em":"ott","jti":"u","aud":[""]}`)) + "." + parts[2]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + "."
	for name, tok := range map[string]string{"foreign": foreign, "tampered": tampered, "none": none, "junk": "a.b.c"} {
		if _, err := s.ParseEnrollment(tok); !errors.Is(err, ErrTokenInvalid) {
			t.Errorf("%s: err = %v, want ErrTokenInvalid", name, err)
		}
	}
}

func TestSignerAlgorithms(t *testing.T) {
	ca, clk, _ := openCA(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p521, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for alg, key := range map[string]crypto.Signer{"ES384": p384, "ES512": p521, "RS256": rsaKey} {
		s, cert := signerWithKey(t, ca, key)
		if s.Algorithm() != alg {
			t.Errorf("Algorithm = %s, want %s", s.Algorithm(), alg)
		}
		token, err := s.SignEnrollment(EnrollmentClaims{Method: MethodOTT, Token: "x", ExpiresAt: clk.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = jwt.Parse(token, func(*jwt.Token) (any, error) { return key.Public(), nil },
			jwt.WithValidMethods([]string{alg}), jwt.WithTimeFunc(clk.Now))
		if err != nil {
			t.Errorf("%s: %v", alg, err)
		}
		if _, err := s.ParseEnrollment(token); err != nil {
			t.Errorf("%s: ParseEnrollment: %v", alg, err)
		}
		if cert.Leaf != nil {
			t.Error("test setup: Leaf should be unset")
		}
	}

	// A key that does not match the certificate.
	_, cert := signerWithKey(t, ca, newP256(t))
	cert.PrivateKey = newP256(t)
	if _, err := NewSigner(cert, nil, Options{}); !errors.Is(err, ErrUnsupportedKey) {
		t.Errorf("mismatched key: err = %v", err)
	}
}

func TestNetworkJWT(t *testing.T) {
	_, _, cert, s := serverSigner(t)
	token, err := s.NetworkJWT("ctrl.example.com:1280")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := s.NetworkJWT("ctrl.example.com:1280"); again != token {
		t.Error("network JWT not cached")
	}
	var got map[string]any
	if _, err := jwt.ParseWithClaims(token, jwt.MapClaims{}, func(*jwt.Token) (any, error) { return cert.Leaf.PublicKey, nil }); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(payload, &got); err != nil {
		t.Fatal(err)
	}
	jti, _ := got["jti"].(string)
	if !isUUID(jti) {
		t.Errorf("jti %q is not a UUID", jti)
	}
	delete(got, "jti")
	want := map[string]any{
		"em":  "network",
		"iss": "https://ctrl.example.com:1280/",
		"sub": "https://ctrl.example.com:1280/",
		"aud": []any{"openziti-enroller"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("claims (-want +got):\n%s", d)
	}
}
