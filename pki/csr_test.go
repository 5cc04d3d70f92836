package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

func TestSignCSR(t *testing.T) {
	ca, clk, _ := openCA(t)
	key := newP256(t)
	csrPEM := makeCSR(t, key, "requested", []string{"host.local"}, nil)
	notAfter := epoch.Add(12 * time.Hour)

	cert, certPEM, err := ca.SignCSR(csrPEM, SignRequest{CommonName: "identity-id", NotAfter: notAfter})
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "identity-id" {
		t.Errorf("CN = %q", cert.Subject.CommonName)
	}
	if len(cert.Subject.Organization) != 1 || cert.Subject.Organization[0] != "test" {
		t.Errorf("O = %q, want the CSR's", cert.Subject.Organization)
	}
	if !cert.NotAfter.Equal(notAfter) || !cert.NotBefore.Equal(epoch.Add(-time.Minute)) {
		t.Errorf("validity %s .. %s", cert.NotBefore, cert.NotAfter)
	}
	if !cert.PublicKey.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
		t.Error("certificate is not for the CSR key")
	}
	if n := cert.SerialNumber; n.Sign() <= 0 || n.BitLen() > 128 {
		t.Errorf("serial %v is not a positive 128-bit number", n)
	}
	if len(cert.DNSNames) != 1 || cert.DNSNames[0] != "host.local" {
		t.Errorf("DNSNames = %q", cert.DNSNames)
	}
	if !ca.IssuedBy(cert) {
		t.Error("IssuedBy = false")
	}
	if err := ca.Verify(cert, UsageClient); err != nil {
		t.Error(err)
	}
	if err := ca.Verify(cert, UsageServer); !errors.Is(err, ErrCertificateFailedValidation) {
		t.Errorf("client cert verified for server use: %v", err)
	}
	parsed, err := ParseCertificatePEM(certPEM)
	if err != nil || !parsed.Equal(cert) {
		t.Fatalf("PEM round trip: %v", err)
	}
	clk.Advance(13 * time.Hour)
	if err := ca.Verify(cert, UsageClient); !errors.Is(err, ErrCertificateFailedValidation) {
		t.Errorf("expired cert verified: %v", err)
	}

	// Not issued by this CA.
	other, otherKey := selfSignedCA(t, "other")
	if ca.IssuedBy(leafFrom(t, other, otherKey, "x")) {
		t.Error("IssuedBy(foreign) = true")
	}
}

func TestSignCSRServerUsageAndForms(t *testing.T) {
	ca, _, _ := openCA(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	csrPEM := makeCSR(t, rsaKey, "router", []string{"router.example.com"}, []net.IP{net.ParseIP("192.0.2.1")})
	block, _ := pem.Decode(csrPEM)
	forms := map[string][]byte{
		"pem":        csrPEM,
		"der":        block.Bytes,
		"base64":     []byte(base64.StdEncoding.EncodeToString(block.Bytes)),
		"base64 raw": []byte(base64.RawStdEncoding.EncodeToString(block.Bytes) + "\n"),
		"ed25519":    makeCSR(t, edKey, "router", []string{"router.example.com"}, nil),
	}
	for name, csr := range forms {
		cert, _, err := ca.SignCSR(csr, SignRequest{Usage: UsageServer})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if cert.Subject.CommonName != "router" {
			t.Errorf("%s: CN = %q, want the CSR's", name, cert.Subject.CommonName)
		}
		if !cert.NotAfter.Equal(epoch.Add(DefaultValidity)) {
			t.Errorf("%s: NotAfter = %s", name, cert.NotAfter)
		}
		if err := ca.Verify(cert, UsageServer); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if err := cert.VerifyHostname("router.example.com"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestSignCSRErrors(t *testing.T) {
	ca, _, _ := openCA(t)
	good := makeCSR(t, newP256(t), "x", nil, nil)
	block, _ := pem.Decode(good)
	bad := append([]byte(nil), block.Bytes...)
	bad[len(bad)-1] ^= 0xff // inside the signature
	badPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: bad})
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	names := func(n int) []string {
		dns := make([]string, n)
		for i := range dns {
			dns[i] = fmt.Sprintf("h%d.example.com", i)
		}
		return dns
	}
	// A request beside other PEM blocks (openssl's EC PARAMETERS) is taken.
	params := append(pem.EncodeToMemory(&pem.Block{Type: "EC PARAMETERS", Bytes: []byte{6, 8, 42, 134, 72, 206, 61, 3, 1, 7}}), good...)
	if _, _, err := ca.SignCSR(params, SignRequest{}); err != nil {
		t.Errorf("a request after EC PARAMETERS: %v", err)
	}
	if _, _, err := ca.SignCSR(makeCSR(t, newP256(t), "x", names(MaxCSRNames), nil), SignRequest{}); err != nil {
		t.Errorf("%d names: %v", MaxCSRNames, err)
	}

	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrMissingCSR},
		{"blank", []byte(" \n"), ErrMissingCSR},
		{"garbage", []byte("hello"), ErrInvalidCSR},
		{"certificate PEM", ca.PEM(), ErrInvalidCSR},
		{"truncated DER", block.Bytes[:40], ErrInvalidCSR},
		{"bad signature", badPEM, ErrCSRSignature},
		{"bad signature DER", bad, ErrCSRSignature},
		{"RSA 1024", makeCSR(t, weak, "x", nil, nil), ErrInvalidCSR},
		{"P-224", makeCSR(t, p224, "x", nil, nil), ErrInvalidCSR},
		{"too many names", makeCSR(t, newP256(t), "x", names(MaxCSRNames+1), nil), ErrInvalidCSR},
		{"a long subject", makeCSR(t, newP256(t), strings.Repeat("x", MaxCSRSubject), nil, nil), ErrInvalidCSR},
		{"two requests", append(append([]byte(nil), good...), makeCSR(t, newP256(t), "y", nil, nil)...), ErrInvalidCSR},
	}
	for _, tt := range tests {
		if _, _, err := ca.SignCSR(tt.in, SignRequest{}); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}

	if _, _, err := ca.SignCSR(good, SignRequest{NotAfter: epoch.Add(-time.Second)}); err == nil {
		t.Error("NotAfter in the past: no error")
	}
	if _, _, err := ca.SignCSR(good, SignRequest{Usage: Usage(7)}); err == nil {
		t.Error("unknown usage: no error")
	}
	cert, _, err := ca.SignCSR(good, SignRequest{NotAfter: epoch.AddDate(20, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if !cert.NotAfter.Equal(ca.Certificate().NotAfter) {
		t.Errorf("NotAfter %s not capped at the CA's %s", cert.NotAfter, ca.Certificate().NotAfter)
	}
}

// TestSignCSRRefusesTakenNames: a CSR may not ask for a name or an address
// that one of the taken certificates is valid for, in any case, nor for a
// wildcard that covers one of their names.
func TestSignCSRRefusesTakenNames(t *testing.T) {
	ca, _, _ := openCA(t)
	controller, _, err := ca.SignCSR(makeCSR(t, newP256(t), "ctrl", []string{"ctrl.example.com", "*.nats.example.com"}, []net.IP{net.ParseIP("10.0.0.1")}), SignRequest{Usage: UsageServer})
	if err != nil {
		t.Fatal(err)
	}
	taken := []*x509.Certificate{controller}
	for _, tt := range []struct {
		dns []string
		ips []net.IP
		ok  bool
	}{
		{dns: []string{"router.example.com"}, ips: []net.IP{net.ParseIP("10.0.0.2")}, ok: true},
		{dns: []string{"router.example.com", "CTRL.example.com"}},
		{dns: []string{"*.example.com"}},
		{dns: []string{"n1.nats.example.com"}},
		{ips: []net.IP{net.ParseIP("10.0.0.1")}},
		{ips: []net.IP{net.ParseIP("::ffff:10.0.0.1")}},
	} {
		_, _, err := ca.SignCSR(makeCSR(t, newP256(t), "r", tt.dns, tt.ips), SignRequest{Usage: UsageServer, Taken: taken})
		if tt.ok != (err == nil) || err != nil && !errors.Is(err, ErrInvalidCSR) {
			t.Errorf("%v %v: %v", tt.dns, tt.ips, err)
		}
	}
}
