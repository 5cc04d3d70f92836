package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"testing"
)

// keyFromJWKJSON rebuilds a public key from the JSON of one JWK without using
// the package's own decoder.
func keyFromJWKJSON(t *testing.T, raw json.RawMessage) crypto.PublicKey {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	b64 := func(name string) []byte {
		s, _ := m[name].(string)
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			t.Fatalf("member %q = %q is not base64url", name, s)
		}
		return b
	}
	switch m["kty"] {
	case "EC":
		if m["crv"] != "P-256" {
			t.Fatalf("crv = %v", m["crv"])
		}
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, b64("x")...), b64("y")...))
		if err != nil {
			t.Fatal(err)
		}
		return pub
	case "RSA":
		return &rsa.PublicKey{N: new(big.Int).SetBytes(b64("n")), E: int(new(big.Int).SetBytes(b64("e")).Int64())}
	}
	t.Fatalf("kty = %v", m["kty"])
	return nil
}

func TestJWKSAndChallenge(t *testing.T) {
	ca, _, cert, s := serverSigner(t)
	body, err := json.Marshal(s.JWKS())
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS %s: %v", body, err)
	}
	var members struct {
		Kty, Kid, Use, Alg, X5t string
		X5c                     []string
	}
	if err := json.Unmarshal(set.Keys[0], &members); err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(cert.Leaf.Raw)
	if members.Kty != "EC" || members.Use != "sig" || members.Alg != "ES256" || members.Kid != Fingerprint(cert.Leaf) {
		t.Errorf("JWK members: %+v", members)
	}
	if members.X5t != base64.RawURLEncoding.EncodeToString(sum[:]) {
		t.Errorf("x5t = %s", members.X5t)
	}
	if len(members.X5c) != 2 {
		t.Fatalf("x5c has %d certificates", len(members.X5c))
	}
	for i, c := range members.X5c {
		der, err := base64.StdEncoding.DecodeString(c)
		if err != nil || !bytes.Equal(der, cert.Certificate[i]) {
			t.Errorf("x5c[%d] is not chain[%d]", i, i)
		}
	}
	pub := keyFromJWKJSON(t, set.Keys[0])
	if !pub.(*ecdsa.PublicKey).Equal(cert.Leaf.PublicKey) {
		t.Fatal("JWK key is not the server certificate's key")
	}

	const nonce = "0b4e7a52-1f2d-4c8e-9a7b-3c6d5e4f2a1b"
	resp, err := s.Challenge(members.Kid, nonce)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Algorithm != "ES256" || resp.KeyID != members.Kid || resp.CAPool != string(ca.PEM()) {
		t.Errorf("response: %+v", resp)
	}
	sig, err := base64.RawURLEncoding.DecodeString(resp.Signature)
	if err != nil || len(sig) != 64 {
		t.Fatalf("signature %q: %v", resp.Signature, err)
	}
	digest := sha256.Sum256([]byte(nonce))
	r, ss := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
	if !ecdsa.Verify(pub.(*ecdsa.PublicKey), digest[:], r, ss) {
		t.Error("challenge signature does not verify with the JWK")
	}

	// The package's own verifier agrees, and catches a wrong nonce.
	var jwk JWK
	if err := json.Unmarshal(set.Keys[0], &jwk); err != nil {
		t.Fatal(err)
	}
	if err := VerifyChallenge(jwk, nonce, resp); err != nil {
		t.Error(err)
	}
	if err := VerifyChallenge(jwk, "0b4e7a52-1f2d-4c8e-9a7b-3c6d5e4f2a1c", resp); !errors.Is(err, ErrChallengeFailed) {
		t.Errorf("wrong nonce: err = %v", err)
	}

	if _, err := s.Challenge("deadbeef", nonce); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: err = %v", err)
	}
	for _, bad := range []string{"", "not-a-uuid", "0b4e7a52-1f2d-4c8e-9a7b-3c6d5e4f2a1", "0b4e7a52x1f2d-4c8e-9a7b-3c6d5e4f2a1b"} {
		if _, err := s.Challenge(members.Kid, bad); !errors.Is(err, ErrInvalidNonce) {
			t.Errorf("nonce %q: err = %v", bad, err)
		}
	}
}

func TestChallengeRSA(t *testing.T) {
	ca, _, _ := openCA(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := signerWithKey(t, ca, key)
	body, err := json.Marshal(s.JWK())
	if err != nil {
		t.Fatal(err)
	}
	pub := keyFromJWKJSON(t, body).(*rsa.PublicKey)
	if !pub.Equal(&key.PublicKey) {
		t.Fatal("JWK n/e do not rebuild the key")
	}
	const nonce = "9d2c1b0a-8f7e-4d6c-b5a4-321098765432"
	resp, err := s.Challenge(s.KeyID(), nonce)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.RawURLEncoding.DecodeString(resp.Signature)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte(nonce))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig); err != nil {
		t.Error(err)
	}
	if err := VerifyChallenge(s.JWK(), nonce, resp); err != nil {
		t.Error(err)
	}
}
