package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
)

// clientFrom is an HTTPS client of the node whose connections come from the
// given local (loopback) address.
func (n *testNode) clientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 30 * time.Second, Transport: tr}
}

// loginWith posts a password login with the client and returns the status.
func (n *testNode) loginWith(t testing.TB, c *http.Client, username, password string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	resp, err := c.Post(n.srv.URL+api.ClientBase+"/authenticate?method=password", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestFailedLoginsFromOneSourceDoNotLockOutAnother: an attacker at
// 127.0.0.2 sends a wrong password for admin every 0.25 s for five minutes
// (limiter time); the admin, logging in from 127.0.0.3 in the meantime, is
// never refused, while the attacker gets at most the (user, source) budget:
// 10 guesses, then one every 6 s. Guessing spread over many addresses uses
// up the user's overall budget: then a source the admin never logged in
// from is refused, and one it did log in from still gets in.
func TestFailedLoginsFromOneSourceDoNotLockOutAnother(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	clk := newStepClock(time.Now())
	n.client.Login.Limiter.Configure(api.LimiterOptions{Now: clk.Now})
	attacker, admin := n.clientFrom(t, "127.0.0.2"), n.clientFrom(t, "127.0.0.3")

	const step, attempts = 250 * time.Millisecond, 1200 // five minutes
	guesses, refusedAdmin := 0, 0
	for i := range attempts {
		switch s := n.loginWith(t, attacker, "admin", "wrong-password"); s {
		case http.StatusUnauthorized:
			guesses++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("attacker: status %d", s)
		}
		if i%40 == 0 {
			if s := n.loginWith(t, admin, "admin", testAdminPassword); s != http.StatusOK {
				refusedAdmin++
			}
		}
		clk.Advance(step)
	}
	if refusedAdmin != 0 {
		t.Errorf("the admin was refused %d times of %d while another address guessed", refusedAdmin, attempts/40)
	}
	if max := 10 + int(attempts*step/(6*time.Second)) + 1; guesses > max {
		t.Errorf("the attacker got %d guesses in %v, want at most %d", guesses, attempts*step, max)
	}
	t.Logf("attacker: %d wrong passwords checked of %d sent in %v", guesses, attempts, attempts*step)

	// Guessing spread over many addresses: 11 sources × 10 guesses use up
	// the user's overall budget of 100.
	for i := range 11 {
		c := n.clientFrom(t, net.IPv4(127, 0, 1, byte(10+i)).String())
		for range 10 {
			n.loginWith(t, c, "admin", "wrong-password")
		}
	}
	if s := n.loginWith(t, n.clientFrom(t, "127.0.0.4"), "admin", testAdminPassword); s != http.StatusTooManyRequests {
		t.Errorf("the admin from a new address after a distributed attack: %d, want 429", s)
	}
	if s := n.loginWith(t, admin, "admin", testAdminPassword); s != http.StatusOK {
		t.Errorf("the admin from a known address after a distributed attack: %d, want 200", s)
	}
}
