package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// freeAddr is a loopback host:port that nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// lockedBuffer is a buffer a running command writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// postured runs a command line as main does, with its output in out.
func postured(ctx context.Context, out *lockedBuffer, args ...string) error {
	return posturedStreams(ctx, out, &lockedBuffer{}, args...)
}

// posturedStreams is postured with its messages in errOut.
func posturedStreams(ctx context.Context, out, errOut *lockedBuffer, args ...string) error {
	var c cli
	s := streams{out: out, err: errOut}
	parser, err := newParser(&c, s)
	if err != nil {
		return err
	}
	k, err := parser.Parse(args)
	if err != nil {
		return err
	}
	return run(ctx, k, s)
}

// command runs a command line to its end and returns its output.
func command(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out lockedBuffer
	err := postured(t.Context(), &out, args...)
	return out.String(), err
}

// follow starts `events tail` and returns a function that waits until its
// output holds want, stops it and returns the output.
func follow(t *testing.T, args ...string) (until func(want string) string) {
	t.Helper()
	return followCommand(t, append([]string{"events", "tail"}, args...)...)
}

// followCommand is follow for any command that runs until stopped.
func followCommand(t *testing.T, args ...string) (until func(want string) string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var out lockedBuffer
	done := make(chan error, 1)
	go func() { done <- postured(ctx, &out, args...) }()
	return func(want string) string {
		t.Helper()
		defer cancel()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v: no %q in:\n%s", args, want, out.String())
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out.String()
	}
}

// story is an identity denied a service (its OS is too old), then granted
// it once it reports a newer one.
type story struct {
	n     *testNode
	ep    endpoint
	svc   string
	check string
}

func newStory(t *testing.T, n *testNode) *story {
	t.Helper()
	admin := n.adminToken(t)
	st := &story{n: n}
	st.svc = n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	st.check = n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "win", "roleAttributes": []string{"os"},
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.19041"}}}})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"#apps"}, "postureCheckRoles": []string{"#os"}})
	st.ep = n.endpoint(t, admin, "laptop-1", "laptops")
	return st
}

// play reports the old OS, is denied, reports the new one and is granted.
// It returns a moment between the denial and the new report.
func (st *story) play(t *testing.T) (denied time.Time) {
	t.Helper()
	report := func(version string) {
		t.Helper()
		body := map[string]any{"id": st.check, "typeId": "OS", "type": "Windows", "version": version}
		if r := st.n.do(t, http.MethodPost, clientAPI+"/posture-response", st.ep.token, body); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	dial := func(want int) {
		t.Helper()
		if r := st.n.do(t, http.MethodPost, clientAPI+"/sessions", st.ep.token, map[string]any{"serviceId": st.svc}); r.Status != want {
			t.Fatalf("session: %d %s", r.Status, r.Body)
		}
	}
	report("6.1.7601")
	dial(http.StatusConflict)
	time.Sleep(10 * time.Millisecond) // event times are the node's clock: keep the moment apart
	denied = time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	report("10.0.19045")
	dial(http.StatusCreated)
	return denied
}

// TestOpsCommands runs replay, audit, explain and events tail as an
// operator would: tail, replay and audit against a running node
// (--nats-url), all of them against its data directory once it stopped.
func TestOpsCommands(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	n := startTestNode(t, cfg)
	st := newStory(t, n)
	ep, svc := st.ep, st.svc

	// The node's NATS port wants TLS and credentials: the auditor's, which
	// the node generated in its data directory, read and follow.
	caFile := filepath.Join(cfg.DataDir, "pki", "ca.pem")
	if _, err := command(t, "events", "tail", "--nats-url", "tls://"+cfg.NatsListen, "--nats-tls-ca", caFile); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("events tail without credentials: %v", err)
	}
	auditor := []string{"--nats-url", "tls://" + cfg.NatsListen, "--nats-tls-ca", caFile,
		"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", "auditor.nk")}

	// Following the running node from the next event on.
	following := follow(t, append(auditor, "--from", fmt.Sprint(n.lastSeq(t)+1), "--identity", ep.id, "--type", "session.denied,session.created")...)
	denied := st.play(t)
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(following(`"session.created"`)), "\n") {
		var e struct {
			Type string `json:"type"`
			Seq  uint64 `json:"seq"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Seq == 0 {
			t.Fatalf("events tail line %q: %v", line, err)
		}
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]string{posture.TypeSessionDenied, posture.TypeSessionCreated}, types); diff != "" {
		t.Fatalf("events tail (-want +got):\n%s", diff)
	}
	// --no-follow stops after the newest event: the same two, and an end;
	// following says on stderr from where it prints.
	var tailOut, errOut lockedBuffer
	if err := posturedStreams(t.Context(), &tailOut, &errOut, append([]string{"events", "tail", "--no-follow", "--from", "1", "--identity", ep.id, "--type", "session.denied,session.created"}, auditor...)...); err != nil ||
		strings.Count(tailOut.String(), "\n") != 2 || errOut.String() != "" {
		t.Fatalf("events tail --no-follow: %v\n%s%s", err, tailOut.String(), errOut.String())
	}
	// A dump that prints nothing says why.
	for flags, want := range map[string]string{
		"--from=0":                    "(without --from, or with --from 0, the tail starts after the newest; --from 1 dumps the log)",
		"--from=999999":               "(--from 999999 is past it)",
		"--from=1 --type=mfa.removed": "(none matched)",
	} {
		var out, msgs lockedBuffer
		args := append([]string{"events", "tail", "--no-follow"}, strings.Fields(flags)...)
		if err := posturedStreams(t.Context(), &out, &msgs, append(args, auditor...)...); err != nil || out.String() != "" ||
			!strings.HasPrefix(msgs.String(), "postured: no event printed: the log's newest is sequence ") || !strings.HasSuffix(msgs.String(), want+"\n") {
			t.Fatalf("events tail --no-follow %s: %v\n%s%s", flags, err, out.String(), msgs.String())
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for !strings.Contains(errOut.String(), "following") && ctx.Err() == nil {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	if err := posturedStreams(ctx, &tailOut, &errOut, append([]string{"events", "tail"}, auditor...)...); err != nil ||
		!regexp.MustCompile(`^postured: following the log from sequence \d+ \(Ctrl-C stops\)\n$`).MatchString(errOut.String()) {
		t.Fatalf("events tail: %v %q", err, errOut.String())
	}

	// A replay into a fresh directory gives the live projection's bytes,
	// from the running node and from its data directory once it stopped.
	replayed := func(args ...string) (out, summary, dump string) {
		t.Helper()
		out = filepath.Join(t.TempDir(), "replay")
		summary, err := command(t, append([]string{"replay", "--out", out}, args...)...)
		if err != nil {
			t.Fatalf("replay %v: %v", args, err)
		}
		store, err := projections.Open(projections.Options{Dir: out})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		var b bytes.Buffer
		if err := store.Dump(&b); err != nil {
			t.Fatal(err)
		}
		return out, summary, b.String()
	}
	liveDump := n.dumpCaughtUp(t)
	if _, _, dump := replayed(auditor...); dump != liveDump {
		t.Fatalf("replay %s differs from the live projection:\n%s", auditor, cmp.Diff(liveDump, dump))
	}
	if table, err := command(t, append([]string{"audit", "identity", ep.id}, auditor...)...); err != nil || !strings.Contains(table, "denied: failing policies laptops-crm") {
		t.Fatalf("audit %s: %v\n%s", auditor, err, table)
	}
	last := n.lastSeq(t)
	n.srv.Close()
	n.Close() // appends a last checkpoint, which the live projection did not apply
	data := "--data-dir=" + cfg.DataDir
	out, summary, dump := replayed(data, "--to-seq", strconv.FormatUint(last, 10))
	if want := fmt.Sprintf("replayed %d events (cursor %d) into %s", last, last, out); !strings.HasPrefix(summary, want) {
		t.Fatalf("replay summary %q, want %q...", summary, want)
	}
	if dump != liveDump {
		t.Fatalf("replay %s differs from the live projection:\n%s", data, cmp.Diff(liveDump, dump))
	}
	if summary, err := command(t, "replay", data, "--out", filepath.Join(t.TempDir(), "part"), "--to-seq", "5"); err != nil || !strings.Contains(summary, "(cursor 5)") {
		t.Fatalf("replay --to-seq 5: %v %q", err, summary)
	}
	if summary, err := command(t, "replay", data, "--out", filepath.Join(t.TempDir(), "one"), "--to-seq", "1"); err != nil || !strings.HasPrefix(summary, "replayed 1 event (cursor 1)") {
		t.Fatalf("replay --to-seq 1: %v %q", err, summary)
	}
	var replayOut, replayErr lockedBuffer
	if err := posturedStreams(t.Context(), &replayOut, &replayErr, "replay", data, "--out", filepath.Join(t.TempDir(), "all"), "--to-seq", "999999"); err != nil ||
		!strings.Contains(replayErr.String(), "before --to-seq 999999: replayed all of it") {
		t.Fatalf("replay --to-seq past the end: %v %q %q", err, replayOut.String(), replayErr.String())
	}
	replayOut, replayErr = lockedBuffer{}, lockedBuffer{}
	if err := posturedStreams(t.Context(), &replayOut, &replayErr, "replay", data, "--out", filepath.Join(t.TempDir(), "none"), "--until", "2001-01-01T00:00:00Z"); err != nil ||
		!strings.Contains(replayErr.String(), "no event of the log is at or before --until 2001-01-01T00:00:00Z") {
		t.Fatalf("replay --until before the log: %v %q %q", err, replayOut.String(), replayErr.String())
	}
	if _, err := command(t, "replay", data, "--out", out); err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("replay into a full directory: %v", err)
	}

	table, err := command(t, "audit", "identity", ep.id, data)
	if err != nil || !strings.Contains(table, "denied: failing policies laptops-crm") || !strings.Contains(table, "failing -> passing") {
		t.Fatalf("audit: %v\n%s", err, table)
	}
	lines, err := command(t, "audit", "identity", ep.id, data, "--json", "--until", denied.Format(time.RFC3339Nano))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(lines), "\n") {
		var e posture.HistoryEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.At.After(denied) {
			t.Fatalf("audit --json --until %s: %q %v", denied, line, err)
		}
	}
	if _, err := command(t, "audit", "identity", "nosuch", data); posture.CodeOf(err) != posture.CodeNotFound {
		t.Fatalf("audit of an unknown identity: %v", err)
	}
	var auditOut, auditErr lockedBuffer
	if err := posturedStreams(t.Context(), &auditOut, &auditErr, "audit", "identity", ep.id, data, "--since", "1h"); err != nil ||
		strings.Count(auditOut.String(), "\n") != 1 || !strings.HasPrefix(auditErr.String(), "postured: no entry in the window") {
		t.Fatalf("audit of an empty window: %v %q %q", err, auditOut.String(), auditErr.String())
	}

	text, err := command(t, "explain", "--identity", ep.id, "--service", svc, "--at", denied.Format(time.RFC3339Nano), data)
	if err != nil || !strings.Contains(text, "DENIED") || !strings.Contains(text, `{"type":"Windows","version":"6.1.7601","build":""}`) {
		t.Fatalf("explain at the denial: %v\n%s", err, text)
	}
	var now posture.Explanation
	js, err := command(t, "explain", "--identity", ep.id, "--service", svc, "--json", data)
	if err != nil || json.Unmarshal([]byte(js), &now) != nil || now.Decision != posture.DecisionGranted {
		t.Fatalf("explain now: %v\n%s", err, js)
	}
	// The type in any case, as the API takes it: no Bind policy grants it.
	var bind posture.Explanation
	if js, err := command(t, "explain", "--identity", ep.id, "--service", svc, "--type", "bind", "--json", data); err != nil ||
		json.Unmarshal([]byte(js), &bind) != nil || bind.Type != posture.Bind || bind.Decision != posture.DecisionNoPermission {
		t.Fatalf("explain --type bind: %v\n%s", err, js)
	}
	if _, err := command(t, "explain", "--identity", ep.id, "--service", "nosuch", data); posture.CodeOf(err) != posture.CodeNotFound {
		t.Fatalf("explain of an unknown service: %v", err)
	}

	history := follow(t, data, "--from", "1", "--type", "session.denied")
	if got := history(`"session.denied"`); strings.Count(got, "\n") != 1 {
		t.Fatalf("events tail --from 1 --type session.denied:\n%s", got)
	}
}

// TestNegativeTimesNeedNoEquals: "--at -2h" is read as "--at=-2h", as is
// a negative number after a flag of a signed number, and nothing else
// changes.
func TestNegativeTimesNeedNoEquals(t *testing.T) {
	var c cli
	parser, err := newParser(&c, streams{out: &lockedBuffer{}, err: &lockedBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	flags := negativeFlags(parser.Model)
	for in, want := range map[string]string{
		"explain --at -2h --identity i":     "explain --at=-2h --identity i",
		"backtest --from -720h --until -1h": "backtest --from=-720h --until=-1h",
		"audit identity x --since -30m":     "audit identity x --since=-30m",
		"explain --at 2026-11-24T00:00:00Z": "explain --at 2026-11-24T00:00:00Z",
		"explain --at -v":                   "explain --at -v",
		"events tail --from 12":             "events tail --from 12",
		"explain --at":                      "explain --at",
		"serve --max-connections -1":        "serve --max-connections=-1",
		"serve --mfa-grace -5m":             "serve --mfa-grace=-5m",
		"backtest --changes -3":             "backtest --changes=-3",
		"serve --admin-username -1":         "serve --admin-username -1",
	} {
		if got := strings.Join(joinNegativeValues(strings.Fields(in), flags), " "); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

// TestTransitionsTail follows the transitions stream as the auditor: an
// identity's policy passing, then failing, one JSON line each, filtered by
// identity and kind; the same from a stopped node's data directory; a kind
// that does not exist is a usage error.
func TestTransitionsTail(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	n := startTestNode(t, cfg)
	st := newStory(t, n)
	// The same story for another identity, filtered out.
	other := *st
	other.ep = n.endpoint(t, n.adminToken(t), "other-laptop", "laptops")
	caFile := filepath.Join(cfg.DataDir, "pki", "ca.pem")
	auditor := []string{"--nats-url", "tls://" + cfg.NatsListen, "--nats-tls-ca", caFile,
		"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", "auditor.nk")}
	// --all: the consumer may start after the first transitions.
	following := followCommand(t, append([]string{"transitions", "tail", "--all", "--identity", st.ep.id, "--kind", "policy-failing,policy-passing"}, auditor...)...)
	other.play(t)
	st.play(t) // failing from the start, then passing
	for _, ep := range []endpoint{other.ep, st.ep} {
		body := map[string]any{"id": st.check, "typeId": "OS", "type": "Windows", "version": "6.1.7601"} // failing again
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, body); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(following(`"kind":"policy-failing"`)), "\n") {
		var tr posture.Transition
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("%v: %q", err, line)
		}
		if tr.IdentityID != st.ep.id {
			t.Fatalf("another identity's transition: %s", line)
		}
		kinds = append(kinds, tr.Kind)
	}
	if want := []string{posture.TransitionPolicyPassing, posture.TransitionPolicyFailing}; !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	// --no-follow: what the stream holds now, then the command ends, and
	// leaves no consumer behind.
	consumers := func() int {
		info, err := n.trans.Stream().Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	dump, err := command(t, append([]string{"transitions", "tail", "--all", "--no-follow", "--identity", st.ep.id, "--kind", "policy-failing,policy-passing"}, auditor...)...)
	if err != nil || strings.Count(dump, "\n") != 2 || !strings.Contains(dump, `"kind":"policy-passing"`) || !strings.Contains(dump, `"kind":"policy-failing"`) {
		t.Fatalf("--all --no-follow: %v\n%s", err, dump)
	}
	if after := consumers(); after != before {
		t.Fatalf("consumers on the transitions stream: %d before the dump, %d after", before, after)
	}
	if out, err := command(t, append([]string{"transitions", "tail", "--no-follow", "--identity", st.ep.id}, auditor...)...); err != nil || out != "" {
		t.Fatalf("--no-follow from after the newest: %v %q", err, out)
	}
	for _, bad := range [][]string{{"--kind", "policy-exploded"}, {"--identity", "a.>"}, {"--identity", "x\ny"}} {
		if _, err := command(t, append([]string{"transitions", "tail", "--data-dir", cfg.DataDir}, bad...)...); !errors.As(err, new(usageError)) {
			t.Fatalf("%v: %v, want a usage error", bad, err)
		}
	}
	n.srv.Close()
	n.Close()
	again := followCommand(t, "transitions", "tail", "--all", "--identity", other.ep.id, "--data-dir", cfg.DataDir)
	if out := again(`"kind":"policy-failing"`); !strings.Contains(out, `"kind":"policy-passing"`) || strings.Contains(out, st.ep.id) {
		t.Fatalf("--all on the data directory:\n%s", out)
	}
	if out, err := command(t, "transitions", "tail", "--all", "--no-follow", "--identity", other.ep.id, "--data-dir", cfg.DataDir); err != nil ||
		!strings.Contains(out, `"kind":"policy-failing"`) || strings.Contains(out, st.ep.id) {
		t.Fatalf("--all --no-follow on the data directory: %v\n%s", err, out)
	}

	// A log no node has run on has no transitions stream.
	bare := t.TempDir()
	l, err := eventlog.Open(t.Context(), eventlog.Options{Dir: filepath.Join(bare, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := command(t, "transitions", "tail", "--data-dir", bare); err == nil || !strings.Contains(err.Error(), "no transitions stream beside this log") {
		t.Fatalf("a log without the stream: %v", err)
	}
}

// TestOfflineCommandOnARunningNode: an offline command on the data
// directory of a node started with --nats-listen says how to ask the node,
// flags and paths in full, and those flags work as given; a connection
// without the CA or without credentials names the flag it lacks.
func TestOfflineCommandOnARunningNode(t *testing.T) {
	dir := t.TempDir()
	listen := freeAddr(t)
	node := startBinary(t, dir, "POSTURED_ADMIN_PASSWORD="+testAdminPassword, "POSTURED_NATS_LISTEN="+listen)
	_, err := command(t, "audit", "identity", "nosuch", "--data-dir", dir)
	ca, seed := filepath.Join(dir, "pki", "ca.pem"), filepath.Join(dir, "nats", "creds", "auditor.nk")
	flags := []string{"--nats-url", "tls://" + listen, "--nats-tls-ca", ca, "--nats-nkey", seed}
	if want := strings.Join(flags, " ") + " in place of --data-dir"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("audit on a running node's data directory: %v, want %q", err, want)
	}
	if _, err := command(t, append([]string{"audit", "identity", "nosuch"}, flags...)...); posture.CodeOf(err) != posture.CodeNotFound {
		t.Fatalf("audit with the flags it was given: %v, want a not found", err)
	}
	// A command that writes is given the nodes' own seed.
	_, err = command(t, "events", "skip", "--seq", "1", "--reason", "r", "--data-dir", dir)
	if want := "--nats-nkey " + filepath.Join(dir, "nats", "creds", "postured.nk") + " in place of --data-dir"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("events skip on a running node's data directory: %v, want %q", err, want)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{flags[:2], "give it with --nats-tls-ca"},
		{flags[:4], "give --nats-nkey with the auditor's seed"},
	} {
		_, err := command(t, append([]string{"audit", "identity", "nosuch"}, c.flags...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("audit %v: %v, want %q", c.flags, err, c.want)
		}
	}
	node.stop(t)
}

// TestAskNode: the hint names the node's NATS URL (a wildcard host as the
// loopback address), its CA and the auditor's seed, or the nodes' own seed
// for a command that writes, as the node noted them; a node that noted none
// was started without --nats-listen.
func TestAskNode(t *testing.T) {
	notes := map[string]string{"nats-url": "tls://[::]:4222", "nats-tls-ca": "/srv/pki/ca.pem",
		"nats-nkey": "/srv/data/nats/creds/auditor.nk", "nats-nkey-writer": "/srv/data/nats/creds/postured.nk"}
	if got, want := askNode(notes, false),
		"--nats-url tls://127.0.0.1:4222 --nats-tls-ca /srv/pki/ca.pem --nats-nkey /srv/data/nats/creds/auditor.nk in place of --data-dir"; !strings.Contains(got, want) {
		t.Errorf("askNode: %q, want %q", got, want)
	}
	if got, want := askNode(notes, true), "--nats-nkey /srv/data/nats/creds/postured.nk in place"; !strings.Contains(got, want) {
		t.Errorf("askNode for a writer: %q, want %q", got, want)
	}
	notes["nats-url"] = "tls://10.0.0.1:4222"
	if got := askNode(notes, false); !strings.Contains(got, "--nats-url tls://10.0.0.1:4222 ") {
		t.Errorf("askNode: %q", got)
	}
	if got := askNode(nil, true); !strings.Contains(got, "started without --nats-listen") {
		t.Errorf("askNode without notes: %q", got)
	}
}
