package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/projections"
)

// scrape reads a node's metrics.
func scrape(t *testing.T, n *testNode) string {
	t.Helper()
	r := n.do(t, http.MethodGet, "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("metrics: %d %s", r.Status, r.Body)
	}
	return string(r.Body)
}

// metricValue is the value of one series (with its labels as written).
func metricValue(t *testing.T, body, series string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no series %s in:\n%s", series, body)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestMetricsOnANode: a node's /metrics (public, outside the APIs) exposes
// the named series with the node's figures: requests by route and status,
// append latency, a refused session request by check type, the consumer
// position and lag, the deadline queue. /livez and /readyz answer 200.
func TestMetricsOnANode(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	check := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "modern-windows",
		"operatingSystems": []any{map[string]any{"type": "WINDOWS", "versions": []string{">=10.0.0"}}}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}})
	ep := n.endpoint(t, admin, "laptop")
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusConflict {
		t.Fatalf("session without posture: %d %s", r.Status, r.Body)
	}
	n.do(t, http.MethodGet, "/no-such-thing", "", nil)

	body := scrape(t, n)
	cursor := n.store.Cursor()
	for series, want := range map[string]float64{
		`postured_http_requests_total{method="POST",route="/edge/client/v1/sessions",status="409"}`:           1,
		`postured_http_requests_total{method="POST",route="/edge/management/v1/posture-checks",status="201"}`: 1,
		`postured_http_requests_total{method="GET",route="unmatched",status="404"}`:                           1,
		`postured_failed_service_requests_total{check_type="OS"}`:                                             1,
		`postured_consumer_position`:          float64(cursor),
		`postured_log_last_sequence`:          float64(cursor),
		`postured_projection_lag_events`:      0,
		`postured_projection_lag_seconds`:     0,
		`postured_deadline_queue_length`:      0,
		`postured_log_up`:                     1,
		`postured_api_sessions_evicted_total`: 0,
	} {
		if got := metricValue(t, body, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if got := metricValue(t, body, `postured_append_duration_seconds_count{op="append",result="ok"}`); got < 3 {
		t.Errorf("timed appends: %v", got)
	}
	if !strings.Contains(body, `postured_append_duration_seconds_bucket{op="append_if_last",result="ok",le="0.005"}`) {
		t.Errorf("no append latency histogram for model changes")
	}
	for _, p := range []string{"/livez", "/readyz"} {
		if r := n.do(t, http.MethodGet, p, "", nil); r.Status != http.StatusOK {
			t.Errorf("%s: %d %s", p, r.Status, r.Body)
		}
	}
}

// gatedSource lets a projection apply the first half of its first batch,
// then holds it until release is closed.
type gatedSource struct {
	src     projections.Source
	release chan struct{}
}

func (g *gatedSource) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	first := true
	return g.src.Consume(ctx, from, func(b []posture.Event) error {
		if first && len(b) > 1 {
			first = false
			if err := fn(b[:len(b)/2]); err != nil {
				return err
			}
			select {
			case <-g.release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return fn(b[len(b)/2:])
		}
		return fn(b)
	})
}

// TestHealthReadinessWhileRebuilding: a projection rebuilt from the log is
// not ready (503, with its lag in the metrics) until it has applied the
// log's last event; then it is.
func TestHealthReadinessWhileRebuilding(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	for i := range 5 {
		n.create(t, admin, "services", map[string]any{"name": "svc-" + strconv.Itoa(i)})
	}
	last := n.lastSeq(t)

	// A fresh projection on the same log, behind the real probe and
	// metrics handlers.
	store, err := projections.Open(projections.Options{Dir: filepath.Join(t.TempDir(), "rebuilt")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	state := (&node{elog: n.elog}).logState
	m := api.NewMetrics(api.MetricsOptions{Progress: store, State: state, Deadlines: store})
	e := api.New(api.Options{SystemPaths: api.SystemPaths, Metrics: m})
	api.RegisterSystem(e, m, &api.Health{Progress: store, State: state, Wait: 100 * time.Millisecond})
	srv := httptest.NewServer(e)
	defer srv.Close()
	probe := func() (int, api.ReadyView, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env struct{ Data api.ReadyView }
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			t.Fatal(err)
		}
		mr, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer mr.Body.Close()
		metrics, _ := io.ReadAll(mr.Body)
		return resp.StatusCode, env.Data, string(metrics)
	}

	if status, v, _ := probe(); status != http.StatusServiceUnavailable || v.Ready || v.LagEvents != last {
		t.Fatalf("empty projection: %d %+v (log at %d)", status, v, last)
	}
	gate := &gatedSource{src: n.elog, release: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	runDone := make(chan error, 1)
	go func() { runDone <- store.Run(ctx, gate) }()
	defer func() { cancel(); <-runDone }()
	if err := store.WaitFor(ctx, 1); err != nil {
		t.Fatal(err)
	}
	status, v, metrics := probe()
	if status != http.StatusServiceUnavailable || v.Ready || v.Cursor == 0 || v.Cursor >= last || v.LagEvents != last-v.Cursor {
		t.Fatalf("half-way: %d %+v (log at %d)", status, v, last)
	}
	if got := metricValue(t, metrics, "postured_projection_lag_events"); got != float64(last-v.Cursor) {
		t.Fatalf("lag in events half-way: %v", got)
	}
	if got := metricValue(t, metrics, "postured_projection_lag_seconds"); got <= 0 {
		t.Fatalf("lag in seconds half-way: %v", got)
	}

	close(gate.release)
	if err := store.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if status, v, metrics := probe(); status != http.StatusOK || !v.Ready || v.LagEvents != 0 ||
		metricValue(t, metrics, "postured_projection_lag_events") != 0 {
		t.Fatalf("caught up: %d %+v", status, v)
	}
}

// TestStartingNodeServesProbes: a node catching up with the log (it builds
// its APIs only then) answers the probes and the metrics, is not ready,
// and answers its APIs 503 SERVICE_UNAVAILABLE; once ready, it serves them.
func TestStartingNodeServesProbes(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n, err := startNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := httptest.NewUnstartedServer(n)
	srv.TLS = n.tlsConfig()
	srv.StartTLS()
	defer srv.Close()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: validating(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}})}
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}

	for path, want := range map[string]int{"/livez": http.StatusOK, "/metrics": http.StatusOK, "/readyz": http.StatusServiceUnavailable} {
		if status, body := get(path); status != want {
			t.Errorf("starting: %s answered %d, want %d: %s", path, status, want, body)
		}
	}
	status, body := get("/edge/client/v1/version")
	var env struct {
		Error struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || status != http.StatusServiceUnavailable || env.Error.Code != posture.CodeUnavailable {
		t.Fatalf("starting: the client API answered %d %s", status, body)
	}

	if err := n.ready(t.Context(), &cfg); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/readyz", "/edge/client/v1/version"} {
		if status, body := get(path); status != http.StatusOK {
			t.Errorf("ready: %s answered %d: %s", path, status, body)
		}
	}
}
