package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
)

// limitedServer serves the node like postured serve does (httpServer and
// limitListener), with the limits of cfg, and returns its address.
func limitedServer(t *testing.T, n *testNode, cfg serveCmd) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ln := cfg.limitListener(raw, nil, log)
	srv := cfg.httpServer(n.node, n.tlsConfig(), log)
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close(); <-done })
	return raw.Addr().String()
}

// tlsFrom opens a TLS connection from a local loopback address.
func tlsFrom(n *testNode, ip, addr string) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost", NextProtos: []string{"http/1.1"}})
}

// slowPost starts a POST that announces a 100,000-byte body and sends one
// byte of it.
func slowPost(c net.Conn) error {
	_, err := fmt.Fprintf(c, "POST %s/authenticate?method=password HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", api.ClientBase)
	return err
}

// TestSlowClientsAreCut: a source that opens more connections than
// --max-connections-per-source has the extra ones closed at once; a POST
// whose body trickles is cut after --read-timeout, and an idle keep-alive
// connection after --idle-timeout; headers over 64 KiB are refused (431);
// another source is answered all along.
func TestSlowClientsAreCut(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	cfg := n.cfg
	cfg.ReadTimeout, cfg.WriteTimeout, cfg.IdleTimeout = time.Second, 5*time.Second, time.Second
	cfg.MaxConnections, cfg.MaxConnsPerSource = 100, 8
	addr := limitedServer(t, n, cfg)

	// Eight slow POSTs from one address: all accepted.
	var slow []*tls.Conn
	start := time.Now()
	for i := range cfg.MaxConnsPerSource {
		c, err := tlsFrom(n, "127.0.0.2", addr)
		if err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
		defer c.Close()
		if err := slowPost(c); err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	// A ninth from the same address is closed before its handshake ends.
	if c, err := tlsFrom(n, "127.0.0.2", addr); err == nil {
		c.Close()
		t.Fatal("a connection over the per-source cap was served")
	}
	// Another address is answered meanwhile.
	other := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}).DialContext,
		TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"},
	}}
	resp, err := other.Get("https://" + addr + api.ClientBase + "/version")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another address while one is slow: %v %v", resp, err)
	}
	resp.Body.Close()
	// Headers are bounded (64 KiB).
	req, _ := http.NewRequest(http.MethodGet, "https://"+addr+api.ClientBase+"/version", nil)
	req.Header.Set("X-Padding", strings.Repeat("x", 100<<10))
	if resp, err := other.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a request with 100 KiB of headers: %v %v, want 431", resp, err)
	} else {
		resp.Body.Close()
	}

	// The slow bodies are cut: the server ends each connection (an answer,
	// if any, then EOF) once the read timeout passes.
	for i, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("slow connection %d was not closed by the server: %v", i, err)
		}
	}
	if d := time.Since(start); d < cfg.ReadTimeout {
		t.Fatalf("slow connections cut after %v, before the read timeout", d)
	}
	// Their places are free again.
	c, err := tlsFrom(n, "127.0.0.2", addr)
	if err != nil {
		t.Fatalf("the source after its slow connections were cut: %v", err)
	}
	defer c.Close()

	// An idle keep-alive connection is closed after the idle timeout.
	fmt.Fprintf(c, "GET %s/version HTTP/1.1\r\nHost: localhost\r\n\r\n", api.ClientBase)
	br := bufio.NewReader(c)
	resp, err = http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("keep-alive request: %v %v", resp, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	idle := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("idle connection not closed: %v", err)
	}
	t.Logf("idle connection closed after %v", time.Since(idle).Round(10*time.Millisecond))
}
