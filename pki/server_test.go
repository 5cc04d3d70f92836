package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestServerCertificate(t *testing.T) {
	ca, clk, dir := openCA(t)
	sans := []string{"localhost", "127.0.0.1", "Example.com", "::1"}
	cert, err := ca.ServerCertificate(sans)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		t.Fatal("Leaf not set")
	}
	if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[0], leaf.Raw) || !bytes.Equal(cert.Certificate[1], ca.Certificate().Raw) {
		t.Fatal("chain is not leaf, CA")
	}
	if leaf.Subject.CommonName != "localhost" {
		t.Errorf("CN = %q", leaf.Subject.CommonName)
	}
	if got, want := leaf.NotAfter, epoch.Add(365*24*time.Hour); !got.Equal(want) {
		t.Errorf("NotAfter = %s, want %s", got, want)
	}
	for _, host := range []string{"localhost", "127.0.0.1", "example.com", "::1"} {
		_, err := leaf.Verify(x509.VerifyOptions{
			DNSName:     host,
			Roots:       ca.Pool(),
			CurrentTime: clk.Now(),
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("verify %s: %v", host, err)
		}
	}
	if err := ca.Verify(leaf, UsageServer); err != nil {
		t.Error(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, serverKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("server.key: %v %v", fi.Mode(), err)
	}
	handshake(t, cert, ca.Pool(), "localhost", clk.Now)

	// Same names (in another order, a subset): the stored certificate.
	again, err := ca.ServerCertificate([]string{"127.0.0.1", "LOCALHOST"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Leaf.Raw, leaf.Raw) {
		t.Error("re-issued although the names are covered")
	}
	// A reopened CA finds it too.
	reopened, err := Open(dir, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if again, err = reopened.ServerCertificate(sans); err != nil || !bytes.Equal(again.Leaf.Raw, leaf.Raw) {
		t.Errorf("reopened CA: re-issued (%v)", err)
	}

	// A new name: re-issued, same key.
	wider, err := ca.ServerCertificate(append(sans, "ctrl.example.org", "10.0.0.7"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(wider.Leaf.Raw, leaf.Raw) {
		t.Fatal("not re-issued for a new SAN")
	}
	if !wider.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(leaf.PublicKey) {
		t.Error("re-issue changed the key")
	}
	if err := wider.Leaf.VerifyHostname("10.0.0.7"); err != nil {
		t.Error(err)
	}
	handshake(t, wider, ca.Pool(), "ctrl.example.org", clk.Now)

	// Within 30 days of expiry: re-issued.
	clk.Advance(340 * 24 * time.Hour)
	renewed, err := ca.ServerCertificate(sans)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(renewed.Leaf.Raw, wider.Leaf.Raw) {
		t.Fatal("not renewed 25 days before expiry")
	}
	if got, want := renewed.Leaf.NotAfter, clk.Now().Add(365*24*time.Hour); !got.Equal(want) {
		t.Errorf("renewed NotAfter = %s, want %s", got, want)
	}
}

func TestServerCertificateBadNames(t *testing.T) {
	ca, _, _ := openCA(t)
	for _, sans := range [][]string{nil, {"", " "}, {"localhost:1280"}, {"a b"}, {"https://x"}} {
		if _, err := ca.ServerCertificate(sans); err == nil {
			t.Errorf("ServerCertificate(%q): no error", sans)
		}
	}
}

// handshake runs a TLS handshake over a pipe: the client trusts roots and
// dials serverName.
func handshake(t *testing.T, cert tls.Certificate, roots *x509.CertPool, serverName string, now func() time.Time) {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	done := make(chan error, 1)
	go func() {
		done <- tls.Server(s, &tls.Config{Certificates: []tls.Certificate{cert}, Time: now}).Handshake()
	}()
	if err := tls.Client(c, &tls.Config{RootCAs: roots, ServerName: serverName, Time: now}).Handshake(); err != nil {
		t.Errorf("client handshake with %s: %v", serverName, err)
	}
	c.Close()
	<-done
}

func TestServerCertificateCorruptKey(t *testing.T) {
	ca, _, dir := openCA(t)
	first, err := ca.ServerCertificate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, serverKeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	second, err := ca.ServerCertificate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Leaf.PublicKey.(*ecdsa.PublicKey).Equal(first.Leaf.PublicKey) {
		t.Error("kept a certificate whose key file is gone")
	}
	if err := ca.Verify(second.Leaf, UsageServer); err != nil {
		t.Error(err)
	}
}
