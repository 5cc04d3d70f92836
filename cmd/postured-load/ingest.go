package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// common are the flags of every benchmark that runs postured.
type common struct {
	Postured string        `required:"" help:"The postured binary to run (task load builds it into bin/)."`
	Runs     int           `default:"5" help:"Runs; the figures are their medians."`
	Duration time.Duration `default:"5s" help:"Length of each measured run."`
	Clients  int           `default:"64" help:"Keep-alive HTTP/1.1 TLS clients, each an identity with its own API session."`
	Keep     bool          `help:"Keep the data directories (printed) instead of removing them."`
	Args     []string      `name:"postured-arg" help:"Extra flag for postured serve (repeatable), for example --postured-arg=--sync=always."`
	Env      []string      `name:"postured-env" help:"Extra environment variable for postured (repeatable), for example --postured-env=GOGC=200."`
}

type ingestCmd struct {
	common
	Webhook    string   `default:"none" enum:"none,hang,closed" help:"Also run a second postured with a webhook for every transition whose receiver never answers (hang) or whose port is closed (closed); the posture values then alternate so that every response is a transition, in all three targets."`
	VariantBin string   `name:"variant-postured" help:"Also run a second postured from this binary, to compare two builds in the same runs."`
	VariantArg []string `name:"variant-arg" help:"Also run a second postured with this extra serve flag (repeatable), to compare the two in the same runs."`
	VariantEnv []string `name:"variant-env" help:"Also run a second postured with this extra environment variable (repeatable), for example --variant-env=GOGC=400."`
	Profile    string   `help:"Write a CPU profile of each postured's first measured run into this directory (postured then runs with --pprof); read it with go tool pprof BINARY FILE." type:"path"`
}

const adminPassword = "postured-load-admin"

// node is a postured process under load.
type node struct {
	p       *proc
	metrics string // its plain-HTTP metrics listener
	t       target
	dir     string
	a       *admin
	args    []string
	env     []string
	bin     string
}

// startNode runs postured serve on a data directory (fresh or kept from
// an earlier start) on a port of its own and waits until it is ready.
func startNode(ctx context.Context, bin, dir string, extra, env []string) (*node, time.Duration, error) {
	metrics, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	args := append([]string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-level", "warn", "--metrics-listen", metrics}, extra...)
	begin := time.Now()
	// Each of the 64 clients posts hundreds of responses a second, as no
	// endpoint does: the budget is the largest, so that it is still
	// checked (environment variables, which builds without the flag
	// ignore: its name, and the one builds before it read).
	procEnv := append([]string{"POSTURED_ADMIN_PASSWORD=" + adminPassword, "POSTURED_WRITE_BUDGET_KIB=1048576", "POSTURED_POSTURE_BUDGET_KIB=1048576"}, env...)
	p, err := start(ctx, "postured", bin, args, procEnv, "postured listening on https://")
	if err != nil {
		return nil, 0, err
	}
	tlsCfg, err := trusting(filepath.Join(dir, "pki", "ca.pem"))
	if err != nil {
		p.stop()
		return nil, 0, err
	}
	n := &node{p: p, metrics: metrics, t: target{name: "postured", base: "https://" + p.addr, tls: tlsCfg}, dir: dir, args: extra, env: env, bin: bin}
	if err := waitReady(ctx, n.t, 10*time.Minute); err != nil {
		p.stop()
		return nil, 0, fmt.Errorf("%w: %s", err, p.tail)
	}
	ready := time.Since(begin)
	hc := n.t.newClient()
	tok, err := login(ctx, hc, n.t.base, managementAPI, "admin", adminPassword)
	if err != nil {
		p.stop()
		return nil, 0, err
	}
	n.a = &admin{t: n.t, hc: hc, token: tok}
	return n, ready, nil
}

// restart stops the node and starts it again on the same data directory,
// returning the time until it answered again.
func (n *node) restart(ctx context.Context) (time.Duration, error) {
	n.p.stop()
	m, ready, err := startNode(ctx, n.bin, n.dir, n.args, n.env)
	if err != nil {
		return 0, err
	}
	*n = *m
	return ready, nil
}

// nullCAFile is where startNull writes the null server's certificate, in
// the directory it is given.
const nullCAFile = "null-ca.pem"

// startNull runs the null server (this binary, `null`, with args) and
// returns it.
func startNull(ctx context.Context, dir string, args ...string) (*proc, target, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, target{}, err
	}
	ca := filepath.Join(dir, nullCAFile)
	p, err := start(ctx, "null server", self, append([]string{"null", "--ca-out", ca}, args...), nil, nullReady)
	if err != nil {
		return nil, target{}, err
	}
	tlsCfg, err := trusting(ca)
	if err != nil {
		p.stop()
		return nil, target{}, err
	}
	return p, target{name: "null", base: "https://" + p.addr, tls: tlsCfg}, nil
}

// osModel creates an OS check (Windows 10 or later), a service and a
// policy that grants it to every identity under the check, and n
// identities logged in; it returns the check's id and their tokens.
func osModel(ctx context.Context, a *admin, n int, prefix string) (string, []string, error) {
	check, err := a.create(ctx, "posture-checks", map[string]any{"typeId": "OS", "name": prefix + "os",
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	if err != nil {
		return "", nil, err
	}
	svc, err := a.create(ctx, "services", map[string]any{"name": prefix + "svc"})
	if err != nil {
		return "", nil, err
	}
	if _, err := a.create(ctx, "service-policies", map[string]any{"name": prefix + "p", "type": "Dial", "semantic": "AllOf",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}}); err != nil {
		return "", nil, err
	}
	tokens := make([]string, n)
	for i := range tokens {
		if tokens[i], err = a.endpoint(ctx, fmt.Sprintf("%sload-%03d", prefix, i)); err != nil {
			return "", nil, err
		}
	}
	return check, tokens, nil
}

// osBodies are the posture responses of a run: one passing OS report, or
// (alternating) a passing and a failing one, so that every response is a
// transition.
func osBodies(check string, alternate bool) func(i, k int) []byte {
	pass, _ := json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045", "build": "19045"})
	fail, _ := json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "9.0", "build": "1"})
	if !alternate {
		return func(int, int) []byte { return pass }
	}
	return func(_, k int) []byte {
		if k%2 == 0 {
			return pass
		}
		return fail
	}
}

// deadReceiver is a webhook URL whose receiver never answers (hang: it
// accepts and reads the request and waits until the run ends) or that
// refuses connections (closed: a port that was bound and let go).
// attempts counts the delivery attempts it received (hang only).
func deadReceiver(ctx context.Context, kind string, attempts *atomic.Int64) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	url := "http://" + ln.Addr().String() + "/hook"
	if kind == "closed" {
		return url, ln.Close()
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return url, nil
}

func (c *ingestCmd) Run(ctx context.Context) error {
	work, err := os.MkdirTemp("", "postured-load-")
	if err != nil {
		return err
	}
	if c.Keep {
		fmt.Println("data in", work)
	} else {
		defer os.RemoveAll(work)
	}
	nullProc, nullT, err := startNull(ctx, work)
	if err != nil {
		return err
	}
	defer nullProc.stop()

	type subject struct {
		name string
		n    *node
		c    *clients
	}
	alternate := c.Webhook != "none"
	var subjects []subject
	names := []string{"postured"}
	if alternate {
		names = []string{"postured", "postured+" + c.Webhook + "-webhook"}
	}
	variant := len(c.VariantArg) > 0 || len(c.VariantEnv) > 0 || c.VariantBin != ""
	if variant {
		names = append(names, "variant")
	}
	if c.Profile != "" {
		if err := os.MkdirAll(c.Profile, 0o755); err != nil {
			return err
		}
		c.Args = append(slices.Clone(c.Args), "--pprof")
	}
	var check string
	var attempts atomic.Int64 // delivery attempts the dead receiver got
	for _, name := range names {
		bin, args, env := c.Postured, c.Args, c.Env
		if name == "variant" {
			args, env = append(slices.Clone(args), c.VariantArg...), append(slices.Clone(env), c.VariantEnv...)
			if c.VariantBin != "" {
				bin = c.VariantBin
			}
		}
		if strings.HasSuffix(name, "-webhook") {
			// The dead receiver listens on the loopback, which webhooks
			// may not reach by default.
			args = append(slices.Clone(args), "--webhook-deny=")
		}
		n, _, err := startNode(ctx, bin, filepath.Join(work, strings.ReplaceAll(name, "+", "-")), args, env)
		if err != nil {
			return err
		}
		defer n.p.stop()
		if strings.HasSuffix(name, "-webhook") {
			url, err := deadReceiver(ctx, c.Webhook, &attempts)
			if err != nil {
				return err
			}
			if _, err := n.a.create(ctx, "webhooks", map[string]any{"name": "dead", "url": url, "allowInsecureHttp": true, "enabled": true}); err != nil {
				return err
			}
		}
		chk, tokens, err := osModel(ctx, n.a, c.Clients, "")
		if err != nil {
			return err
		}
		check = chk
		subjects = append(subjects, subject{name: name, n: n, c: newClients(n.t, tokens, osBodies(chk, alternate))})
	}
	nullTokens := make([]string, c.Clients)
	for i := range nullTokens {
		nullTokens[i] = "null-token"
	}
	null := newClients(nullT, nullTokens, osBodies(check, alternate))

	fmt.Printf("%d clients, %d runs of %s each, targets: null, %s\n", c.Clients, c.Runs, c.Duration, strings.Join(names, ", "))
	ratios := make([][]float64, len(subjects))
	var nullRates []float64
	rates := make([][]float64, len(subjects))
	for run := range c.Runs {
		// The order alternates between runs: null first, then last.
		order := make([]int, 0, len(subjects)+1) // -1 is the null server
		order = append(order, -1)
		for i := range subjects {
			order = append(order, i)
		}
		if run%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		got := make([]float64, len(subjects))
		used := make([]usage, len(subjects))
		var nullRate float64
		var nullUsed usage
		for _, i := range order {
			if i < 0 {
				if nullRate, nullUsed, err = measure(ctx, null, nullProc, c.Duration); err != nil {
					return err
				}
				continue
			}
			var profile func() error
			if c.Profile != "" && run == 0 {
				profile = subjects[i].n.profile(ctx, filepath.Join(c.Profile, subjects[i].name+".pprof"), c.Duration)
			}
			if got[i], used[i], err = measure(ctx, subjects[i].c, subjects[i].n.p, c.Duration); err != nil {
				return err
			}
			if profile != nil {
				if err := profile(); err != nil {
					return err
				}
			}
		}
		nullRates = append(nullRates, nullRate)
		line := fmt.Sprintf("run %d: null %.0f/s %s", run+1, nullRate, nullUsed.per(nullRate))
		for i, s := range subjects {
			rates[i] = append(rates[i], got[i])
			ratios[i] = append(ratios[i], got[i]/nullRate)
			line += fmt.Sprintf("; %s %.0f/s %s, ratio %.2f", s.name, got[i], used[i].per(got[i]), got[i]/nullRate)
		}
		fmt.Println(line)
	}
	fmt.Printf("median: null %.0f/s", median(nullRates))
	for i, s := range subjects {
		r := slices.Sorted(slices.Values(ratios[i]))
		fmt.Printf(", %s %.0f/s, ratio %.2f (runs %.2f-%.2f)", s.name, median(rates[i]), median(r), r[0], r[len(r)-1])
	}
	fmt.Println()
	if c.Webhook == "hang" {
		fmt.Printf("the dead receiver got %d delivery attempts (each held until postured's timeout)\n", attempts.Load())
	}
	for i := 1; i < len(subjects); i++ {
		var rel []float64
		for run := range nullRates {
			rel = append(rel, rates[i][run]/rates[0][run])
		}
		slices.Sort(rel)
		fmt.Printf("%s / postured: median %.2f (runs %.2f-%.2f)\n", subjects[i].name, median(rel), rel[0], rel[len(rel)-1])
	}
	return nil
}

// profile starts taking a CPU profile of the node for d (it must run
// with --pprof) and returns a wait for it to be written to path.
func (n *node) profile(ctx context.Context, path string, d time.Duration) func() error {
	done := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", n.metrics, max(1, int(d.Seconds())))
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			done <- err
			return
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("profile: %s from %s", resp.Status, url)
			return
		}
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		done <- errors.Join(err, f.Close())
	}()
	return func() error {
		if err := <-done; err != nil {
			return err
		}
		fmt.Println("profile written to", path)
		return nil
	}
}

// usage is the CPU a burst took: the server's process and this one (the
// clients), in cores over the burst.
type usage struct{ server, clients, wall time.Duration }

// per describes u per request at rate requests/s.
func (u usage) per(rate float64) string {
	n := rate * u.wall.Seconds()
	return fmt.Sprintf("(server %.2f cores, %.0f µs/req; clients %.2f cores)",
		u.server.Seconds()/u.wall.Seconds(), float64(u.server.Microseconds())/n, u.clients.Seconds()/u.wall.Seconds())
}

// perRequest is u's server CPU time per request at rate requests/s.
func (u usage) perRequest(rate float64) time.Duration {
	return time.Duration(float64(u.server) / (rate * u.wall.Seconds()))
}

// measure runs a burst against c and the CPU it took.
func measure(ctx context.Context, c *clients, p *proc, d time.Duration) (float64, usage, error) {
	if err := c.warm(ctx); err != nil {
		return 0, usage{}, err
	}
	s0, c0, t0 := p.cpu(), selfCPU(), time.Now()
	rate, err := c.burst(ctx, d)
	return rate, usage{server: p.cpu() - s0, clients: selfCPU() - c0, wall: time.Since(t0)}, err
}

// selfCPU is the CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
