package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

const (
	clientAPI     = "/edge/client/v1"
	managementAPI = "/edge/management/v1"
	headerSession = "zt-session"
)

// target is an HTTPS server under load: its base URL and the TLS
// configuration that trusts it.
type target struct {
	name string
	base string
	tls  *tls.Config
}

// trusting is a TLS configuration that trusts the PEM certificates in file.
func trusting(file string) (*tls.Config, error) {
	pemBytes, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("%s: no certificate", file)
	}
	return &tls.Config{RootCAs: pool, ServerName: "localhost"}, nil
}

// newClient is one keep-alive HTTP/1.1 connection's client.
func (t target) newClient() *http.Client {
	return &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		TLSClientConfig: t.tls.Clone(), MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}, // HTTP/1.1
	}}
}

// admin is a management session on postured, for setting up a run.
type admin struct {
	t     target
	hc    *http.Client
	token string
}

// call sends a JSON request and decodes the envelope's data into out
// (when not nil); any status but want is an error.
func call(ctx context.Context, hc *http.Client, method, url, token string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(headerSession, token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	return json.Unmarshal(env.Data, out)
}

// login opens an API session with a username and password on the client
// or management API and returns its token.
func login(ctx context.Context, hc *http.Client, base, apiPath, user, password string) (string, error) {
	var s struct {
		Token string `json:"token"`
	}
	err := call(ctx, hc, http.MethodPost, base+apiPath+"/authenticate?method=password", "",
		map[string]string{"username": user, "password": password}, &s, http.StatusOK)
	return s.Token, err
}

// waitReady polls the client API until postured answers it (it answers 503
// while its projection catches up with the log).
func waitReady(ctx context.Context, t target, within time.Duration) error {
	hc := t.newClient()
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, t.base+clientAPI+"/version", nil)
		resp, err := hc.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postured not ready within %s (last: %v)", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (a *admin) create(ctx context.Context, kind string, in any) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := call(ctx, a.hc, http.MethodPost, a.t.base+managementAPI+"/"+kind, a.token, in, &out, http.StatusCreated)
	return out.ID, err
}

// endpoint creates an identity with a password and logs it in on the
// client API: an API session of its own.
func (a *admin) endpoint(ctx context.Context, name string, attrs ...string) (string, error) {
	id, err := a.create(ctx, "identities", map[string]any{"name": name, "type": "Device", "isAdmin": false, "roleAttributes": attrs})
	if err != nil {
		return "", err
	}
	if _, err := a.create(ctx, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": name, "password": name + "-password"}); err != nil {
		return "", err
	}
	return login(ctx, a.hc, a.t.base, clientAPI, name, name+"-password")
}
