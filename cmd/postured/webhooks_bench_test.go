package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkIngestWithDeadWebhook measures posture responses ingested end
// to end (64 HTTPS clients, each answer after the projection applied it)
// whose values alternate, so that every response is a transition (the
// policy passes, then fails). "none" runs without webhooks; "dead" with a
// webhook for every kind whose receiver never answers (each attempt waits
// for the 10-second timeout, then is retried with backoff).
func BenchmarkIngestWithDeadWebhook(b *testing.B) {
	for _, dead := range []bool{false, true} {
		name := map[bool]string{false: "none", true: "dead"}[dead]
		b.Run(name, func(b *testing.B) {
			n := startTestNode(b, defaultTestConfig(b.TempDir()))
			admin := n.adminToken(b)
			if dead {
				stop := make(chan struct{})
				hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-r.Context().Done():
					case <-stop:
					}
				}))
				defer hang.Close()
				defer close(stop)
				n.create(b, admin, "webhooks", map[string]any{"name": "dead", "url": hang.URL, "allowInsecureHttp": true})
			}
			check := n.create(b, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os",
				"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
			svc := n.create(b, admin, "services", map[string]any{"name": "svc"})
			n.create(b, admin, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#all"},
				"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}})
			tokens := make([]string, benchClients)
			for i := range tokens {
				tokens[i] = n.endpoint(b, admin, fmt.Sprintf("ingest-%02d", i)).token
			}
			bodies := [2][]byte{}
			for i, v := range []string{"10.0", "9.0"} {
				bodies[i], _ = json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": v})
			}
			tlsCfg := &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"} // as the test client trusts the node
			b.ResetTimer()
			start := time.Now()
			postPostures(b, n.srv.URL, tlsCfg, tokens, func(k int) []byte { return bodies[k%2] })
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "responses/s")
			b.StopTimer()
		})
	}
}
