package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// loginForwarded sends a password login with the given X-Forwarded-For header.
func (n *testNode) loginForwarded(t testing.TB, xff, username, password string) response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"username": username, "password": password})
	req, err := http.NewRequest(http.MethodPost, n.srv.URL+api.ClientBase+"/authenticate?method=password", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Forwarded-For", xff)
	req.Header.Set("X-Real-IP", xff)
	resp, err := n.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// sessionIPs are the ipAddress of every API session created in the log, by
// token hash.
func (n *testNode) sessionIPs(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := n.elog.Read(t.Context(), 1, 0, func(b []posture.Event) error {
		for _, e := range b {
			if e.Type != posture.TypeAPISessionCreated {
				continue
			}
			p, err := e.Decode()
			if err != nil {
				return err
			}
			s := p.(posture.APISessionCreated).APISession
			out[s.TokenHash] = s.IPAddress
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestForwardedForIsBelievedOnlyFromTrustedProxies: X-Forwarded-For (and
// X-Real-IP) are ignored unless the peer is in --trusted-proxies; the API
// session's ipAddress, its event in the log and the rate limiter's source
// are the one resolved address.
func TestForwardedForIsBelievedOnlyFromTrustedProxies(t *testing.T) {
	for _, c := range []struct {
		name    string
		trusted []string
		want    string // the client address a login with XFF 6.6.6.6 records
	}{
		{"no trusted proxy", nil, "127.0.0.1"},
		{"trusted proxy", []string{"127.0.0.1/32", "10.0.0.0/8"}, "6.6.6.6"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaultTestConfig(t.TempDir())
			cfg.TrustedProxies = c.trusted
			n := startTestNode(t, cfg)
			clk := newStepClock(time.Now())
			n.client.Login.Limiter.Configure(api.LimiterOptions{SourceBurst: 2, SourceEvery: time.Hour, Now: clk.Now})

			r := n.loginForwarded(t, "6.6.6.6", "admin", testAdminPassword)
			if r.Status != http.StatusOK {
				t.Fatalf("login: %d %s", r.Status, r.Body)
			}
			tok := r.Header.Get(api.HeaderSession)
			var view api.APISessionView
			data, _ := n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", tok, nil).envelope(t)
			if err := json.Unmarshal(data, &view); err != nil {
				t.Fatal(err)
			}
			if view.IPAddress != c.want {
				t.Errorf("current-api-session ipAddress %q, want %q", view.IPAddress, c.want)
			}
			if got := n.sessionIPs(t)[api.TokenHash(tok)]; got != c.want {
				t.Errorf("apisession.created ipAddress %q, want %q", got, c.want)
			}

			// Two failures from 6.6.6.6 use up that source.
			for range 2 {
				expectError(t, n.loginForwarded(t, "6.6.6.6", "admin", "wrong-password"), 401, posture.CodeInvalidAuth, "")
			}
			expectError(t, n.loginForwarded(t, "6.6.6.6", "admin", "wrong-password"), 429, posture.CodeTooManyRequests, "")
			other := n.loginForwarded(t, "7.7.7.7", "admin", "wrong-password")
			if c.trusted == nil {
				// The header is not believed: a new value is the same source.
				expectError(t, other, 429, posture.CodeTooManyRequests, "")
			} else {
				// Behind a trusted proxy, another client is another source.
				expectError(t, other, 401, posture.CodeInvalidAuth, "")
			}
		})
	}
}

// TestTrustedProxiesFlagIsValidated: a --trusted-proxies entry that is not
// an address or a network stops the start with an error naming it.
func TestTrustedProxiesFlagIsValidated(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.TrustedProxies = []string{"10.0.0.0/8", "not-a-network"}
	_, err := startNode(t.Context(), &cfg, "127.0.0.1:1280", nil)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"not-a-network"`)) {
		t.Fatalf("start with a bad --trusted-proxies: %v", err)
	}
}
