package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog/natstest"
	"github.com/seed-0809debe/posture/expiry"
)

// startTwoNodes starts a three-server NATS cluster and two postured nodes
// on it that share one PKI directory.
func startTwoNodes(t testing.TB) (*natstest.Cluster, *clusterNode, *clusterNode) {
	t.Helper()
	nc := natstest.Start(t, 3)
	pkiDir := t.TempDir()
	return nc, startClusterNode(t, nc, pkiDir, "node-a"), startClusterNode(t, nc, pkiDir, "node-b")
}

// clusterNode is a postured node on the NATS cluster, served over TLS on
// a loopback port of its own and advertised at it. kill stops it the way a
// crash looks to clients: connections drop, the node stops.
type clusterNode struct {
	*testNode
	kill func()
}

// startClusterNode starts a node on the cluster with an R3 stream. Nodes of
// one test share pkiDir, so that clients trust every node and session
// tokens verify on every node. configure, if any, changes the node's
// configuration first.
func startClusterNode(t testing.TB, nc *natstest.Cluster, pkiDir, name string, configure ...func(*serveCmd)) *clusterNode {
	t.Helper()
	return startClusterNodeWith(t, nc, pkiDir, name, natsFlags{}, configure...)
}

// startClusterNodeWith is startClusterNode with NATS credentials and TLS.
func startClusterNodeWith(t testing.TB, nc *natstest.Cluster, pkiDir, name string, auth natsFlags, configure ...func(*serveCmd)) *clusterNode {
	t.Helper()
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsURL, cfg.StreamReplicas, cfg.PKIDir, cfg.Name = nc.URLs, 3, pkiDir, name
	cfg.natsFlags = auth
	for _, f := range configure {
		f(&cfg)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := openNode(ctx, &cfg, ln.Addr().String(), slog.New(slog.DiscardHandler))
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(n.handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.TLS = n.tlsConfig()
	srv.StartTLS()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	cn := &clusterNode{testNode: &testNode{node: n, srv: srv, cfg: cfg, http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: validating(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}, MaxIdleConnsPerHost: 64}),
	}}}
	var once sync.Once
	cn.kill = func() {
		once.Do(func() {
			srv.CloseClientConnections()
			srv.Close()
			stop()
			<-done
			n.Close()
		})
	}
	t.Cleanup(cn.kill)
	return cn
}

// postResult is one answered (or failed) request of a load.
type postResult struct {
	status         int
	requestID      string
	err            error
	sentAfterFault bool // sent once the fault was injected
}

// post sends body to url with an API session token, from any goroutine.
func post(c *http.Client, url, token string, body []byte) postResult {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return postResult{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderSession, token)
	resp, err := c.Do(req)
	if err != nil {
		return postResult{err: err}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return postResult{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id")}
}

// postureByRequest counts the posture.recorded events of the log by the
// request that appended them.
func postureByRequest(t *testing.T, n *testNode) map[string]int {
	t.Helper()
	count := map[string]int{}
	ids := map[string]bool{}
	if err := n.elog.Read(t.Context(), 1, 0, func(b []posture.Event) error {
		for _, e := range b {
			if ids[e.ID] {
				t.Errorf("event %s is in the log twice", e.ID)
			}
			ids[e.ID] = true
			if e.Type == posture.TypePostureRecorded {
				count[e.RequestID]++
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return count
}

// checkExactlyOnce: every request answered 2xx appended exactly one event,
// and no request appended two.
func checkExactlyOnce(t *testing.T, results []postResult, inLog map[string]int) (ok, failed int) {
	t.Helper()
	for _, r := range results {
		if r.err != nil || r.status/100 != 2 {
			failed++
			continue
		}
		ok++
		if inLog[r.requestID] != 1 {
			t.Errorf("request %s was answered %d but is in the log %d times", r.requestID, r.status, inLog[r.requestID])
		}
	}
	for id, n := range inLog {
		if n > 1 {
			t.Errorf("request %s appended %d posture events", id, n)
		}
	}
	return ok, failed
}

// postureSetup is an OS check guarding a service for every identity, and
// endpoints logged in through one node.
func postureSetup(t *testing.T, n *clusterNode, endpoints int) (check, svc string, eps []endpoint) {
	t.Helper()
	admin := n.adminToken(t)
	check = n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "modern-windows",
		"operatingSystems": []any{map[string]any{"type": "WINDOWS", "versions": []string{">=10.0.0"}}}})
	svc = n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "windows-dial-crm", "type": "Dial",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + check}})
	for i := range endpoints {
		eps = append(eps, n.endpoint(t, admin, fmt.Sprintf("laptop-%02d", i)))
	}
	return check, svc, eps
}

// TestClusterConvergesAcrossNodes: two postured nodes on a three-node NATS
// cluster with an R3 stream. What is written through A (posture, a session,
// the API session itself) is served by B, GET /controllers lists both, and
// the two projections are byte-equal.
func TestClusterConvergesAcrossNodes(t *testing.T) {
	_, a, b := startTwoNodes(t)
	check, svc, eps := postureSetup(t, a, 1)
	ep := eps[0]
	if r := a.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token,
		map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045"}); r.Status != http.StatusCreated {
		t.Fatalf("posture through A: %d %s", r.Status, r.Body)
	}
	r := a.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc})
	if r.Status != http.StatusCreated {
		t.Fatalf("session through A: %d %s", r.Status, r.Body)
	}
	var sess struct{ ID string }
	data, _ := r.envelope(t)
	if err := json.Unmarshal(data, &sess); err != nil {
		t.Fatal(err)
	}

	// B follows the log: once it applied A's last write it serves it.
	if err := b.store.WaitFor(t.Context(), a.lastSeq(t)); err != nil {
		t.Fatal(err)
	}
	admin := b.adminToken(t)
	var pd map[string]any
	b.getJSON(t, mgmt+"/identities/"+ep.id+"/posture-data", admin, &pd)
	if os, _ := pd["os"].(map[string]any); os == nil || os["version"] != "10.0.19045" {
		t.Fatalf("posture data through B: %v", pd)
	}
	if ids := b.sessionIDs(t, ep.token); !slices.Contains(ids, sess.ID) {
		t.Fatalf("the session created on A is not listed on B: %v", ids)
	}
	var cur api.APISessionView
	b.getJSON(t, clientAPI+"/current-api-session", ep.token, &cur)
	if cur.ID != ep.apiSessionID {
		t.Fatalf("the API session on B is %s, want %s", cur.ID, ep.apiSessionID)
	}

	// Both nodes are listed, each with its own address, in both APIs.
	var controllers []struct {
		ID           string `json:"id"`
		Name         string `json:"name"`
		IsOnline     bool   `json:"isOnline"`
		CertPEM      string `json:"certPem"`
		Fingerprint  string `json:"fingerprint"`
		LastJoinedAt string `json:"lastJoinedAt"`
		APIAddresses map[string][]struct {
			URL     string `json:"url"`
			Version string `json:"version"`
		} `json:"apiAddresses"`
	}
	b.getJSON(t, clientAPI+"/controllers", ep.token, &controllers)
	if len(controllers) != 2 || controllers[0].Name != "node-a" || controllers[1].Name != "node-b" || controllers[0].ID == controllers[1].ID {
		t.Fatalf("controllers: %+v", controllers)
	}
	for i, n := range []*clusterNode{a, b} {
		c := controllers[i]
		want := n.srv.URL + api.ClientBase
		if got := c.APIAddresses["edge-client"]; len(got) != 1 || got[0].URL != want || got[0].Version != "v1" {
			t.Errorf("%s: edge-client address %+v, want %s", c.Name, got, want)
		}
		if !c.IsOnline || c.LastJoinedAt == "" || !strings.HasPrefix(c.CertPEM, "-----BEGIN CERTIFICATE-----") || len(c.Fingerprint) != 40 {
			t.Errorf("%s: %+v", c.Name, c)
		}
	}
	if r := a.do(t, http.MethodGet, mgmt+"/controllers", admin, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"totalCount":2`) {
		t.Fatalf("management controllers: %d %s", r.Status, r.Body)
	}

	if diff := cmp.Diff(a.dumpCaughtUp(t), b.dumpCaughtUp(t)); diff != "" {
		t.Fatalf("the projections of A and B differ (-A +B):\n%s", diff)
	}
}

// TestClusterTokenWorksOnEveryNode: a client logs in through one node and
// sends its next request to the other straight away (a load balancer
// without affinity). The API session is in the log, but the other node may
// not have applied it yet: it catches up with the log before it answers.
func TestClusterTokenWorksOnEveryNode(t *testing.T) {
	_, a, b := startTwoNodes(t)
	var cur api.APISessionView
	a.getJSON(t, mgmt+"/current-api-session", a.adminToken(t), &cur)
	for i := range 20 {
		// An API session as a node issues it, appended without waiting
		// for any projection; then at once a request to B.
		token, now := posture.NewToken(), time.Now().UTC()
		s := posture.APISession{ID: posture.NewID(), TokenHash: api.TokenHash(token), IdentityID: cur.IdentityID,
			AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: now, LastActivityAt: now}
		if _, err := a.elog.Append(t.Context(), posture.MustEvent(posture.APISessionCreated{APISession: s}, now)); err != nil {
			t.Fatal(err)
		}
		if r := b.do(t, http.MethodGet, mgmt+"/identities", token, nil); r.Status != http.StatusOK {
			t.Fatalf("session %d, issued elsewhere a moment ago: %d %s", i, r.Status, r.Body)
		}
	}
	// Through the API, both ways.
	for i := range 4 {
		from, to := a, b
		if i%2 == 1 {
			from, to = b, a
		}
		if r := to.do(t, http.MethodGet, mgmt+"/identities", from.adminToken(t), nil); r.Status != http.StatusOK {
			t.Fatalf("login %d, token of the other node: %d %s", i, r.Status, r.Body)
		}
	}
	// A token no node issued is still refused, after the wait.
	if r := a.do(t, http.MethodGet, mgmt+"/identities", posture.NewToken(), nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d %s", r.Status, r.Body)
	}
}

// TestClusterLoginSeesNewUsers: a user created through one node logs in
// through another at once: a login catches up with the log before it reads
// the credentials.
func TestClusterLoginSeesNewUsers(t *testing.T) {
	_, a, b := startTwoNodes(t)
	hash, err := api.HashPassword(t.Context(), "new-user-password")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		// The user as a node creates it, appended without waiting for any
		// projection; then at once a login on B.
		now, name := time.Now().UTC(), fmt.Sprintf("new-user-%d", i)
		id := posture.Identity{ID: posture.NewID(), Name: name, Type: posture.IdentityUser, RoleAttributes: []string{}, CreatedAt: now, UpdatedAt: now}
		for _, p := range []posture.Payload{
			posture.Created[posture.Identity]{Entity: id},
			posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: posture.NewID(), IdentityID: id.ID, Method: posture.MethodPassword,
				Username: name, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}},
		} {
			if _, err := a.elog.Append(t.Context(), posture.MustEvent(p, now)); err != nil {
				t.Fatal(err)
			}
		}
		r := b.do(t, http.MethodPost, api.ClientBase+"/authenticate?method=password", "", map[string]string{"username": name, "password": "new-user-password"})
		if r.Status != http.StatusOK {
			t.Fatalf("user %d, created elsewhere a moment ago: %d %s", i, r.Status, r.Body)
		}
	}
}

// TestClusterSurvivesNATSNodeLoss: 16 clients post 2,000 posture responses
// through two postured nodes; a third of the way in, the NATS server
// leading the stream is shut down. Appends retry on the remaining quorum
// with the same message id: every response answered 2xx is in the log
// exactly once, and both projections are byte-equal. No failure is tolerated:
// an append retries on the remaining quorum (same message id) for as long as
// the request lasts, which outlasts the election. The test fails when no
// server was shut down or when no request was sent after the shutdown (the
// fault was not injected, or too late to matter).
func TestClusterSurvivesNATSNodeLoss(t *testing.T) {
	nc, a, b := startTwoNodes(t)
	const clients, total = 16, 2000
	check, _, eps := postureSetup(t, a, clients)
	if err := b.store.WaitFor(t.Context(), a.lastSeq(t)); err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045"})

	results := make([]postResult, total)
	var next, done atomic.Int64
	killNow, killed, down := make(chan struct{}), make(chan string, 1), make(chan struct{})
	go func() {
		<-killNow
		// The stream leader if a node is connected to it (an election and
		// a reconnect at once), else the server node A is connected to.
		victim := nc.StreamLeader("POSTURED")
		connA, connB := a.elog.Conn().ConnectedServerName(), b.elog.Conn().ConnectedServerName()
		if victim == nil || (victim.Name() != connA && victim.Name() != connB) {
			victim = nc.Server(connA)
		}
		if victim == nil {
			killed <- ""
			return
		}
		leader := ""
		if victim.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, "POSTURED") {
			leader = ", the stream leader,"
		}
		victim.Shutdown()
		close(down)
		killed <- fmt.Sprintf("%s%s (A was connected to %s, B to %s)", victim.Name(), leader, connA, connB)
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for c := range clients {
		n := []*clusterNode{a, b}[c%2]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= total {
					return
				}
				sentAfter := false
				select {
				case <-down:
					sentAfter = true
				default:
				}
				r := post(n.http, n.srv.URL+clientAPI+"/posture-response", eps[c].token, body)
				r.sentAfterFault = sentAfter
				results[i] = r
				if done.Add(1) == total/3 {
					close(killNow)
				}
			}
		})
	}
	wg.Wait()
	victim := <-killed
	if victim == "" {
		t.Fatal("no NATS server was shut down: neither node was connected to a server of the cluster, the fault was not injected")
	}
	t.Logf("shut down %s a third of the way in; %d requests in %s", victim, total, time.Since(start).Round(time.Millisecond))

	ok, failed := checkExactlyOnce(t, results, postureByRequest(t, a.testNode))
	t.Logf("%d answered 2xx, %d not", ok, failed)
	after := 0
	for i, r := range results {
		if r.sentAfterFault {
			after++
		}
		if r.err != nil || r.status/100 != 2 {
			t.Errorf("request %d failed (sent after the shutdown: %v): %d %v", i, r.sentAfterFault, r.status, r.err)
		}
	}
	if after == 0 {
		t.Fatal("no request was sent after the shutdown: the fault came too late to be tested")
	}
	t.Logf("%d requests sent after the shutdown", after)
	if diff := cmp.Diff(a.dumpCaughtUp(t), b.dumpCaughtUp(t)); diff != "" {
		t.Fatalf("the projections of A and B differ (-A +B):\n%s", diff)
	}
}

// TestClusterFailoverKeepsAPISessions: 16 clients logged in through A post
// posture to A; a third of the way in, A dies. Each client moves to B with
// the same API session token and goes on; every response answered 2xx is in
// the log exactly once.
func TestClusterFailoverKeepsAPISessions(t *testing.T) {
	_, a, b := startTwoNodes(t)
	const clients, total = 16, 2000
	check, _, eps := postureSetup(t, a, clients)
	body, _ := json.Marshal(map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0.19045"})

	results := make([]postResult, 0, total)
	var mu sync.Mutex
	var next, done, movedOn atomic.Int64
	killNow := make(chan struct{})
	go func() {
		<-killNow
		a.kill()
	}()
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			n := a
			for {
				if next.Add(1) > total {
					return
				}
				for {
					r := post(n.http, n.srv.URL+clientAPI+"/posture-response", eps[c].token, body)
					mu.Lock()
					results = append(results, r)
					mu.Unlock()
					if r.err == nil && r.status/100 == 2 {
						break
					}
					if n == b {
						t.Errorf("client %d: B answered %d %v", c, r.status, r.err)
						return
					}
					n = b // A is gone: fail over, same token
					movedOn.Add(1)
				}
				if done.Add(1) == total/3 {
					close(killNow)
				}
			}
		})
	}
	wg.Wait()
	if got := movedOn.Load(); got != clients {
		t.Errorf("%d clients failed over, want %d", got, clients)
	}
	for _, ep := range eps {
		var cur api.APISessionView
		b.getJSON(t, clientAPI+"/current-api-session", ep.token, &cur)
		if cur.ID != ep.apiSessionID {
			t.Fatalf("API session on B: %s, want %s", cur.ID, ep.apiSessionID)
		}
	}
	ok, failed := checkExactlyOnce(t, results, postureByRequest(t, b.testNode))
	t.Logf("%d answered 2xx, %d failed while A died", ok, failed)
	if ok != total {
		t.Fatalf("%d responses answered 2xx, want %d", ok, total)
	}
}

// TestClusterDeadlineFiresOnce: an MFA check with a 2-second timeout, two
// nodes running their timer loops on one fake clock (nodes' clocks agree).
// When the clock passes the deadline, both timers tick: the deadline
// becomes one deadline.reached event; what B's timer appends for it is the
// same message and lands on the same sequence.
func TestClusterDeadlineFiresOnce(t *testing.T) {
	nc, pkiDir := natstest.Start(t, 3), t.TempDir()
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	onClock := func(c *serveCmd) { c.clock = clk }
	a, b := startClusterNode(t, nc, pkiDir, "node-a", onClock), startClusterNode(t, nc, pkiDir, "node-b", onClock)
	admin := a.adminToken(t)
	svc := a.create(t, admin, "services", map[string]any{"name": "timed"})
	mfa := a.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-2s", "timeoutSeconds": 2})
	a.create(t, admin, "service-policies", map[string]any{"name": "timed", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + mfa}})
	ep := a.endpoint(t, admin, "mfa-cluster")
	if _, err := a.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	start := a.lastSeq(t)
	if r := a.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
		t.Fatalf("session after MFA: %d %s", r.Status, r.Body)
	}
	if err := b.store.WaitFor(t.Context(), a.lastSeq(t)); err != nil {
		t.Fatal(err)
	}
	due, err := b.store.DueDeadlines(clk.Now().Add(time.Minute), 10)
	if err != nil || len(due) != 1 {
		t.Fatalf("deadlines pending on B: %+v %v", due, err)
	}

	clk.Advance(due[0].Deadline.Add(expiry.Delay).Sub(clk.Now()))
	for _, n := range []*clusterNode{a, b} {
		if _, err := n.deadlines.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	e := a.waitForEvent(t, start+1, posture.TypeDeadlineReached, 15*time.Second)
	if err := b.store.WaitFor(t.Context(), e.Seq); err != nil {
		t.Fatal(err)
	}
	// B's timer appends the same event (its id is derived from the
	// deadline): the stream answers with the first copy's sequence.
	if seq, err := b.writer.Log.Append(t.Context(), expiry.Event(due[0])); err != nil || seq != e.Seq {
		t.Fatalf("B's copy of the deadline: seq %d (want %d) %v", seq, e.Seq, err)
	}
	if ids := b.sessionIDs(t, ep.token); len(ids) != 0 {
		t.Fatalf("the session outlived its deadline on B: %v", ids)
	}
	var deadlines []posture.Event
	if err := b.elog.Read(t.Context(), start, 0, func(batch []posture.Event) error {
		for _, e := range batch {
			if e.Type == posture.TypeDeadlineReached {
				deadlines = append(deadlines, e)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(deadlines) != 1 {
		t.Fatalf("%d deadline events in the log, want 1: %+v", len(deadlines), deadlines)
	}
	if diff := cmp.Diff(a.dumpCaughtUp(t), b.dumpCaughtUp(t)); diff != "" {
		t.Fatalf("the projections of A and B differ (-A +B):\n%s", diff)
	}
}

// TestControllersOnASingleNode: a node on its embedded server lists itself,
// in the client API for any session and in the management API for admins,
// with the id it keeps in its data directory across restarts.
func TestControllersOnASingleNode(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.Name = "solo"
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	user := n.createUser(t, "plain-user", "user-password", false)
	var list []struct {
		ID           string `json:"id"`
		Name         string `json:"name"`
		IsOnline     bool   `json:"isOnline"`
		APIAddresses map[string][]struct {
			URL string `json:"url"`
		} `json:"apiAddresses"`
	}
	n.getJSON(t, clientAPI+"/controllers", user, &list)
	if len(list) != 1 || list[0].Name != "solo" || !list[0].IsOnline ||
		list[0].APIAddresses["edge-management"][0].URL != "https://127.0.0.1:1280"+api.ManagementBase {
		t.Fatalf("controllers: %+v", list)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/controllers", user, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("management controllers as a non-admin: %d", r.Status)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/controllers?filter=name%3D%22solo%22", admin, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), list[0].ID) {
		t.Fatalf("management controllers: %d %s", r.Status, r.Body)
	}
	id := list[0].ID
	n.srv.Close()
	n.Close()
	n = startTestNode(t, cfg)
	n.getJSON(t, clientAPI+"/controllers", n.adminToken(t), &list)
	if len(list) != 1 || list[0].ID != id {
		t.Fatalf("after a restart: %+v, want id %s", list, id)
	}
}
