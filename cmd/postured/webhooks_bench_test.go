package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
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
			tlsCfg := n.http.Transport.(*http.Transport).TLSClientConfig
			b.ResetTimer()
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for i := range benchClients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), MaxIdleConnsPerHost: 1,
						TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
					for k := 0; next.Add(1) <= int64(b.N); k++ {
						req, _ := http.NewRequest(http.MethodPost, n.srv.URL+clientAPI+"/posture-response", bytes.NewReader(bodies[k%2]))
						req.Header.Set(api.HeaderSession, tokens[i])
						req.Header.Set("Content-Type", "application/json")
						resp, err := hc.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "responses/s")
			b.StopTimer()
		})
	}
}
