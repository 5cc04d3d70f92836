package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// scrapeText parses a /metrics answer into its metric families.
func scrapeText(t *testing.T, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// exprsIn collects the PromQL expressions of a Grafana dashboard (every
// "expr" and every variable "definition", at any depth).
func exprsIn(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
				out = append(out, s)
				continue
			}
			out = append(out, exprsIn(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, exprsIn(x)...)
		}
	}
	return out
}

var seriesName = regexp.MustCompile(`\b(?:postured|go|process)_[a-zA-Z0-9_]+\b`)

// TestDashboardAndRulesNameRealSeries reads the Grafana dashboard and the
// Prometheus rules in deploy/ and checks that every series they name is
// one a node exports (after a denied and a granted session, so that the
// labelled series exist), so that a renamed metric cannot leave a panel or
// an alert silently empty.
func TestDashboardAndRulesNameRealSeries(t *testing.T) {
	var dashboard any
	if err := json.Unmarshal(readRepoFile(t, "deploy/grafana/postured-dashboard.json"), &dashboard); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string            `yaml:"alert"`
				Expr   string            `yaml:"expr"`
				Labels map[string]string `yaml:"labels"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/prometheus/postured-rules.yml"), &rules); err != nil {
		t.Fatalf("rules: %v", err)
	}
	sources := map[string][]string{"dashboard": exprsIn(dashboard)}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" {
				t.Errorf("rule %+v: want an alert name, an expression and a severity", r)
			}
			alerts = append(alerts, r.Alert)
			sources["rules"] = append(sources["rules"], r.Expr)
		}
	}
	// The rules cover what an operator must hear about.
	for _, want := range []string{"postured_projection_lag_", "postured_append_duration_seconds_count{result=\"error\"}", "postured_failed_service_requests_total", "postured_disk_free_bytes", "postured_out_of_space", "postured_projection_halted_sequence", "postured_log_missing_messages", "postured_checkpoint_covered_sequence"} {
		if !slices.ContainsFunc(sources["rules"], func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("no alert rule on %s (alerts: %q)", want, alerts)
		}
	}
	if len(sources["dashboard"]) < 10 {
		t.Fatalf("dashboard has %d expressions", len(sources["dashboard"]))
	}

	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := newStory(t, n)
	st.play(t)
	// A would-deny: the check made report-only, the old OS reported again,
	// a session of another service granted in spite of it.
	admin := n.adminToken(t)
	if r := n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+st.check, admin, map[string]any{"enforcement": map[string]any{"mode": "report"}}); r.Status != http.StatusOK {
		t.Fatalf("report-only: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", st.ep.token, map[string]any{"id": st.check, "typeId": "OS", "type": "Windows", "version": "6.1.7601"}); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	erp := n.create(t, admin, "services", map[string]any{"name": "erp", "roleAttributes": []string{"apps"}})
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", st.ep.token, map[string]any{"serviceId": erp}); r.Status != http.StatusCreated {
		t.Fatalf("session under a report-only check: %d %s", r.Status, r.Body)
	}
	r := n.do(t, http.MethodGet, "/metrics", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("/metrics: %d", r.Status)
	}
	fams := scrapeText(t, r.Body)
	exists := func(name string) bool {
		if fams[name] != nil {
			return true
		}
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if f := fams[strings.TrimSuffix(name, suffix)]; strings.HasSuffix(name, suffix) && f != nil &&
				(f.GetType() == dto.MetricType_HISTOGRAM || f.GetType() == dto.MetricType_SUMMARY) {
				return true
			}
		}
		return false
	}
	for src, exprs := range sources {
		named := 0
		for _, e := range exprs {
			for _, name := range seriesName.FindAllString(e, -1) {
				named++
				if !exists(name) {
					t.Errorf("%s: %s names %s, which postured does not export", src, e, name)
				}
			}
		}
		if named == 0 {
			t.Errorf("%s names no series", src)
		}
	}
}

// TestMetricsListen: --metrics-listen serves /metrics over plain HTTP
// beside the HTTPS port, which keeps its own /metrics.
func TestMetricsListen(t *testing.T) {
	addr := freeAddr(t)
	p := startBinary(t, t.TempDir(), "POSTURED_METRICS_LISTEN="+addr, "POSTURED_ADMIN_PASSWORD="+testAdminPassword)
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("plain /metrics: %d %s", resp.StatusCode, body)
	}
	fams := scrapeText(t, body)
	for _, name := range []string{"postured_log_up", "postured_consumer_position", "postured_disk_free_bytes", "process_open_fds"} {
		if fams[name] == nil {
			t.Errorf("plain /metrics has no %s", name)
		}
	}
	if fams["postured_log_up"].GetMetric()[0].GetGauge().GetValue() != 1 {
		t.Errorf("postured_log_up is not 1")
	}
	if resp, err := http.Get("http://" + addr + "/edge/client/v1/version"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("the metrics listener serves more than /metrics: %v %v", resp, err)
	}
	if status, _, _, err := p.request(http.MethodGet, "/metrics", "", nil); err != nil || status != http.StatusOK {
		t.Errorf("HTTPS /metrics: %d %v", status, err)
	}
	p.stop(t)
}

// readRepoFile reads a file by its path from the repository root.
func readRepoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
