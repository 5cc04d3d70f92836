package pki

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smallstep/pkcs7"
)

func TestOpenCreatesThenReloads(t *testing.T) {
	clk := newClock()
	dir := filepath.Join(t.TempDir(), "state", "pki") // does not exist yet
	ca, err := Open(dir, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	cert := ca.Certificate()
	if !strings.HasPrefix(cert.Subject.CommonName, "postured CA ") {
		t.Errorf("CN = %q", cert.Subject.CommonName)
	}
	if !cert.IsCA || !cert.BasicConstraintsValid {
		t.Error("not a CA certificate")
	}
	if got, want := cert.NotAfter, epoch.AddDate(10, 0, 0); !got.Equal(want) {
		t.Errorf("NotAfter = %s, want %s", got, want)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		t.Errorf("not self-signed: %v", err)
	}
	for name, want := range map[string]os.FileMode{"": 0o700, caKeyFile: 0o600, caCertFile: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%q mode = %v, want %v", name, got, want)
		}
	}

	clk.Advance(48 * time.Hour)
	again, err := Open(dir, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Certificate().Raw, cert.Raw) {
		t.Error("reopened CA has a different certificate")
	}
	if !bytes.Equal(again.PEM(), ca.PEM()) {
		t.Error("PEM differs")
	}
}

func TestOpenKeyWithoutCertificate(t *testing.T) {
	ca, clk, dir := openCA(t)
	if err := os.Remove(filepath.Join(dir, caCertFile)); err != nil {
		t.Fatal(err)
	}
	again, err := Open(dir, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(again.Certificate().Raw, ca.Certificate().Raw) {
		t.Fatal("expected a new certificate")
	}
	if !keyMatches(again.Certificate(), ca.key) {
		t.Error("new certificate is not for the existing key")
	}
}

func TestOpenRejectsMismatchedKey(t *testing.T) {
	_, clk, dir := openCA(t)
	data, err := encodeKey(newP256(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, caKeyFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{Now: clk.Now}); !errors.Is(err, ErrUnsupportedKey) {
		t.Fatalf("err = %v, want ErrUnsupportedKey", err)
	}
}

func TestOpenRejectsExpiredCA(t *testing.T) {
	_, clk, dir := openCA(t)
	clk.Advance(11 * 365 * 24 * time.Hour)
	if _, err := Open(dir, Options{Now: clk.Now}); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("err = %v, want expired", err)
	}
}

func TestOpenConcurrentFirstUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki")
	clk := newClock()
	const n = 8
	cas := make([]*CA, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { cas[i], errs[i] = Open(dir, Options{Now: clk.Now}) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !bytes.Equal(cas[i].Certificate().Raw, cas[0].Certificate().Raw) {
			t.Fatalf("Open %d got a different CA", i)
		}
	}
}

func TestFingerprint(t *testing.T) {
	ca, _, _ := openCA(t)
	sum := sha1.Sum(ca.Certificate().Raw)
	if got, want := Fingerprint(ca.Certificate()), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Fingerprint = %s, want %s", got, want)
	}
	if fp := Fingerprint(ca.Certificate()); len(fp) != 40 || fp != strings.ToLower(fp) {
		t.Errorf("Fingerprint %q is not 40 lower-case hex digits", fp)
	}
}

func TestPKCS7Bundle(t *testing.T) {
	ca, _, _ := openCA(t)
	body, err := ca.PKCS7()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	for i, l := range lines {
		if len(l) > 64 || (i < len(lines)-1 && len(l) != 64) {
			t.Errorf("line %d has %d columns", i, len(l))
		}
	}
	der, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(body, "\n", ""))
	if err != nil {
		t.Fatal(err)
	}
	p7, err := pkcs7.Parse(der)
	if err != nil {
		t.Fatal(err)
	}
	if len(p7.Certificates) != 1 || !p7.Certificates[0].Equal(ca.Certificate()) {
		t.Fatalf("bundle holds %d certificates, want the CA", len(p7.Certificates))
	}
}

func TestParseCertificatesPEM(t *testing.T) {
	ca, _, _ := openCA(t)
	other, otherKey := selfSignedCA(t, "other")
	data := append([]byte("junk\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), EncodePEM(ca.Certificate(), other)...)
	certs, err := ParseCertificatesPEM(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(certs) != 2 || !certs[0].Equal(ca.Certificate()) || !certs[1].Equal(other) {
		t.Fatalf("got %d certificates", len(certs))
	}
	first, err := ParseCertificatePEM(data)
	if err != nil || !first.Equal(ca.Certificate()) {
		t.Fatalf("ParseCertificatePEM = %v, %v", first, err)
	}
	if _, err := ParseCertificatePEM([]byte("not pem")); !errors.Is(err, ErrInvalidCertificate) {
		t.Errorf("err = %v, want ErrInvalidCertificate", err)
	}
	if _, err := ParseCACertificatePEM(EncodePEM(other)); err != nil {
		t.Errorf("ParseCACertificatePEM(CA) = %v", err)
	}
	leaf := leafFrom(t, other, otherKey, "x")
	if _, err := ParseCACertificatePEM(EncodePEM(leaf)); !errors.Is(err, ErrInvalidCertificate) {
		t.Errorf("ParseCACertificatePEM(leaf) = %v, want ErrInvalidCertificate", err)
	}
	if _, err := ParseCACertificatePEM(weakCAPEM(t)); !errors.Is(err, ErrInvalidCertificate) || !strings.Contains(err.Error(), "1024-bit RSA key is too weak") {
		t.Errorf("ParseCACertificatePEM(a CA with a 1024-bit RSA key) = %v, want ErrInvalidCertificate", err)
	}
}
