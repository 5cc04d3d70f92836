package main

import (
	"bufio"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTLSOffersOnlyECDHEWithAEAD: the HTTPS server negotiates TLS 1.3, and
// TLS 1.2 only with an ECDHE key exchange and an AEAD cipher; a client that
// offers a single suite of any other kind (CBC, SHA-1, RSA key exchange,
// 3DES, RC4), or an older protocol version, gets no connection.
func TestTLSOffersOnlyECDHEWithAEAD(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	addr := n.srv.Listener.Addr().String()
	handshake := func(cfg *tls.Config) (tls.ConnectionState, error) {
		cfg.RootCAs, cfg.ServerName = n.ca.Pool(), "localhost"
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer conn.Close()
		return conn.ConnectionState(), nil
	}

	checkSuites(t, "HTTPS", func(cfg *tls.Config) (tls.ConnectionState, error) { return handshake(cfg) })
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if _, err := handshake(&tls.Config{MinVersion: v, MaxVersion: v}); err == nil {
			t.Errorf("%s accepted", tls.VersionName(v))
		}
	}
	st, err := handshake(&tls.Config{MinVersion: tls.VersionTLS13})
	if err != nil || st.Version != tls.VersionTLS13 {
		t.Fatalf("TLS 1.3: %v %s", err, tls.VersionName(st.Version))
	}
}

// checkSuites offers each TLS 1.2 suite Go knows, alone, through handshake,
// and fails t unless exactly the ECDHE-ECDSA AEAD suites are accepted (the
// server keys are ECDSA).
func checkSuites(t *testing.T, what string, handshake func(*tls.Config) (tls.ConnectionState, error)) {
	t.Helper()
	var accepted []string
	all := append(tls.CipherSuites(), tls.InsecureCipherSuites()...)
	for _, s := range all {
		if !slices.Contains(s.SupportedVersions, tls.VersionTLS12) {
			continue
		}
		st, err := handshake(&tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{s.ID}})
		if err != nil {
			continue
		}
		if st.CipherSuite != s.ID {
			t.Fatalf("%s: offered %s, negotiated %s", what, s.Name, tls.CipherSuiteName(st.CipherSuite))
		}
		accepted = append(accepted, s.Name)
	}
	for _, name := range accepted {
		if !strings.HasPrefix(name, "TLS_ECDHE_") || !(strings.Contains(name, "_GCM_") || strings.Contains(name, "CHACHA20_POLY1305")) {
			t.Errorf("%s: TLS 1.2 accepts %s", what, name)
		}
	}
	want := []string{"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"}
	slices.Sort(accepted)
	if !slices.Equal(accepted, want) {
		t.Errorf("%s: TLS 1.2 suites accepted: %v, want %v", what, accepted, want)
	}
}

// TestNATSListenOffersOnlyECDHEWithAEAD: the embedded NATS server's
// --nats-listen port offers the same TLS as HTTPS: TLS 1.2 with ECDHE and
// AEAD only, TLS 1.3, nothing older.
func TestNATSListenOffersOnlyECDHEWithAEAD(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	n := startTestNode(t, cfg)
	// A NATS server sends its INFO line in clear, then the client starts
	// TLS.
	handshake := func(tc *tls.Config) (tls.ConnectionState, error) {
		tc.RootCAs, tc.ServerName = n.ca.Pool(), "localhost"
		conn, err := net.DialTimeout("tcp", cfg.NatsListen, 5*time.Second)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		info, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(info, "INFO ") || !strings.Contains(info, `"tls_required":true`) {
			t.Fatalf("NATS INFO: %q %v", info, err)
		}
		c := tls.Client(conn, tc)
		if err := c.Handshake(); err != nil {
			return tls.ConnectionState{}, err
		}
		return c.ConnectionState(), nil
	}
	checkSuites(t, "NATS", handshake)
	for _, v := range []uint16{tls.VersionTLS10, tls.VersionTLS11} {
		if _, err := handshake(&tls.Config{MinVersion: v, MaxVersion: v}); err == nil {
			t.Errorf("NATS: %s accepted", tls.VersionName(v))
		}
	}
	if st, err := handshake(&tls.Config{MinVersion: tls.VersionTLS13}); err != nil || st.Version != tls.VersionTLS13 {
		t.Fatalf("NATS: TLS 1.3: %v %s", err, tls.VersionName(st.Version))
	}
}
