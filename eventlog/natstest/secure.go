package natstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// Secure describes the credentials of a cluster started by StartSecure:
// files a client uses to connect. The servers present a certificate issued by
// CAFile for 127.0.0.1 and localhost.
type Secure struct {
	// CAFile verifies the servers' certificates (PEM).
	CAFile string
	// PosturedSeed and AuditorSeed are nkey seed files of a user with the
	// postured and the auditor role.
	PosturedSeed, AuditorSeed string
	// ClientCert and ClientKey are a client certificate from the same CA,
	// for mutual TLS.
	ClientCert, ClientKey string
	// OtherCAFile is a CA that did not issue the servers' certificates.
	OtherCAFile string
	// Account is the account the users (and the stream) live in.
	Account string
}

// SecureOptions configure StartSecure.
type SecureOptions struct {
	// VerifyClients makes the servers require a client certificate from
	// the CA (mutual TLS) besides the nkey.
	VerifyClients bool
}

// StartSecure is Start with authentication and TLS, configured as deploy/
// nats configures a production cluster: TLS on the client port, the accounts,
// users and permissions of deploy/nats/accounts.conf (inlined, with the
// users' public nkeys), routes that authenticate with a password over TLS.
// Anonymous clients are refused.
func StartSecure(t testing.TB, size int, o SecureOptions) (*Cluster, *Secure) {
	t.Helper()
	dir := t.TempDir()
	sec := &Secure{Account: "POSTURED"}
	caCert, caKey := newCA(t, "natstest CA")
	sec.CAFile = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	other, _ := newCA(t, "natstest other CA")
	sec.OtherCAFile = writePEM(t, dir, "other-ca.pem", "CERTIFICATE", other.Raw)
	serverCert, serverKey := issue(t, caCert, caKey, "127.0.0.1")
	certFile := writePEM(t, dir, "server.pem", "CERTIFICATE", serverCert)
	keyFile := writePEM(t, dir, "server.key", "PRIVATE KEY", serverKey)
	clientCert, clientKey := issue(t, caCert, caKey, "natstest client")
	sec.ClientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert)
	sec.ClientKey = writePEM(t, dir, "client.key", "PRIVATE KEY", clientKey)
	postured, posturedPub := newUser(t, dir, "postured.nk")
	auditor, auditorPub := newUser(t, dir, "auditor.nk")
	sec.PosturedSeed, sec.AuditorSeed = postured, auditor

	accounts, err := os.ReadFile(AccountsConf())
	if err != nil {
		t.Fatal(err)
	}
	var pw [16]byte
	rand.Read(pw[:])
	password := hex.EncodeToString(pw[:])
	c := start(t, size, func(i int, cluster string, routes []string) string {
		var routeURLs []string
		for _, r := range routes {
			routeURLs = append(routeURLs, fmt.Sprintf("%q", "nats-route://route:"+password+"@"+strings.TrimPrefix(r, "nats://")))
		}
		return fmt.Sprintf(`
NATS_POSTURED_NKEY: %q
NATS_AUDITOR_NKEY: %q
server_name: "nats-%d"
listen: "127.0.0.1:-1"
jetstream { store_dir: %q }
tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 5, verify: %t }
cluster {
  name: "postured-test"
  listen: %q
  routes: [%s]
  authorization { user: "route", password: %q, timeout: 5 }
  tls { cert_file: %q, key_file: %q, ca_file: %q, timeout: 5, verify: true }
}
%s
`, posturedPub, auditorPub, i+1, t.TempDir(), certFile, keyFile, sec.CAFile, o.VerifyClients,
			cluster, strings.Join(routeURLs, ", "), password, certFile, keyFile, sec.CAFile, accounts)
	})
	c.Account = sec.Account
	for i, ns := range c.Servers {
		c.URLs[i] = strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	}
	return c, sec
}

// AccountsConf is the path of deploy/nats/accounts.conf in this repository.
func AccountsConf() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "nats", "accounts.conf")
}

func newCA(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue makes a leaf for name (an IP address gets localhost too), valid for
// servers and clients, and returns it and its PKCS#8 key (DER).
func issue(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, name string) (cert, key []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ip := net.ParseIP(name); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
		tmpl.DNSNames = []string{"localhost"}
	}
	cert, err = x509.CreateCertificate(rand.Reader, tmpl, ca, k.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err = x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t testing.TB, dir, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newUser writes a new nkey user seed to dir/name and returns the file and
// the public key.
func newUser(t testing.TB, dir, name string) (seedFile, public string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}
