package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
)

type decisionsCmd struct {
	common
	Identities int           `default:"100000" help:"Identities preloaded into the log (with department, site and role attributes)."`
	Services   int           `default:"0" help:"Services preloaded (default: a tenth of the identities)."`
	Policies   int           `default:"0" help:"Service policies preloaded (default: a fiftieth of the identities)."`
	Load       float64       `default:"0.5" help:"Posture responses per second during the loaded runs, as a fraction of the maximum ingest rate measured first."`
	Settle     time.Duration `default:"2m" help:"Start the measured runs no sooner than this after the preload: JetStream keeps the ids of the events appended in its duplicate window (2 minutes) in memory, which at 1M identities makes the collector's work a good deal larger; 0 does not wait."`
	Profile    string        `help:"Write a CPU profile of postured's first maximum-ingest burst into this directory (postured then runs with --pprof); read it with go tool pprof BINARY FILE." type:"path"`
	// By default the decider asks for 20 services in turn: past the first
	// 20 decisions, postured answers with the session the API session
	// already has for the service, a read.
	NewSessions bool `help:"Make every decision a new session, appended to the log: the decider ends each session it got (outside the figures) before it asks again."`
}

func (c *decisionsCmd) Run(ctx context.Context) error {
	if c.Services == 0 {
		c.Services = c.Identities / 10
	}
	if c.Policies == 0 {
		c.Policies = c.Identities / 50
	}
	work, err := os.MkdirTemp("", "postured-load-")
	if err != nil {
		return err
	}
	if c.Keep {
		fmt.Println("data in", work)
	} else {
		defer os.RemoveAll(work)
	}
	dir := filepath.Join(work, "postured")
	fmt.Printf("model: %d identities, %d services, %d policies\n", c.Identities, c.Services, c.Policies)
	took, events, err := preload(ctx, dir, c.Identities, c.Services, c.Policies)
	if err != nil {
		return err
	}
	fmt.Printf("preloaded %d events into the log in %s (%.0f/s)\n", events, took.Round(time.Millisecond), float64(events)/took.Seconds())
	settled := time.Now().Add(c.Settle)

	if c.Profile != "" {
		if err := os.MkdirAll(c.Profile, 0o755); err != nil {
			return err
		}
		c.Args = append(slices.Clone(c.Args), "--pprof")
	}
	n, ready, err := startNode(ctx, c.Postured, dir, c.Args, c.Env)
	if err != nil {
		return err
	}
	defer func() { n.p.stop() }()
	rss, _, _ := n.p.rssMiB()
	fmt.Printf("first start (projection built from the log): ready in %s, RSS %.0f MiB\n", ready.Round(time.Millisecond), rss)

	// The caller of the decisions: an identity in the preloaded model's
	// groups, with 20 services granted under an OS check it passes.
	a := n.a
	check, err := a.create(ctx, "posture-checks", map[string]any{"typeId": "OS", "name": "decide-os", "roleAttributes": []string{"decide-os"},
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	if err != nil {
		return err
	}
	var services []string
	for i := range 20 {
		id, err := a.create(ctx, "services", map[string]any{"name": fmt.Sprintf("decide-svc-%d", i), "roleAttributes": []string{"decide"}})
		if err != nil {
			return err
		}
		services = append(services, id)
	}
	if _, err := a.create(ctx, "service-policies", map[string]any{"name": "decide", "type": "Dial", "semantic": "AllOf",
		"identityRoles": []string{"#decide"}, "serviceRoles": []string{"#decide"}, "postureCheckRoles": []string{"#decide-os"}}); err != nil {
		return err
	}
	_, tokens, err := osModel(ctx, a, c.Clients, "")
	if err != nil {
		return err
	}

	restarted, err := n.restart(ctx)
	if err != nil {
		return err
	}
	rss, _, _ = n.p.rssMiB()
	fmt.Printf("restart: ready in %s, RSS %.0f MiB\n", restarted.Round(time.Millisecond), rss)

	decider, err := n.a.endpoint(ctx, "decider", "decide", "dept-1", "site-1", "role-1")
	if err != nil {
		return err
	}
	if err := call(ctx, n.t.newClient(), http.MethodPost, n.t.base+clientAPI+"/posture-response", decider,
		map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045"}, nil, http.StatusCreated); err != nil {
		return err
	}
	caFile := filepath.Join(dir, "pki", "ca.pem")
	decide := func(ctx context.Context, d time.Duration) (latencies, error) {
		return runDecider(ctx, n.t.base, caFile, decider, services, d, c.NewSessions)
	}

	ingest := newClients(n.t, tokens, osBodies(check, false))
	nullProc, nullT, err := startNull(ctx, work)
	if err != nil {
		return err
	}
	defer nullProc.stop()
	nullCA := filepath.Join(work, nullCAFile)
	nullTokens := slices.Repeat([]string{"null-token"}, c.Clients)
	null := newClients(nullT, nullTokens, osBodies(check, false))

	if wait := time.Until(settled); wait > 0 {
		fmt.Printf("waiting %s, until the preloaded events leave the log's duplicate window\n", wait.Round(time.Second))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	var idle50, idle99, load50, load99, floor50, floor99, busy50, busy99, maxRates, ratios, paced []float64
	for run := range c.Runs {
		// Idle decisions.
		lat, err := decide(ctx, c.Duration)
		if err != nil {
			return err
		}
		i50, i99 := lat.P50, lat.P99
		// The maximum ingest rate, against the null server's, and the CPU
		// time each took per request.
		var nullRate, maxRate float64
		var nullUsed, used usage
		for _, first := range []bool{run%2 == 0, run%2 == 1} {
			if first {
				if nullRate, nullUsed, err = measure(ctx, null, nullProc, c.Duration); err != nil {
					return err
				}
			} else {
				var profile func() error
				if c.Profile != "" && run == 0 {
					profile = n.profile(ctx, filepath.Join(c.Profile, "postured.pprof"), c.Duration)
				}
				if maxRate, used, err = measure(ctx, ingest, n.p, c.Duration); err != nil {
					return err
				}
				if profile != nil {
					if err := profile(); err != nil {
						return err
					}
				}
			}
		}
		// Decisions under c.Load of that rate.
		before, err := scrapeSessions(ctx, n.metrics)
		if err != nil {
			return err
		}
		var floor latencies
		achieved, err := underLoad(ctx, ingest, c.Load*maxRate, func() (err error) {
			if lat, err = decide(ctx, c.Duration); err != nil {
				return err
			}
			// The machine's own tail under the same load: the same requests
			// from the same kind of process to the null server, which
			// answers them at once.
			floor, err = runDecider(ctx, nullT.base, nullCA, "null-token", services, c.Duration, false)
			return err
		})
		if err != nil {
			return err
		}
		// The floor at postured's cost: a null server that computes, per
		// request, the CPU time postured took beyond the null server's in
		// this run's bursts, under the same paced load, asked the same way.
		busy, err := busyFloor(ctx, work, check, nullTokens, services, max(0, used.perRequest(maxRate)-nullUsed.perRequest(nullRate)),
			c.Load*maxRate, c.Duration)
		if err != nil {
			return err
		}
		after, err := scrapeSessions(ctx, n.metrics)
		if err != nil {
			return err
		}
		// Where the tail is: the requests over 1 and 2.5 ms as postured
		// measured them, inside its handlers (TLS, the connection's
		// goroutine and the client's process are outside).
		slow1, total := over(before, after, 0.001)
		slow25, _ := over(before, after, 0.0025)
		l50, l99 := lat.P50, lat.P99
		fmt.Printf("run %d: idle p50 %s p99 %s; ingest %.0f/s %s (null %.0f/s %s, ratio %.2f); at %.0f/s (%d decisions): p50 %s p99 %s; inside postured %.2f%% over 1 ms, %.2f%% over 2.5 ms; the null server under the same load p50 %s p99 %s; a null server as busy as postured (%s per request more) under that load itself p50 %s p99 %s\n",
			run+1, ms(i50), ms(i99), maxRate, used.per(maxRate), nullRate, nullUsed.per(nullRate), maxRate/nullRate, achieved, lat.N, ms(l50), ms(l99),
			100*slow1/total, 100*slow25/total, ms(floor.P50), ms(floor.P99), busy.extra.Round(time.Microsecond), ms(busy.P50), ms(busy.P99))
		busy50, busy99 = append(busy50, sec(busy.P50)), append(busy99, sec(busy.P99))
		idle50, idle99 = append(idle50, sec(i50)), append(idle99, sec(i99))
		load50, load99 = append(load50, sec(l50)), append(load99, sec(l99))
		floor50, floor99 = append(floor50, sec(floor.P50)), append(floor99, sec(floor.P99))
		maxRates, ratios, paced = append(maxRates, maxRate), append(ratios, maxRate/nullRate), append(paced, achieved)
	}
	rss, peak, _ := n.p.rssMiB()
	fmt.Printf("median of %d runs: idle p50 %.2f ms p99 %.2f ms; ingest %.0f/s, ratio %.2f; under %.0f/s: p50 %.2f ms p99 %.2f ms (the null server: p50 %.2f ms p99 %.2f ms; as busy as postured, under that load itself: p50 %.2f ms p99 %.2f ms); RSS %.0f MiB (peak %.0f MiB)\n",
		c.Runs, median(idle50)*1e3, median(idle99)*1e3, median(maxRates), median(ratios), median(paced),
		median(load50)*1e3, median(load99)*1e3, median(floor50)*1e3, median(floor99)*1e3, median(busy50)*1e3, median(busy99)*1e3, rss, peak)
	return nil
}

// busy is the decider's figures against a busy null server, and the CPU
// time per request it computed.
type busy struct {
	latencies
	extra time.Duration
}

// busyFloor starts a null server that computes for extra CPU time per
// request, posts to it at rate from clients of this process (as many as
// tokens) while the decider asks it for sessions for d, and stops it.
func busyFloor(ctx context.Context, work, check string, tokens, services []string, extra time.Duration, rate float64, d time.Duration) (busy, error) {
	dir := filepath.Join(work, "busy")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return busy{}, err
	}
	p, t, err := startNull(ctx, dir, "--busy", extra.String())
	if err != nil {
		return busy{}, err
	}
	defer p.stop()
	load := newClients(t, tokens, osBodies(check, false))
	if err := load.warm(ctx); err != nil {
		return busy{}, err
	}
	var lat latencies
	_, err = underLoad(ctx, load, rate, func() (err error) {
		lat, err = runDecider(ctx, t.base, filepath.Join(dir, nullCAFile), tokens[0], services, d, false)
		return err
	})
	return busy{lat, extra}, err
}

// underLoad runs measure while load posts at rate, and returns the rate
// the load achieved.
func underLoad(ctx context.Context, load *clients, rate float64, measure func() error) (float64, error) {
	lctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var achieved float64
	var lerr error
	wg.Go(func() { achieved, lerr = load.paced(lctx, rate) })
	err := measure()
	cancel()
	wg.Wait()
	return achieved, errors.Join(err, lerr)
}

func ms(d time.Duration) string   { return fmt.Sprintf("%.2fms", d.Seconds()*1e3) }
func sec(d time.Duration) float64 { return d.Seconds() }

// preload appends a model straight to a fresh embedded log in a node's data
// directory (the node is not running yet), as loadBenchModel in cmd/postured
// does, after creating the node's CA there (postured refuses to create one
// beside an existing log): identities with
// department, site and role attributes, services with app attributes,
// policies granting an app's services to a department. It returns how long
// it took and how many events it appended.
func preload(ctx context.Context, dataDir string, identities, services, policies int) (time.Duration, int, error) {
	if _, err := pki.Open(filepath.Join(dataDir, "pki"), pki.Options{}); err != nil {
		return 0, 0, err
	}
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dataDir, "nats")})
	if err != nil {
		return 0, 0, err
	}
	defer l.Close()
	now := time.Now().UTC()
	total := identities + services + policies
	event := func(i int) posture.Payload {
		switch {
		case i < identities:
			id := fmt.Sprintf("li%07d", i)
			return posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice,
				RoleAttributes: []string{fmt.Sprintf("dept-%d", i%50), fmt.Sprintf("site-%d", i%20), fmt.Sprintf("role-%d", i%10)},
				Tags:           posture.Tags{}, CreatedAt: now, UpdatedAt: now}}
		case i < identities+services:
			i -= identities
			id := fmt.Sprintf("ls%06d", i)
			return posture.Created[posture.Service]{Entity: posture.Service{ID: id, Name: id,
				RoleAttributes: []string{fmt.Sprintf("app-%d", i%500)}, Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now}}
		default:
			i -= identities + services
			id := fmt.Sprintf("lp%05d", i)
			return posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: id, Name: id, Type: posture.Dial, Semantic: posture.AllOf,
				IdentityRoles: []string{fmt.Sprintf("#dept-%d", i%50)}, ServiceRoles: []string{fmt.Sprintf("#app-%d", i%500)},
				Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now}}
		}
	}
	begin := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= total || failed.Load() != nil {
					return
				}
				if _, err := l.Append(ctx, posture.MustEvent(event(i), now)); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return 0, 0, *p
	}
	return time.Since(begin), total, nil
}

// latencies are a decider's figures.
type latencies struct {
	N        int
	P50, P99 time.Duration
}

// runDecider runs `postured-load decide` (this binary) as a process of its
// own, so that the clients' work in this process does not delay its
// requests, and returns its figures.
func runDecider(ctx context.Context, base, caFile, token string, services []string, d time.Duration, endSessions bool) (latencies, error) {
	self, err := os.Executable()
	if err != nil {
		return latencies{}, err
	}
	args := []string{"decide", "--url", base, "--ca", caFile, "--token", token, "--duration", d.String()}
	for _, s := range services {
		args = append(args, "--service", s)
	}
	if endSessions {
		args = append(args, "--end-sessions")
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return latencies{}, fmt.Errorf("decide: %w", err)
	}
	var l latencies
	if err := json.Unmarshal(out, &l); err != nil {
		return latencies{}, fmt.Errorf("decide: %w: %s", err, out)
	}
	return l, nil
}

// decideCmd asks for sessions one at a time and prints the count, the
// median and the 99th percentile latency as JSON.
type decideCmd struct {
	URL      string        `required:"" help:"postured's base URL."`
	CA       string        `required:"" help:"PEM file of the CA that signs postured's certificate."`
	Token    string        `required:"" help:"The API session token of the identity asking."`
	Service  []string      `required:"" help:"Services to ask for, in turn (repeatable)."`
	Duration time.Duration `default:"5s" help:"How long to ask."`
	// EndSessions makes every request a new session.
	EndSessions bool `help:"End each session after the request that got it, outside the figures, so that the next request for the service creates one again."`
}

func (c *decideCmd) Run(ctx context.Context) error {
	tlsCfg, err := trusting(c.CA)
	if err != nil {
		return err
	}
	hc := target{base: c.URL, tls: tlsCfg}.newClient()
	var got struct {
		ID string `json:"id"`
	}
	var out any // the answer is read only to end the session
	if c.EndSessions {
		out = &got
	}
	ask := func(i int) error {
		return call(ctx, hc, http.MethodPost, c.URL+clientAPI+"/sessions", c.Token,
			map[string]any{"serviceId": c.Service[i%len(c.Service)], "type": "Dial"}, out, http.StatusCreated)
	}
	ended := map[string]bool{}
	end := func() error {
		if !c.EndSessions {
			return nil
		}
		if ended[got.ID] {
			return fmt.Errorf("postured answered session %s again after it was ended", got.ID)
		}
		ended[got.ID] = true
		return call(ctx, hc, http.MethodDelete, c.URL+clientAPI+"/sessions/"+got.ID, c.Token, nil, nil, http.StatusOK)
	}
	// The connection, outside the figures.
	if err := ask(0); err != nil {
		return err
	}
	if err := end(); err != nil {
		return err
	}
	var lat []time.Duration
	until := time.Now().Add(c.Duration)
	for i := 1; time.Now().Before(until); i++ {
		begin := time.Now()
		if err := ask(i); err != nil {
			return err
		}
		lat = append(lat, time.Since(begin))
		if err := end(); err != nil {
			return err
		}
	}
	slices.Sort(lat)
	return json.NewEncoder(os.Stdout).Encode(latencies{N: len(lat), P50: quantile(lat, 0.5), P99: quantile(lat, 0.99)})
}
