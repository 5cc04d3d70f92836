package webhooks

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/seed-0809debe/posture"
)

// TestSignVerifies: a signature made with a generated secret verifies with
// the Standard Webhooks library, and not with another secret or body.
func TestSignVerifies(t *testing.T) {
	secret := posture.NewWebhookSecret()
	if err := posture.CheckWebhookSecret(secret); err != nil {
		t.Fatal(err)
	}
	tr := posture.Transition{ID: "t1", Kind: posture.TransitionPolicyFailing, IdentityID: "i1", At: time.Now().UTC()}
	payload, err := body(tr)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sig, err := Sign(secret, tr.ID, now, payload)
	if err != nil || !strings.HasPrefix(sig, "v1,") {
		t.Fatalf("signature %q: %v", sig, err)
	}
	h := http.Header{}
	h.Set("webhook-id", tr.ID)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	wh, _ := standardwebhooks.NewWebhook(secret)
	if err := wh.Verify(payload, h); err != nil {
		t.Fatalf("does not verify: %v", err)
	}
	if err := wh.Verify(append(payload, ' '), h); err == nil {
		t.Fatal("a changed body verifies")
	}
	other, _ := standardwebhooks.NewWebhook(posture.NewWebhookSecret())
	if err := other.Verify(payload, h); err == nil {
		t.Fatal("another secret verifies")
	}
	var ce map[string]any
	if err := json.Unmarshal(payload, &ce); err != nil {
		t.Fatal(err)
	}
	if ce["specversion"] != "1.0" || ce["id"] != "t1" || ce["type"] != "io.postured.transition.policy-failing" || ce["subject"] != "i1" || ce["source"] == "" {
		t.Fatalf("cloud event: %v", ce)
	}
}

// TestBackoff: the n-th retry waits between half and all of
// min*2^(n-1), capped at the maximum.
func TestBackoff(t *testing.T) {
	d := New(Options{MinBackoff: time.Second, MaxBackoff: time.Minute})
	for n := 1; n <= 100; n++ {
		full := time.Minute
		if n <= 6 {
			full = time.Second << (n - 1)
		}
		for range 20 {
			if got := d.backoff(n); got < full/2 || got > full {
				t.Fatalf("retry %d: %s, want within [%s, %s]", n, got, full/2, full)
			}
		}
	}
}

// TestCheckWebhookURL: https, or http only when allowed.
func TestCheckWebhookURL(t *testing.T) {
	for _, c := range []struct {
		url      string
		insecure bool
		ok       bool
	}{
		{"https://siem.example/hook", false, true},
		{"http://siem.example/hook", false, false},
		{"http://siem.example/hook", true, true},
		{"ftp://siem.example/hook", true, false},
		{"/relative", true, false},
	} {
		if err := posture.CheckWebhookURL(c.url, c.insecure); (err == nil) != c.ok {
			t.Errorf("%s (insecure %t): %v", c.url, c.insecure, err)
		}
	}
}

// TestRefuse: an address in a denied network is refused, written as IPv4
// or as IPv4 mapped into IPv6; others pass.
func TestRefuse(t *testing.T) {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	_, linkLocal, _ := net.ParseCIDR("fe80::/10")
	control := refuse([]*net.IPNet{loopback, linkLocal})
	for address, ok := range map[string]bool{
		"127.0.0.1:443": false, "[::ffff:127.0.0.2]:80": false, "[fe80::1%eth0]:443": false,
		"10.1.2.3:443": true, "[2001:db8::1]:443": true, "128.0.0.1:443": true,
	} {
		if err := control("tcp", address, nil); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", address, err, ok)
		}
	}
}

// TestGuarded: through a proxy, the receiver's own address is checked
// before the proxy is asked, and the proxy is asked for that address, with
// the name in the Host header.
func TestGuarded(t *testing.T) {
	_, private, _ := net.ParseCIDR("10.0.0.0/8")
	asked := 0
	var last *http.Request
	g := guarded{deny: []*net.IPNet{private}, next: roundTrip(func(r *http.Request) (*http.Response, error) {
		asked++
		last = r
		return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody}, nil
	})}
	for url, ok := range map[string]bool{"https://10.1.2.3/hook": false, "https://[::ffff:10.0.0.1]/hook": false, "https://192.0.2.1/hook": true} {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		before := asked
		_, err := g.RoundTrip(req)
		if (err == nil) != ok || (asked > before) != ok {
			t.Errorf("%s: %v, proxy asked %v; want allowed %v", url, err, asked > before, ok)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "https://localhost/hook", nil)
	if _, err := g.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if host, port, _ := net.SplitHostPort(last.URL.Host); net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() || port != "443" || last.Host != "localhost" {
		t.Fatalf("the proxy was asked for %s (Host %q), want localhost's address on 443 with Host localhost", last.URL.Host, last.Host)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestReachable: an address in a denied network and an IPv4 address in a
// short form are refused; names, and addresses elsewhere, are not.
func TestReachable(t *testing.T) {
	_, loopback, _ := net.ParseCIDR("127.0.0.0/8")
	deny := []*net.IPNet{loopback}
	for url, refused := range map[string]bool{
		"https://127.0.0.1/hook":      true,
		"https://[::ffff:127.0.0.1]/": true,
		"https://127.1/hook":          true,
		"https://0x7f000001/hook":     true,
		"https://0X7F.1:8443/":        true,
		"https://2130706433/hook":     true,
		"https://10.0.0.7/hook":       false,
		"https://hooks.example/hook":  false,
		"https://hooks.example./hook": false,
		"https://1.example/hook":      false,
		"https://0x7f.example/hook":   false,
		"https://receiver:8443/hook":  false,
		"https://hooks.example.123/":  true,
		"https://hooks.example.0x1f/": true,
		"https://hooks.example.0xgg/": false,
		"https://:443/hook":           true,
	} {
		if err := Reachable(url, deny); (err != nil) != refused {
			t.Errorf("%s: %v, want refused %v", url, err, refused)
		}
	}
}

// TestErrTextHidesTheResolver: a failed lookup names the host, not the
// node's DNS server.
func TestErrTextHidesTheResolver(t *testing.T) {
	err := &url.Error{Op: "Post", URL: "https://nope.invalid/hook", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: &net.DNSError{Err: "no such host", Name: "nope.invalid", Server: "10.255.255.53:53", IsNotFound: true}}}
	got := result{err: err}.errText()
	if got != "the lookup of nope.invalid failed: no such host" || strings.Contains(got, "10.255.255.53") {
		t.Fatalf("errText: %q", got)
	}
	if got := (result{err: errors.New("dial tcp 192.0.2.2:443: connect: connection refused")}).errText(); !strings.Contains(got, "connection refused") {
		t.Fatalf("errText of a refused connection: %q", got)
	}
}
