package pki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
)

// TestServiceCertificate: a fresh key each time, nothing written, valid for
// servers and clients under the CA for the names asked, and its key encodes
// to a PEM that parses back to the same key.
func TestServiceCertificate(t *testing.T) {
	ca, clk, dir := openCA(t)
	a, err := ca.ServiceCertificate([]string{"127.0.0.1", "nats.example"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ca.ServiceCertificate([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if keyMatches(b.Leaf, a.PrivateKey.(crypto.Signer)) {
		t.Error("two service certificates share a key")
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, host := range []string{"127.0.0.1", "nats.example"} {
			if _, err := a.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: ca.Pool(), CurrentTime: clk.Now(),
				KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("%s for %v: %v", host, usage, err)
			}
		}
	}
	if len(a.Certificate) != 2 || !bytes.Equal(a.Certificate[1], ca.Certificate().Raw) {
		t.Error("chain is not leaf, CA")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != caCertFile && e.Name() != caKeyFile {
			t.Errorf("ServiceCertificate wrote %s", filepath.Join(dir, e.Name()))
		}
	}
	pemKey, err := EncodeKeyPEM(a.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := parseKey(pemKey)
	if err != nil || !keyMatches(a.Leaf, key) {
		t.Fatalf("encoded key does not parse back to the certificate's: %v", err)
	}
	if _, err := ca.ServiceCertificate(nil); err == nil {
		t.Error("a certificate without names")
	}
}
