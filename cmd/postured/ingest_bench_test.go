package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
)

const benchClients = 64

// rawAppendRate measures synchronous appends per second to a bare embedded
// JetStream log (no consumer) from the given number of publishers.
func rawAppendRate(b *testing.B, publishers, total int) float64 {
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(b.TempDir(), "raw")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	now := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(total) {
				e := posture.MustEvent(posture.PostureRecorded{IdentityID: "i", APISessionID: "s", Responses: []posture.PostureResponse{
					{ID: "c", TypeID: "OS", Type: "Windows", Version: "10.0.19045"}}}, now)
				if _, err := l.Append(ctx, e); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// BenchmarkPostureIngest measures posture responses ingested end to end:
// 64 keep-alive HTTPS clients post OS responses; each answer comes after
// the projection applied it. In the same run it measures the raw
// synchronous append rate of 64 publishers to a bare embedded log (before
// and after the ingest, averaged) and reports the ratio. The node appends
// signed checkpoints (every 10,000 events, as serve does by default);
// BenchmarkPostureIngestNoCheckpoints is the same without, for their cost.
func BenchmarkPostureIngest(b *testing.B) { postureIngest(b, defaultTestConfig(b.TempDir())) }

// BenchmarkPostureIngestNoCheckpoints is BenchmarkPostureIngest with
// --no-checkpoints.
func BenchmarkPostureIngestNoCheckpoints(b *testing.B) {
	cfg := defaultTestConfig(b.TempDir())
	cfg.NoCheckpoints = true
	postureIngest(b, cfg)
}

func postureIngest(b *testing.B, cfg serveCmd) {
	n := startTestNode(b, cfg)
	admin := n.adminToken(b)
	check := n.create(b, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os",
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	svc := n.create(b, admin, "services", map[string]any{"name": "svc"})
	n.create(b, admin, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}})
	tokens := make([]string, benchClients)
	for i := range tokens {
		tokens[i] = n.endpoint(b, admin, fmt.Sprintf("ingest-%02d", i)).token
	}
	body, _ := json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0", "build": "19045"})
	tlsCfg := &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"} // as the test client trusts the node
	// The raw rate is measured before and after the ingest and averaged:
	// either one alone varies with the heap and the GC state of the run.
	rawBefore := rawAppendRate(b, benchClients, max(b.N, 5000))

	b.ResetTimer()
	start, cpuStart := time.Now(), processCPU(b)
	postPostures(b, n.srv.URL, tlsCfg, tokens, func(int) []byte { return body })
	ingest := float64(b.N) / time.Since(start).Seconds()
	cpu := processCPU(b) - cpuStart
	b.StopTimer()
	raw := (rawBefore + rawAppendRate(b, benchClients, max(b.N, 5000))) / 2
	b.ReportMetric(ingest, "responses/s")
	b.ReportMetric(raw, "raw-appends/s")
	b.ReportMetric(ingest/raw, "ratio")
	// CPU time of the whole process (the clients' TLS included) per
	// response: less sensitive than the rate to other loads on the machine.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/response")
}

// processCPU is the user and system CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSessionDecision measures POST /sessions over HTTPS with 100,000
// identities, 10,000 services and 2,000 policies loaded: the caller's
// policies are found in the role graph and their checks evaluated at the
// request's time. It reports the median and 99th percentile latency.
func BenchmarkSessionDecision(b *testing.B) {
	n := startTestNode(b, defaultTestConfig(b.TempDir()))
	admin := n.adminToken(b)
	loadBenchModel(b, n, 100_000, 10_000, 2_000)
	check := n.create(b, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os", "attributes": []string{"os"},
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	var services []string
	for i := range 20 {
		services = append(services, n.create(b, admin, "services", map[string]any{"name": fmt.Sprintf("bench-svc-%d", i), "roleAttributes": []string{"bench"}}))
	}
	n.create(b, admin, "service-policies", map[string]any{"name": "bench-checked", "type": "Dial", "identityRoles": []string{"#bench"},
		"serviceRoles": []string{"#bench"}, "postureCheckRoles": []string{"#os"}})
	ep := n.endpoint(b, admin, "bench-laptop", "bench", "dept-1", "site-1", "role-1")
	n.do(b, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045"})

	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		r := n.do(b, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": services[i%len(services)]})
		lat = append(lat, time.Since(start))
		if r.Status != http.StatusCreated {
			b.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// loadBenchModel appends a model straight to the log (64 writers) and waits
// for the projection: identities with department, site and role attributes,
// services with app attributes, and service policies selecting them.
func loadBenchModel(b *testing.B, n *testNode, identities, services, policies int) {
	ctx := context.Background()
	now := time.Now().UTC()
	var events []posture.Payload
	for i := range identities {
		id := fmt.Sprintf("bi%07d", i)
		events = append(events, posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice,
			RoleAttributes: []string{fmt.Sprintf("dept-%d", i%50), fmt.Sprintf("site-%d", i%20), fmt.Sprintf("role-%d", i%10)}, CreatedAt: now, UpdatedAt: now}})
	}
	for i := range services {
		id := fmt.Sprintf("bs%06d", i)
		events = append(events, posture.Created[posture.Service]{Entity: posture.Service{ID: id, Name: id,
			RoleAttributes: []string{fmt.Sprintf("app-%d", i%500)}, CreatedAt: now, UpdatedAt: now}})
	}
	for i := range policies {
		id := fmt.Sprintf("bp%05d", i)
		events = append(events, posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: id, Name: id, Type: posture.Dial, Semantic: posture.AllOf,
			IdentityRoles: []string{fmt.Sprintf("#dept-%d", i%50)}, ServiceRoles: []string{fmt.Sprintf("#app-%d", i%500)}, CreatedAt: now, UpdatedAt: now}})
	}
	var next atomic.Int64
	var last atomic.Uint64
	var wg sync.WaitGroup
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(events)) {
					return
				}
				seq, err := n.elog.Append(ctx, posture.MustEvent(events[i], now))
				if err != nil {
					b.Error(err)
					return
				}
				for cur := last.Load(); seq > cur && !last.CompareAndSwap(cur, seq); cur = last.Load() {
				}
			}
		}()
	}
	wg.Wait()
	if err := n.store.WaitFor(ctx, last.Load()); err != nil {
		b.Fatal(err)
	}
}

// postPostures posts b.N posture responses from benchClients keep-alive
// HTTP/1.1 clients, client i with tokens[i] and its k-th request's body
// from body(k), and returns when all were answered 201.
func postPostures(b *testing.B, base string, tlsCfg *tls.Config, tokens []string, body func(k int) []byte) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg.Clone(), MaxIdleConnsPerHost: 1,
				TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}
			for k := 0; next.Add(1) <= int64(b.N); k++ {
				req, _ := http.NewRequest(http.MethodPost, base+clientAPI+"/posture-response", bytes.NewReader(body(k)))
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
}
