package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// readyz reads a node's readiness.
func (n *testNode) readyz(t testing.TB) (int, api.ReadyView) {
	t.Helper()
	r := n.do(t, http.MethodGet, "/readyz", "", nil)
	var env struct{ Data api.ReadyView }
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatalf("readyz: %v: %s", err, r.Body)
	}
	return r.Status, env.Data
}

// waitHalted waits until the node reports its projection stopped at seq.
func (n *testNode) waitHalted(t testing.TB, seq uint64) api.ReadyView {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, v := n.readyz(t)
		if status == http.StatusServiceUnavailable && v.HaltedAt == seq {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz: %d %+v, want 503 halted at %d", status, v, seq)
		}
	}
}

// TestBadEventStopsEveryNodeUntilSkipped publishes a message that is not
// an event into the stream of a two-node cluster: both nodes stop there and
// say so (readiness, metrics), replay refuses to go past it, and once an
// operator records the decision with `events skip`, both nodes go on by
// themselves, a node started afterwards passes over it, and a replay gives
// the same projection as both nodes.
func TestBadEventStopsEveryNodeUntilSkipped(t *testing.T) {
	nc, a, b := startTwoNodes(t)
	nats := "--nats-url=" + strings.Join(nc.URLs, ",")
	admin := a.adminToken(t)
	a.create(t, admin, "services", map[string]any{"name": "before", "roleAttributes": []string{"apps"}})

	ack, err := a.elog.JetStream().Publish(t.Context(), "postured.model", []byte("not json at all"))
	if err != nil {
		t.Fatal(err)
	}
	bad := ack.Sequence
	// A valid event after it, which no node may apply before the decision.
	after := posture.MustEvent(posture.Created[posture.Service]{Entity: posture.Service{ID: "svc-after", Name: "after"}}, time.Now())
	if _, err := a.elog.Append(t.Context(), after); err != nil {
		t.Fatal(err)
	}

	for _, n := range []*clusterNode{a, b} {
		v := n.waitHalted(t, bad)
		if v.Cursor != bad-1 || !strings.Contains(v.Reason, fmt.Sprintf("stopped at sequence %d", bad)) ||
			!strings.Contains(v.Reason, "not JSON") || !strings.Contains(v.Reason, "postured events skip") {
			t.Fatalf("readyz while halted: %+v", v)
		}
		metrics := string(n.do(t, http.MethodGet, "/metrics", "", nil).Body)
		for _, want := range []string{"postured_bad_events_total 1\n", fmt.Sprintf("postured_projection_halted_sequence %d\n", bad)} {
			if !strings.Contains(metrics, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
	}

	// A write waits for no projection that cannot move: 503 at once. A
	// model change decides on the state after the bad message, so it is
	// not written, and says so.
	r := a.do(t, http.MethodPost, mgmt+"/services", admin, map[string]any{"name": "during"})
	if _, e := r.envelope(t); r.Status != http.StatusServiceUnavailable || e.Code != posture.CodeUnavailable ||
		!strings.Contains(e.Message, fmt.Sprintf("stopped at sequence %d", bad)) || !strings.Contains(e.Message, "nothing of this request was written") {
		t.Fatalf("a model change while stopped: %d %s", r.Status, r.Body)
	}
	// A log-in appends its API session before it waits: it is in the log.
	r = a.do(t, http.MethodPost, mgmt+"/authenticate?method=password", "", map[string]any{"username": "admin", "password": testAdminPassword})
	if _, e := r.envelope(t); r.Status != http.StatusServiceUnavailable || !strings.Contains(e.Message, "what was written is in the log") {
		t.Fatalf("a log-in while stopped: %d %s", r.Status, r.Body)
	}

	// Readers of the log stop there too, and say what to do.
	if _, err := command(t, "replay", nats, "--stream-replicas=3", "--out", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprintf("events skip --seq %d", bad)) {
		t.Fatalf("replay before the decision: %v", err)
	}
	out, err := command(t, "events", "inspect", nats, "--stream-replicas=3", "--seq", fmt.Sprint(bad))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"subject:  postured.model", "15 bytes, text:\nnot json at all\n", "event:    no: not JSON", "skipped:  no;"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect lacks %q:\n%s", want, out)
		}
	}
	if _, err := command(t, "events", "skip", nats, "--stream-replicas=3", "--seq", "1", "--reason", "x"); err == nil ||
		!strings.Contains(err.Error(), "only a message that is not an event can be skipped") {
		t.Fatalf("skipping an event: %v", err)
	}

	out, err = command(t, "events", "skip", nats, "--stream-replicas=3", "--seq", fmt.Sprint(bad), "--reason", "published by a test client", "--actor", "ops@test")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("skipped message %d", bad)) {
		t.Fatalf("skip: %s", out)
	}

	// Both nodes go on by themselves, apply what came after, are ready.
	last := a.lastSeq(t)
	for _, n := range []*clusterNode{a, b} {
		if err := n.store.WaitFor(t.Context(), last); err != nil {
			t.Fatal(err)
		}
		if status, v := n.readyz(t); status != http.StatusOK {
			t.Fatalf("readyz after the decision: %d %+v", status, v)
		}
		if _, err := projections.Get[posture.Service](n.store, "svc-after"); err != nil {
			t.Fatalf("the event after the skipped message: %v", err)
		}
	}
	admin = b.adminToken(t)
	b.create(t, admin, "services", map[string]any{"name": "later", "roleAttributes": []string{"apps"}})
	// The model change answered 503 while stopped was not made.
	if r := b.do(t, http.MethodGet, mgmt+"/services?filter="+url.QueryEscape(`name="during"`), admin, nil); r.Status != http.StatusOK ||
		!strings.Contains(string(r.Body), `"data":[]`) {
		t.Fatalf("services after the decision: %d %s", r.Status, r.Body)
	}

	// Who skipped what and why.
	out, err = command(t, "audit", "skips", nats, "--stream-replicas=3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "ops@test") || !strings.Contains(out, "published by a test client") || !strings.Contains(out, fmt.Sprintf("\n%d ", bad)) {
		t.Fatalf("audit skips:\n%s", out)
	}
	out, err = command(t, "events", "inspect", nats, "--stream-replicas=3", "--seq", fmt.Sprint(bad))
	if err != nil || !strings.Contains(out, "skipped:  by ops@test") {
		t.Fatalf("inspect after the decision: %v\n%s", err, out)
	}

	// A node started now passes over it; a replay gives the same
	// projection as every node.
	c := startClusterNode(t, nc, a.cfg.PKIDir, "node-c")
	dumpA := a.dumpCaughtUp(t)
	for name, n := range map[string]*clusterNode{"B": b, "C": c} {
		if diff := cmp.Diff(dumpA, n.dumpCaughtUp(t)); diff != "" {
			t.Fatalf("the projections of A and %s differ (-A +%s):\n%s", name, name, diff)
		}
	}
	out = filepath.Join(t.TempDir(), "replay")
	if _, err := command(t, "replay", nats, "--stream-replicas=3", "--out", out); err != nil {
		t.Fatal(err)
	}
	rebuilt, err := projections.Open(projections.Options{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	var dump bytes.Buffer
	if err := rebuilt.Dump(&dump); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(dumpA, dump.String()); diff != "" {
		t.Fatalf("the replay differs from node A (-A +replay):\n%s", diff)
	}
}

// The node's consumer logs the stop once at ERROR level with the sequence
// and the reason, and goes on once the decision is in the log.
func TestHaltingSourceLogsAndWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	store, err := projections.Open(projections.Options{Dir: "p", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var logs lockedBuffer
	halt := &api.Halt{}
	done := make(chan error, 1)
	go func() {
		done <- store.Run(ctx, haltingSource{log: l, halt: halt, logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	}()

	if _, err := l.Append(ctx, posture.MustEvent(posture.ConfigChanged{MFAGraceSeconds: 60, APISessionTimeoutSeconds: 60}, time.Now())); err != nil {
		t.Fatal(err)
	}
	ack, err := l.JetStream().Publish(ctx, "postured.posture.x", []byte(`{"id":"e1","type":"identity.promoted","at":"2026-01-01T00:00:00Z","subject":"posture.x","data":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := store.WaitFor(ctx, ack.Sequence-1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if seq, _ := halt.At(); seq == ack.Sequence {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the consumer did not report the halt")
		}
	}
	var line struct {
		Level, Msg, Reason string
		Seq                uint64
	}
	if err := json.Unmarshal([]byte(strings.SplitN(logs.String(), "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Level != "ERROR" || line.Seq != ack.Sequence || !strings.Contains(line.Reason, `unknown event type "identity.promoted"`) {
		t.Fatalf("log: %s", logs.String())
	}
	if _, err := l.Skip(ctx, eventlog.SkipRequest{Seq: ack.Sequence, Reason: "not ours", Actor: "op", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	last, _ := l.LastSeq(ctx)
	if err := store.WaitFor(ctx, last); err != nil {
		t.Fatal(err)
	}
	if seq, _ := halt.At(); seq != 0 || halt.Total() != 1 {
		t.Fatalf("after the decision: halted at %d, %d stops", seq, halt.Total())
	}
	if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
		t.Fatalf("%d ERROR lines, want 1:\n%s", n, logs.String())
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// TestRestartedNodeGoesOnAfterSkip: a node restarted on a log that holds a
// message that is not an event stays unready, naming it (it used to say
// "catching up" for ever), until an operator skips the message through the
// node's NATS port; then it becomes ready by itself.
func TestRestartedNodeGoesOnAfterSkip(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	first := startTestNode(t, cfg)
	ack, err := first.elog.JetStream().Publish(t.Context(), "postured.model", []byte("not json at all"))
	if err != nil {
		t.Fatal(err)
	}
	first.waitHalted(t, ack.Sequence)
	first.srv.Close()
	first.Close()

	n, err := startNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv := httptest.NewUnstartedServer(n)
	srv.TLS = n.tlsConfig()
	srv.StartTLS()
	defer srv.Close()
	restarted := &testNode{node: n, srv: srv, cfg: cfg, http: first.http}
	ready := make(chan error, 1)
	go func() { ready <- n.ready(t.Context(), &cfg) }()
	v := restarted.waitHalted(t, ack.Sequence)
	if !strings.Contains(v.Reason, "not JSON") {
		t.Fatalf("readyz of the restarted node: %+v", v)
	}

	// The node's NATS port wants TLS and credentials: the auditor may not
	// record a decision, postured may.
	nats := func(user string) []string {
		return []string{"--nats-url", "tls://" + cfg.NatsListen, "--nats-tls-ca", filepath.Join(cfg.DataDir, "pki", "ca.pem"),
			"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", user+".nk")}
	}
	skip := []string{"events", "skip", "--seq", fmt.Sprint(ack.Sequence), "--reason", "test"}
	if _, err := command(t, append(skip, nats("auditor")...)...); err == nil {
		t.Fatal("the auditor recorded a skip decision")
	} else if !strings.Contains(err.Error(), "may not write") || !strings.Contains(err.Error(), "postured's credentials") {
		t.Fatalf("events skip as the auditor: %q does not say that postured's credentials are needed", err)
	}
	if _, err := command(t, append(skip, nats("postured")...)...); err != nil {
		t.Fatal(err)
	}
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	if status, v := restarted.readyz(t); status != http.StatusOK {
		t.Fatalf("readyz after the decision: %d %+v", status, v)
	}
	// The skipped message was the model subject's last: the next model
	// change expects it, and is accepted.
	admin := restarted.adminToken(t)
	if r := restarted.do(t, http.MethodPost, mgmt+"/services", admin, map[string]any{"name": "after-the-skip"}); r.Status != http.StatusCreated {
		t.Fatalf("a model change after the skip: %d %s", r.Status, r.Body)
	}
}

// inspect prints text as text and anything else as a hex dump.
func TestWriteInspection(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want string
	}{
		{[]byte("{\"a\":\n1}"), "8 bytes, text:\n{\"a\":\n1}\n"},
		{[]byte("\x00\x01binary\xff"), "9 bytes, not text:\n00000000  00 01 62 69 6e 61 72 79  ff"},
	} {
		var b bytes.Buffer
		in := inspection{Seq: 7, Subject: "postured.model", Data: c.data, Size: len(c.data), Problem: "not JSON",
			Headers: map[string][]string{"Nats-Msg-Id": {"x"}}}
		if err := writeInspection(&b, in); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{c.want, "header:   Nats-Msg-Id: x\n", "event:    no: not JSON\n", "events skip --seq 7"} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("inspection of %q lacks %q:\n%s", c.data, want, b.String())
			}
		}
	}
}

// TestAuditSkipsNone: a log with no skipped message says so, on stderr,
// and prints no table (nor JSON).
func TestAuditSkipsNone(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	n.srv.Close()
	n.Close()
	for _, args := range [][]string{{}, {"--json"}} {
		var out, errOut lockedBuffer
		if err := posturedStreams(t.Context(), &out, &errOut, append([]string{"audit", "skips", "--data-dir", cfg.DataDir}, args...)...); err != nil {
			t.Fatal(err)
		}
		if out.String() != "" || strings.Contains(errOut.String(), "no message of the log has been skipped") != (len(args) == 0) {
			t.Fatalf("audit skips %v: stdout %q, stderr %q", args, out.String(), errOut.String())
		}
	}
}
