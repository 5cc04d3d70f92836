package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
)

const testAdminPassword = "admin-password"

// testNode is a node served by httptest over TLS with its own certificate.
type testNode struct {
	*node
	srv  *httptest.Server
	http *http.Client
	cfg  serveCmd
}

func defaultTestConfig(dir string) serveCmd {
	return serveCmd{
		DataDir: dir, Listen: "127.0.0.1:0", StreamReplicas: 1, Sync: "interval", GroupCommit: true,
		APISessionTimeout: 30 * time.Minute, MFAGrace: 5 * time.Minute,
		AdminUsername: "admin", AdminPassword: testAdminPassword,
	}
}

// openNode opens a node and makes it ready (startNode, then ready).
func openNode(ctx context.Context, s *serveCmd, advertise string, log *slog.Logger) (*node, error) {
	n, err := startNode(ctx, s, advertise, log)
	if err != nil {
		return nil, err
	}
	if err := n.ready(ctx, s); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func startTestNode(t testing.TB, cfg serveCmd) *testNode {
	t.Helper()
	return startTestNodeLog(t, cfg, slog.New(slog.DiscardHandler))
}

// startTestNodeLog is startTestNode with the node's log in log.
func startTestNodeLog(t testing.TB, cfg serveCmd, log *slog.Logger) *testNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := openNode(ctx, &cfg, "127.0.0.1:1280", log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(n.handler)
	srv.TLS = n.tlsConfig()
	srv.StartTLS()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	tn := &testNode{node: n, srv: srv, cfg: cfg, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: validating(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}, MaxIdleConnsPerHost: 64}),
	}}
	t.Cleanup(func() {
		srv.Close()
		stop()
		<-done
		n.Close()
	})
	return tn
}

// response is a decoded API answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) envelope(t testing.TB) (data json.RawMessage, errBody api.APIError) {
	t.Helper()
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error api.APIError    `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("status %d: body is not an envelope: %v: %s", r.Status, err, r.Body)
	}
	return env.Data, env.Error
}

func (n *testNode) do(t testing.TB, method, path, token string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, n.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set(api.HeaderSession, token)
	}
	resp, err := n.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// login authenticates with a password on the given API base and returns the
// token.
func (n *testNode) login(t testing.TB, base, username, password string) string {
	t.Helper()
	r := n.do(t, http.MethodPost, base+"/authenticate?method=password", "", map[string]string{"username": username, "password": password})
	if r.Status != http.StatusOK {
		t.Fatalf("login %s: %d %s", username, r.Status, r.Body)
	}
	tok := r.Header.Get(api.HeaderSession)
	if tok == "" {
		t.Fatal("login: no zt-session header")
	}
	return tok
}

func (n *testNode) adminToken(t testing.TB) string {
	return n.login(t, api.ManagementBase, "admin", testAdminPassword)
}

// Close ends Run's loops before it closes the store they read: a node is
// closed while they run (as the restart tests do).
func TestCloseEndsRun(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := openNode(ctx, &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.Run(context.Background()) }()
	time.Sleep(300 * time.Millisecond) // the loops have started their rounds
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	default:
		t.Fatal("Close returned while Run's loops still ran")
	}
	if err := n.Run(context.Background()); err == nil {
		t.Fatal("Run on a closed node returned nil")
	}
}
