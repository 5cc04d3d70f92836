package main

import (
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestNullServerDecodesAndAnswers201(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"id":"c","typeId":"OS","type":"Windows","version":"10.0.19045"}`, http.StatusCreated},
		{`{"id":`, http.StatusBadRequest},
	} {
		w := httptest.NewRecorder()
		nullHandler(w, httptest.NewRequest(http.MethodPost, "/edge/client/v1/posture-response", strings.NewReader(tc.body)))
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.body, w.Code, tc.want)
		}
	}
}

func TestMedianAndQuantile(t *testing.T) {
	xs := []float64{3, 1, 2}
	if m := median(xs); m != 2 {
		t.Errorf("median %v, want 2", m)
	}
	if xs[0] != 3 {
		t.Error("median reordered its argument")
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Errorf("median %v, want 2.5", m)
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	if p := quantile(lat, 0.99); p != 100*time.Millisecond {
		t.Errorf("p99 %v, want 100ms", p)
	}
	if p := quantile(lat, 0.5); p != 51*time.Millisecond {
		t.Errorf("p50 %v, want 51ms", p)
	}
}

func TestOverCountsTheSlowRequestsBetweenScrapes(t *testing.T) {
	inf := math.Inf(1)
	before := histogram{0.001: 90, 0.0025: 95, inf: 100}
	after := histogram{0.001: 180, 0.0025: 194, inf: 200}
	n, total := over(before, after, 0.001)
	if n != 10 || total != 100 {
		t.Errorf("over 1 ms: %v of %v, want 10 of 100", n, total)
	}
	if n, _ := over(before, after, 0.0025); n != 1 {
		t.Errorf("over 2.5 ms: %v, want 1", n)
	}
}

func TestScrapeSessionsReadsTheRouteHistogram(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`# TYPE postured_http_request_duration_seconds histogram
postured_http_request_duration_seconds_bucket{method="GET",route="/edge/client/v1/sessions",le="0.001"} 7
postured_http_request_duration_seconds_bucket{method="POST",route="/edge/client/v1/sessions",le="0.001"} 40
postured_http_request_duration_seconds_bucket{method="POST",route="/edge/client/v1/sessions",le="0.0025"} 41
postured_http_request_duration_seconds_bucket{method="POST",route="/edge/client/v1/sessions",le="+Inf"} 42
`))
	}))
	defer srv.Close()
	h, err := scrapeSessions(t.Context(), strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if h[0.001] != 40 || h[0.0025] != 41 || h[math.Inf(1)] != 42 || len(h) != 3 {
		t.Fatalf("histogram %v", h)
	}
}
