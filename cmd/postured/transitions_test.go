package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
)

// transitionScenario drives, through node n, one identity through every
// kind of transition: an MFA pass (two MFA policies start passing), an OS
// report (the OS policy starts passing), a wake (a grace window starts),
// then three deadlines (the grace ends, the MFA timeout passes, the OS
// evidence goes stale: three policies stop passing, and the session of the
// timed-out policy is removed). It returns the identity and the
// transitions expected, as "kind policy-or-check cause-type" lines.
func transitionScenario(t *testing.T, n *testNode) (string, []string) {
	t.Helper()
	admin := n.adminToken(t)
	linux := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os-fresh", "operatingSystems": linux, "maxAgeSeconds": 4})
	timeout := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-3s", "timeoutSeconds": 3})
	onWake := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-wake", "promptOnWake": true})
	policies := map[string]string{}
	for name, check := range map[string]string{"os": osCheck, "timed": timeout, "woken": onWake} {
		svc := n.create(t, admin, "services", map[string]any{"name": name})
		policies[name] = n.create(t, admin, "service-policies", map[string]any{"name": name, "type": "Dial", "identityRoles": []string{"#all"},
			"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}})
		policies[name+"-service"] = svc
	}
	ep := n.endpoint(t, admin, "transitions-laptop")

	if _, err := n.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Linux", "version": "6.1.0"})
	if r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": policies["timed-service"]}); r.Status != http.StatusCreated {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "ENDPOINT_STATE", "id": "0", "woken": true}); r.Status != http.StatusCreated {
		t.Fatalf("wake: %d %s", r.Status, r.Body)
	}
	want := []string{
		"policy-passing " + policies["timed"] + " " + posture.TypeMFAPassed,
		"policy-passing " + policies["woken"] + " " + posture.TypeMFAPassed,
		"policy-passing " + policies["os"] + " " + posture.TypePostureRecorded,
		"grace-started " + onWake + " " + posture.TypePostureRecorded,
		"policy-failing " + policies["woken"] + " " + posture.TypeDeadlineReached,
		"grace-ended " + onWake + " " + posture.TypeDeadlineReached,
		"policy-failing " + policies["timed"] + " " + posture.TypeDeadlineReached,
		"mfa-timed-out " + timeout + " " + posture.TypeDeadlineReached,
		"session-removed " + policies["timed-service"] + " " + posture.TypeDeadlineReached,
		"policy-failing " + policies["os"] + " " + posture.TypeDeadlineReached,
		"evidence-stale " + osCheck + " " + posture.TypeDeadlineReached,
	}
	return ep.id, want
}

// describe is a transition as transitionScenario spells it.
func describe(tr posture.Transition) string {
	about := tr.PolicyID
	switch tr.Kind {
	case posture.TransitionSessionRemoved:
		about = tr.ServiceID
	case posture.TransitionGraceStarted, posture.TransitionGraceEnded, posture.TransitionMFATimedOut, posture.TransitionEvidenceStale:
		about = tr.Checks[0].ID
	}
	return tr.Kind + " " + about + " " + tr.Cause.EventType
}

// waitTransitions follows the transitions stream until it holds want
// transitions of the identity (a durable-free ordered consumer: a barrier
// on the stream, not a poll), then waits until every node's outbox is
// empty, so that a late copy would show.
func waitTransitions(t *testing.T, want int, identityID string, nodes ...*testNode) []posture.Transition {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cons, err := nodes[0].trans.Stream().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{eventlog.TransitionsSubjects("POSTURED") + identityID + ".>"},
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for seen < want {
		msgs, err := cons.Fetch(want-seen, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for range msgs.Messages() {
			seen++
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of %d transitions in the stream", seen, want)
		}
	}
	for _, n := range nodes {
		for {
			q, err := n.store.PendingTransitions(0, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(q) == 0 {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("outbox of a node not empty: %+v", q)
			case <-time.After(20 * time.Millisecond): // the relay's own loop; it has no barrier to wait on
			}
		}
	}
	var out []posture.Transition
	if err := nodes[0].trans.Read(ctx, 1, func(_ uint64, tr posture.Transition) error {
		if tr.IdentityID == identityID {
			out = append(out, tr)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTransitions compares the transitions (in any order: the deadlines
// may come in any order) with the expected lines, and checks what each
// carries: a unique derived ID, the subject's identity, a cause that is in
// the log, failing checks with actual and expected values.
func checkTransitions(t *testing.T, n *testNode, got []posture.Transition, want []string) {
	t.Helper()
	var lines []string
	ids := map[string]bool{}
	for _, tr := range got {
		lines = append(lines, describe(tr))
		if ids[tr.ID] {
			t.Errorf("transition %s twice", tr.ID)
		}
		ids[tr.ID] = true
		e, err := n.elog.Get(t.Context(), tr.Cause.Seq)
		if err != nil || e.ID != tr.Cause.EventID || e.Type != tr.Cause.EventType || !e.At.Equal(tr.At) {
			t.Errorf("%s: cause %+v is not event %d in the log (%v %+v)", tr.Kind, tr.Cause, tr.Cause.Seq, err, e)
		}
		if tr.Kind == posture.TransitionPolicyFailing {
			if len(tr.Checks) != 1 || tr.Checks[0].Pass || len(tr.Checks[0].ActualValue) == 0 || len(tr.Checks[0].ExpectedValue) == 0 || tr.Checks[0].Reason == "" {
				t.Errorf("policy-failing without its failing check: %+v", tr.Checks)
			}
		}
		if tr.Kind == posture.TransitionGraceStarted && (tr.Until == nil || !tr.Until.After(tr.At)) {
			t.Errorf("grace-started until %v", tr.Until)
		}
		if tr.Kind == posture.TransitionEvidenceStale && !tr.Checks[0].Stale {
			t.Errorf("evidence-stale check not stale: %+v", tr.Checks[0])
		}
	}
	slices.Sort(lines)
	want = slices.Clone(want)
	slices.Sort(want)
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Fatalf("transitions (-want +got):\n%s", diff)
	}
}

// TestTransitionsStream: each kind of transition appears once in the
// transitions stream, with its cause.
func TestTransitionsStream(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.MFAGrace = 2 * time.Second
	n := startTestNode(t, cfg)
	id, want := transitionScenario(t, n)
	got := waitTransitions(t, len(want), id, n)
	checkTransitions(t, n, got, want)
	for _, tr := range got {
		if !slices.Contains(posture.TransitionKinds, tr.Kind) {
			t.Errorf("unknown kind %q", tr.Kind)
		}
	}
	// The subjects: postured-transitions.<identityId>.<kind>.
	if s := n.trans.Subject(got[0]); s != "postured-transitions."+id+"."+got[0].Kind {
		t.Errorf("subject %s", s)
	}
}

// TestTransitionsStreamTwoNodes: with two nodes on one NATS cluster, each
// deriving every transition and running its relay, the stream holds each
// transition once.
func TestTransitionsStreamTwoNodes(t *testing.T) {
	nc := natstest.Start(t, 3)
	pkiDir := t.TempDir()
	grace := func(c *serveCmd) { c.MFAGrace = 2 * time.Second }
	a := startClusterNodeWith(t, nc, pkiDir, "node-a", natsFlags{}, grace)
	b := startClusterNodeWith(t, nc, pkiDir, "node-b", natsFlags{}, grace)
	id, want := transitionScenario(t, a.testNode)
	got := waitTransitions(t, len(want), id, a.testNode, b.testNode)
	checkTransitions(t, a.testNode, got, want)
}

// TestTransitionsNotRepublishedAfterRebuild: a node whose projection is
// deleted rebuilds it from the log, deriving every transition again; its
// relay skips what the stream already holds.
func TestTransitionsNotRepublishedAfterRebuild(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	linux := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os", "operatingSystems": linux})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "crm", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + osCheck}})
	ep := n.endpoint(t, admin, "rebuilt-laptop")
	for _, v := range []string{"6.1.0", "4.0.0", "6.2.0"} {
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Linux", "version": v}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	before := waitTransitions(t, 3, ep.id, n)
	n.srv.Close()
	n.Close()
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "projections")); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	after := waitTransitions(t, 3, ep.id, n)
	if len(before) != 3 || len(after) != 3 {
		t.Fatalf("transitions before %d, after the rebuild %d, want 3 and 3", len(before), len(after))
	}
}

// TestTailsAcrossARestart: while the node is away, transitions tail and
// events tail say so on stderr, and again when it is back; transitions tail
// then goes on with the next transition. Nothing the tails ask on the way
// (new consumers, the old ones deleted) breaks the auditor's permissions.
func TestTailsAcrossARestart(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	var serverLog lockedBuffer
	log := slog.New(slog.NewTextHandler(&serverLog, nil))
	n := startTestNodeLog(t, cfg, log)
	st := newStory(t, n)
	auditor := []string{"--nats-url", "tls://" + cfg.NatsListen, "--nats-tls-ca", filepath.Join(cfg.DataDir, "pki", "ca.pem"),
		"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", "auditor.nk")}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type tail struct {
		out, err lockedBuffer
		done     chan error
	}
	start := func(args ...string) *tail {
		tl := &tail{done: make(chan error, 1)}
		go func() { tl.done <- posturedStreams(ctx, &tl.out, &tl.err, append(args, auditor...)...) }()
		return tl
	}
	waitFor := func(what string, b *lockedBuffer, want string) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(b.String(), want); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no %q in:\n%s", what, want, b.String())
			}
		}
	}
	trans := start("transitions", "tail", "--all", "--identity", st.ep.id)
	events := start("events", "tail", "--identity", st.ep.id, "--from", strconv.FormatUint(n.lastSeq(t)+1, 10))
	st.play(t)
	waitFor("transitions tail", &trans.out, `"kind":"policy-passing"`)
	waitFor("events tail", &events.out, `"session.created"`)

	n.srv.Close()
	n.Close()
	for _, tl := range []*tail{trans, events} {
		waitFor("stderr", &tl.err, "postured: lost the connection to NATS")
	}
	n = startTestNodeLog(t, cfg, log)
	for _, tl := range []*tail{trans, events} {
		waitFor("stderr", &tl.err, "postured: connected to NATS again")
	}
	body := map[string]any{"id": st.check, "typeId": "OS", "type": "Windows", "version": "6.1.7601"} // failing again
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", st.ep.token, body); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	waitFor("transitions tail after the restart", &trans.out, `"kind":"policy-failing"`)
	if got := strings.Count(trans.out.String(), `"kind":"policy-passing"`); got != 1 {
		t.Errorf("policy-passing %d times after the restart:\n%s", got, trans.out.String())
	}
	cancel()
	for _, tl := range []*tail{trans, events} {
		if err := <-tl.done; err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(serverLog.String(), "Violation") {
		t.Fatalf("a tail broke the auditor's permissions:\n%s", serverLog.String())
	}
}
