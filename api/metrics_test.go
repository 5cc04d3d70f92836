package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// fakeProgress is a projection whose cursor the test moves.
type fakeProgress struct {
	mu        sync.Mutex
	cursor    uint64
	appliedAt time.Time
}

func (p *fakeProgress) set(cursor uint64, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cursor, p.appliedAt = cursor, at
}
func (p *fakeProgress) Cursor() uint64 { p.mu.Lock(); defer p.mu.Unlock(); return p.cursor }
func (p *fakeProgress) AppliedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.appliedAt
}
func (p *fakeProgress) Err() error { return nil }
func (p *fakeProgress) WaitFor(ctx context.Context, seq uint64) error {
	return p.WaitForOr(ctx, seq, nil)
}
func (p *fakeProgress) WaitForOr(ctx context.Context, seq uint64, stop <-chan struct{}) error {
	if p.Cursor() >= seq {
		return nil
	}
	select { // the fake never moves by itself
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return errors.New("stopped")
	}
}

type fakeDeadlines int

func (d fakeDeadlines) PendingDeadlines() (int, error) { return int(d), nil }

// fakeLog acknowledges every append with the next sequence.
type fakeLog struct{ seq uint64 }

func (l *fakeLog) Append(ctx context.Context, e posture.Event) (uint64, error) {
	l.seq++
	return l.seq, nil
}
func (l *fakeLog) Fits(posture.Event) error { return nil }

func (l *fakeLog) AppendIfLast(ctx context.Context, e posture.Event, last uint64) (uint64, error) {
	if last != l.seq {
		return 0, &posture.Error{Code: posture.CodeConflict}
	}
	return l.Append(ctx, e)
}
func (l *fakeLog) LastSubjectSeq(ctx context.Context, subject string) (uint64, error) {
	return l.seq, nil
}

func get(t *testing.T, e *echo.Echo, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

// TestMetricsAndReadiness: requests are counted by route pattern and final
// status, refused session requests by check type, appends timed; the lag
// and the readiness follow the projection's cursor against the log.
func TestMetricsAndReadiness(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	progress := &fakeProgress{}
	progress.set(5, t0)
	state := func(ctx context.Context) (api.LogState, error) {
		return api.LogState{LastSeq: 8, FirstTime: t0.Add(-time.Hour), LastTime: t0.Add(3 * time.Second)}, nil
	}
	m := api.NewMetrics(api.MetricsOptions{Progress: progress, State: state, Deadlines: fakeDeadlines(4)})
	e := api.New(api.Options{SystemPaths: api.SystemPaths, Metrics: m})
	e.GET(api.ClientBase+"/things/:id", func(c echo.Context) error {
		return &posture.Error{Code: posture.CodeInvalidPosture}
	})
	api.RegisterSystem(e, m, &api.Health{Progress: progress, State: state, Wait: 50 * time.Millisecond})

	for range 2 {
		get(t, e, api.ClientBase+"/things/abc")
	}
	get(t, e, "/things/abc") // rewritten to the client API
	get(t, e, api.ClientBase+"/no/such/route")

	log := m.Log(&fakeLog{})
	denied := posture.MustEvent(posture.SessionDenied{IdentityID: "i", PolicyFailures: []posture.PolicyFailure{
		{PolicyID: "p1", Checks: []posture.CheckFailure{{PostureCheckType: posture.CheckOS}, {PostureCheckType: posture.CheckMFA}}},
		{PolicyID: "p2", Checks: []posture.CheckFailure{{PostureCheckType: posture.CheckOS}}},
	}}, t0)
	if _, err := log.Append(t.Context(), denied); err != nil {
		t.Fatal(err)
	}
	if _, err := log.AppendIfLast(t.Context(), denied, 0); posture.CodeOf(err) != posture.CodeConflict {
		t.Fatalf("append if last: %v", err)
	}

	// Not caught up: 3 events and 3 seconds of log time behind.
	status, body := get(t, e, "/readyz")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, `"ready":false`) || !strings.Contains(body, `"lagEvents":3`) {
		t.Fatalf("readyz while behind: %d %s", status, body)
	}
	status, body = get(t, e, "/metrics")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d %s", status, body)
	}
	for _, want := range []string{
		`postured_http_requests_total{method="GET",route="/edge/client/v1/things/:id",status="409"} 3`,
		`postured_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`postured_http_requests_total{method="GET",route="/readyz",status="503"} 1`,
		`postured_http_request_duration_seconds_count{method="GET",route="/edge/client/v1/things/:id"} 3`,
		`postured_append_duration_seconds_count{op="append",result="ok"} 1`,
		`postured_append_duration_seconds_count{op="append_if_last",result="conflict"} 1`,
		`postured_failed_service_requests_total{check_type="OS"} 1`,
		`postured_failed_service_requests_total{check_type="MFA"} 1`,
		`postured_log_up 1`,
		`postured_log_last_sequence 8`,
		`postured_consumer_position 5`,
		`postured_projection_lag_events 3`,
		`postured_projection_lag_seconds 3`,
		`postured_deadline_queue_length 4`,
		`go_goroutines `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	// Caught up: ready, no lag.
	progress.set(8, t0.Add(3*time.Second))
	if status, body := get(t, e, "/readyz"); status != http.StatusOK || !strings.Contains(body, `"ready":true`) {
		t.Fatalf("readyz when caught up: %d %s", status, body)
	}
	if _, body := get(t, e, "/metrics"); !strings.Contains(body, "postured_projection_lag_events 0\n") || !strings.Contains(body, "postured_projection_lag_seconds 0\n") {
		t.Fatalf("lag when caught up:\n%s", body)
	}
	if status, _ := get(t, e, "/livez"); status != http.StatusOK {
		t.Fatalf("livez: %d", status)
	}
}

// TestRequestLogsCarryRequestID: with JSON logs, each request line carries
// the request id the response carries, and the status the client got.
func TestRequestLogsCarryRequestID(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e := api.New(api.Options{Logger: logger})
	e.GET(api.ClientBase+"/things/:id", func(c echo.Context) error { return posture.NotFound("thing", c.Param("id")) })
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, api.ClientBase+"/things/abc", nil))
	reqID := rec.Header().Get(echo.HeaderXRequestID)
	if reqID == "" || rec.Code != http.StatusNotFound {
		t.Fatalf("response: %d, request id %q", rec.Code, reqID)
	}
	mu.Lock()
	defer mu.Unlock()
	sc := bufio.NewScanner(&buf)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("not a JSON log line: %s", sc.Bytes())
		}
		if line["msg"] == "request" {
			if line["requestId"] != reqID || line["status"] != float64(http.StatusNotFound) {
				t.Fatalf("request log: %s (response %s)", sc.Bytes(), reqID)
			}
			return
		}
	}
	t.Fatalf("no request log line in:\n%s", buf.String())
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestNotReadyGivesThePosition: a node that is not ready for lack of disk
// space still says where the log is, when the log answers, and says nothing
// of it when it does not.
func TestNotReadyGivesThePosition(t *testing.T) {
	t0 := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	progress := &fakeProgress{}
	progress.set(5, t0)
	full := func() []api.DiskState { return []api.DiskState{{Full: true, Reason: "the log is out of disk space"}} }
	answers := func(ctx context.Context) (api.LogState, error) {
		return api.LogState{LastSeq: 12, FirstTime: t0.Add(-time.Hour), LastTime: t0.Add(3 * time.Second)}, nil
	}
	v := (&api.Health{Progress: progress, State: answers, Disk: full}).Check(t.Context())
	if v.Ready || v.Reason != "the log is out of disk space" || v.Cursor != 5 || v.LastSeq != 12 || v.LagEvents != 7 {
		t.Fatalf("out of space, the log answering: %+v", v)
	}
	// A log that does not answer is asked briefly: the probe gets its 503
	// long before the 2 s a ready node's log may take.
	silent := func(ctx context.Context) (api.LogState, error) { <-ctx.Done(); return api.LogState{}, ctx.Err() }
	start := time.Now()
	v = (&api.Health{Progress: progress, State: silent, Disk: full}).Check(t.Context())
	if v.Ready || v.Reason != "the log is out of disk space" || v.Cursor != 5 || v.LastSeq != 0 || v.LagEvents != 0 {
		t.Fatalf("out of space, the log silent: %+v", v)
	}
	if waited := time.Since(start); waited >= 2*time.Second {
		t.Fatalf("out of space, the log silent: answered after %v", waited)
	}
}
