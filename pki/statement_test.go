package pki

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A statement verifies with the CA certificate, for its purpose only, and
// not once a byte of it or of its signature changes; for each key type a CA
// may have.
func TestSignStatement(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]crypto.Signer{"ecdsa": newP256(t), "rsa": rsaKey, "ed25519": edKey} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			data, err := encodeKey(key)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, caKeyFile), data, 0o600); err != nil {
				t.Fatal(err)
			}
			ca, err := Open(dir, Options{Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			msg := []byte("range 1..10 root abc")
			sig, err := ca.SignStatement("log checkpoint", msg)
			if err != nil {
				t.Fatal(err)
			}
			cert := ca.Certificate()
			if err := VerifyStatement(cert, "log checkpoint", msg, sig); err != nil {
				t.Fatalf("valid statement: %v", err)
			}
			altered := append([]byte(nil), msg...)
			altered[0] ^= 1
			badSig := append([]byte(nil), sig...)
			badSig[len(badSig)/2] ^= 1
			for what, c := range map[string]struct {
				purpose  string
				msg, sig []byte
			}{
				"other purpose": {"other", msg, sig},
				"altered msg":   {"log checkpoint", altered, sig},
				"altered sig":   {"log checkpoint", msg, badSig},
			} {
				if err := VerifyStatement(cert, c.purpose, c.msg, c.sig); !errors.Is(err, ErrBadStatementSignature) {
					t.Errorf("%s: got %v, want ErrBadStatementSignature", what, err)
				}
			}
			other, _, _ := openCA(t)
			if err := VerifyStatement(other.Certificate(), "log checkpoint", msg, sig); !errors.Is(err, ErrBadStatementSignature) {
				t.Errorf("another CA: got %v", err)
			}
			if _, err := ca.SignStatement("bad\x00purpose", msg); err == nil {
				t.Error("a purpose with a zero byte was accepted")
			}
			if len(KeyID(cert)) != 64 {
				t.Errorf("KeyID %q: want 64 hex digits", KeyID(cert))
			}
		})
	}
}
