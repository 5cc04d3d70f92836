package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog/natstest"
	"github.com/seed-0809debe/posture/webhooks"
)

// receiver is a webhook receiver over real TLS that verifies each delivery
// with the Standard Webhooks library, and can be taken down (503) and
// brought back.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	secret string
	down   bool
	got    []webhooks.CloudEvent // verified deliveries, in arrival order
	bad    []string              // deliveries that did not verify
	wake   chan struct{}         // closed and replaced on each delivery
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{wake: make(chan struct{})}
	r.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		wh, err := standardwebhooks.NewWebhook(r.secret)
		if err == nil {
			err = wh.Verify(body, req.Header)
		}
		var ce webhooks.CloudEvent
		if err == nil {
			err = json.Unmarshal(body, &ce)
		}
		if err != nil || ce.SpecVersion != "1.0" || req.Header.Get("webhook-id") != ce.ID {
			r.bad = append(r.bad, req.Header.Get("webhook-id")+": "+errString(err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.got = append(r.got, ce)
		close(r.wake)
		r.wake = make(chan struct{})
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func errString(err error) string {
	if err == nil {
		return "bad body"
	}
	return err.Error()
}

func (r *receiver) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}))
}

func (r *receiver) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// waitFor blocks until the receiver verified n deliveries of transitions
// (a barrier on the receiver, not a poll) and returns their ids in order.
func (r *receiver) waitFor(t *testing.T, n int, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		r.mu.Lock()
		var ids []string
		for _, ce := range r.got {
			if strings.HasPrefix(ce.Type, webhooks.TypePrefix) {
				ids = append(ids, ce.ID)
			}
		}
		wake, bad := r.wake, slices.Clone(r.bad)
		r.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("deliveries that did not verify: %v", bad)
		}
		if len(ids) >= n {
			return ids
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("%d of %d deliveries within %s", len(ids), n, within)
		}
	}
}

// webhookConfig is a node configuration with short webhook retries.
func webhookConfig(dir string) serveCmd {
	cfg := defaultTestConfig(dir)
	cfg.WebhookTimeout, cfg.WebhookBackoff, cfg.WebhookMaxBackoff, cfg.WebhookGiveUp = 2*time.Second, 100*time.Millisecond, 400*time.Millisecond, time.Hour
	return cfg
}

// streamOrder lists the IDs of the identity's transitions in stream order.
func (n *testNode) streamOrder(t *testing.T, identityID string) []string {
	t.Helper()
	var ids []string
	if err := n.trans.Read(t.Context(), 1, func(_ uint64, tr posture.Transition) error {
		if tr.IdentityID == identityID {
			ids = append(ids, tr.ID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestWebhooks: a webhook created over the API (its generated secret shown
// once) gets signed CloudEvents that verify; a test event is sent on
// demand; while the receiver is down the deliveries are retried with
// backoff and listed; postured restarts meanwhile; once the receiver is
// back it gets every missed transition, in order, none lost.
func TestWebhooks(t *testing.T) {
	dir := t.TempDir()
	cfg := webhookConfig(dir)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	rcv := newReceiver(t)

	// Validation: plain http needs allowInsecureHttp; kinds are known ones.
	for _, body := range []map[string]any{
		{"name": "plain", "url": "http://127.0.0.1:9/hook"},
		{"name": "kinds", "url": rcv.srv.URL, "kinds": []string{"policy-exploded"}},
		{"name": "secret", "url": rcv.srv.URL, "secret": "not-a-secret"},
		// Credentials in a URL would be kept and shown in clear.
		{"name": "creds", "url": strings.Replace(rcv.srv.URL, "https://", "https://hookuser:HookPassw0rdXYZ@", 1)},
		{"name": "creds, not a URL", "url": "https://hookuser:HookPassw0rdXYZ PW@example.com/"},
	} {
		if r := n.do(t, http.MethodPost, mgmt+"/webhooks", admin, body); r.Status != http.StatusBadRequest || strings.Contains(string(r.Body), "HookPassw0rdXYZ") {
			t.Fatalf("%v: %d %s", body, r.Status, r.Body)
		}
	}
	r := n.do(t, http.MethodPost, mgmt+"/webhooks", admin, map[string]any{"name": "soc", "url": rcv.srv.URL + "/hook", "caPem": rcv.caPEM(),
		"kinds": []string{posture.TransitionPolicyPassing, posture.TransitionPolicyFailing}})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var created struct{ ID, Secret string }
	if err := json.Unmarshal(data, &created); err != nil || !strings.HasPrefix(created.Secret, "whsec_") {
		t.Fatalf("created: %s", data)
	}
	rcv.mu.Lock()
	rcv.secret = created.Secret
	rcv.mu.Unlock()
	detail := n.detail(t, admin, "webhooks", created.ID)
	if _, shown := detail["secret"]; shown || detail["hasSecret"] != true || detail["enabled"] != true {
		t.Fatalf("detail shows the secret or lacks fields: %v", detail)
	}
	raw, err := n.store.RawEntity(posture.KindWebhook, created.ID)
	if err != nil || strings.Contains(string(raw), strings.TrimPrefix(created.Secret, "whsec_")) {
		t.Fatalf("the projection holds the secret in clear: %s", raw)
	}

	// The test endpoint.
	var att posture.WebhookAttempted
	n.getJSONPost(t, mgmt+"/webhooks/"+created.ID+"/test", admin, &att)
	if att.Outcome != posture.DeliveryDelivered || att.Status != http.StatusNoContent {
		t.Fatalf("test event: %+v", att)
	}

	// Transitions: an OS policy that an endpoint passes and fails in turn.
	linux := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os", "operatingSystems": linux})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + osCheck}})
	ep := n.endpoint(t, admin, "hooked-laptop", "laptops")
	report := func(n *testNode, version string) {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Linux", "version": version})
		if r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	report(n, "6.1.0")
	report(n, "4.0.0")
	rcv.waitFor(t, 2, 20*time.Second)

	// The receiver goes down; three more transitions are retried.
	rcv.setDown(true)
	report(n, "6.2.0")
	report(n, "4.1.0")
	report(n, "6.3.0")
	n.waitDelivery(t, admin, created.ID, posture.DeliveryRetrying, 2)

	// postured restarts while the receiver is still down.
	n.srv.Close()
	n.Close()
	n = startTestNode(t, cfg)
	admin = n.adminToken(t)
	rcv.setDown(false)

	got := rcv.waitFor(t, 5, 30*time.Second)
	want := n.streamOrder(t, ep.id)
	if len(want) != 5 {
		t.Fatalf("%d transitions in the stream, want 5", len(want))
	}
	if !slices.Equal(slices.Compact(got), want) {
		t.Fatalf("deliveries out of order or missing:\n got %v\nwant %v", got, want)
	}
	n.waitDelivery(t, admin, created.ID, posture.DeliveryDelivered, 6) // the test event and five transitions

	// The webhook's consumer is deleted on the server: delivery goes on
	// (where it was: webhooks' TestConsumerNamesAreKeyed; the server may
	// also restore the deleted consumer's state when it is made again at
	// once, which delivers again what that state had not acknowledged).
	name := webhooks.ConsumerName(n.secrets.DerivedKey(webhookNames), created.ID)
	if err := n.trans.Stream().DeleteConsumer(t.Context(), name); err != nil {
		t.Fatal(err)
	}
	got = rcv.waitFor(t, 0, 0) // every delivery so far
	report(n, "4.2.0")
	for k := len(got) + 1; len(uniqueInOrder(got)) < len(want)+1; k = len(got) + 1 {
		got = rcv.waitFor(t, k, 30*time.Second)
	}
	if want = n.streamOrder(t, ep.id); !slices.Equal(uniqueInOrder(got), want) {
		t.Fatalf("deliveries after the consumer was lost:\n got %v\nwant %v", got, want)
	}
}

// uniqueInOrder is ids without repeats, in the order they first came.
func uniqueInOrder(ids []string) []string {
	var out []string
	for _, id := range ids {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// getJSONPost POSTs without a body and decodes the data of a 200.
func (n *testNode) getJSONPost(t *testing.T, path, tok string, v any) {
	t.Helper()
	r := n.do(t, http.MethodPost, path, tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// waitDelivery waits until the webhook's deliveries list at least count
// attempts with the outcome. Attempts are events appended by the delivery
// loop: each read waits for the projection to catch up with the log.
func (n *testNode) waitDelivery(t *testing.T, admin, webhookID, outcome string, count int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		var ds []struct {
			Outcome string `json:"outcome"`
			Status  int    `json:"status"`
			Error   string `json:"error"`
		}
		if err := n.store.WaitFor(ctx, n.lastSeq(t)); err != nil {
			t.Fatal(err)
		}
		n.getJSON(t, mgmt+"/webhooks/"+webhookID+"/deliveries?limit=500", admin, &ds)
		c := 0
		for _, d := range ds {
			if d.Outcome == outcome {
				c++
			}
		}
		if c >= count {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d %s deliveries, want %d: %+v", c, outcome, count, ds)
		case <-time.After(50 * time.Millisecond): // the delivery loop has no barrier to wait on
		}
	}
}

// TestWebhooksTwoNodes: two nodes share each webhook's durable consumer.
// While the receiver is down, the node that created the webhook and took
// the writes is killed; the other node delivers every missed transition,
// in order, once the receiver is back.
func TestWebhooksTwoNodes(t *testing.T) {
	nc := natstest.Start(t, 3)
	pkiDir := t.TempDir()
	short := func(c *serveCmd) {
		w := webhookConfig(c.DataDir)
		c.WebhookTimeout, c.WebhookBackoff, c.WebhookMaxBackoff, c.WebhookGiveUp = w.WebhookTimeout, w.WebhookBackoff, w.WebhookMaxBackoff, w.WebhookGiveUp
	}
	a := startClusterNodeWith(t, nc, pkiDir, "node-a", natsFlags{}, short)
	b := startClusterNodeWith(t, nc, pkiDir, "node-b", natsFlags{}, short)
	admin := a.adminToken(t)
	rcv := newReceiver(t)
	r := a.do(t, http.MethodPost, mgmt+"/webhooks", admin, map[string]any{"name": "soc", "url": rcv.srv.URL, "caPem": rcv.caPEM()})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var created struct{ ID, Secret string }
	if err := json.Unmarshal(data, &created); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	rcv.secret = created.Secret
	rcv.mu.Unlock()

	linux := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	osCheck := a.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os", "operatingSystems": linux})
	svc := a.create(t, admin, "services", map[string]any{"name": "crm"})
	a.create(t, admin, "service-policies", map[string]any{"name": "crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + osCheck}})
	ep := a.endpoint(t, admin, "two-node-laptop", "laptops")
	rcv.setDown(true)
	for _, v := range []string{"6.1.0", "4.0.0", "6.2.0", "4.1.0"} {
		if r := a.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Linux", "version": v}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	a.waitDelivery(t, admin, created.ID, posture.DeliveryRetrying, 1)
	a.kill()
	rcv.setDown(false)
	got := rcv.waitFor(t, 4, 60*time.Second)
	want := b.streamOrder(t, ep.id)
	if len(want) != 4 || !slices.Equal(slices.Compact(got), want) {
		t.Fatalf("deliveries:\n got %v\nwant %v", got, want)
	}
}

// TestWebhookDeny: a webhook whose receiver is in a --webhook-deny network
// is never connected to. Written as an address, it is refused when it is
// created; written as a name, its test delivery fails, saying why. The same
// receiver is reached once the network is no longer denied.
func TestWebhookDeny(t *testing.T) {
	rcv := newReceiver(t)
	port := rcv.srv.URL[strings.LastIndex(rcv.srv.URL, ":")+1:]
	for _, c := range []struct {
		deny      []string
		url       string
		delivered bool
	}{
		{[]string{"10.0.0.0/8", "127.0.0.0/8", "::1/128"}, "https://localhost:" + port + "/hook", false},
		{[]string{"10.0.0.0/8"}, rcv.srv.URL + "/hook", true},
	} {
		cfg := webhookConfig(t.TempDir())
		cfg.WebhookDeny = c.deny
		n := startTestNode(t, cfg)
		admin := n.adminToken(t)
		if !c.delivered {
			r := n.do(t, http.MethodPost, mgmt+"/webhooks", admin, map[string]any{"name": "literal", "url": rcv.srv.URL + "/hook", "caPem": rcv.caPEM()})
			expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "url")
			if !strings.Contains(string(r.Body), "127.0.0.1 is in 127.0.0.0/8, a network webhooks may not reach (--webhook-deny)") {
				t.Fatalf("a denied address at creation: %s", r.Body)
			}
		}
		r := n.do(t, http.MethodPost, mgmt+"/webhooks", admin, map[string]any{"name": "local", "url": c.url, "caPem": rcv.caPEM()})
		data, _ := r.envelope(t)
		var created struct{ ID, Secret string }
		if err := json.Unmarshal(data, &created); err != nil || r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		rcv.mu.Lock()
		rcv.secret = created.Secret
		rcv.mu.Unlock()
		var att posture.WebhookAttempted
		n.getJSONPost(t, mgmt+"/webhooks/"+created.ID+"/test", admin, &att)
		if delivered := att.Outcome == posture.DeliveryDelivered; delivered != c.delivered {
			t.Fatalf("--webhook-deny %v: %+v, want delivered %v", c.deny, att, c.delivered)
		}
		if !c.delivered && !strings.Contains(att.Error, "a network webhooks may not reach (--webhook-deny)") {
			t.Fatalf("a denied delivery's error: %q", att.Error)
		}
		rcv.mu.Lock()
		got := len(rcv.got) + len(rcv.bad)
		rcv.mu.Unlock()
		if want := map[bool]int{false: 0, true: 1}[c.delivered]; got != want {
			t.Fatalf("--webhook-deny %v: the receiver got %d deliveries, want %d", c.deny, got, want)
		}
	}
}

// TestWebhookDenyLater: a webhook whose address a later --webhook-deny
// covers can still be changed (its tags, say) while its URL stays; a new
// URL in the denied network is refused.
func TestWebhookDenyLater(t *testing.T) {
	cfg := webhookConfig(t.TempDir())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	id := n.create(t, admin, "webhooks", map[string]any{"name": "private", "url": "https://10.1.2.3/hook"})
	n.srv.Close()
	n.Close()
	cfg.WebhookDeny = []string{"10.0.0.0/8"}
	n = startTestNode(t, cfg)
	admin = n.adminToken(t)
	if r := n.do(t, http.MethodPatch, mgmt+"/webhooks/"+id, admin, map[string]any{"tags": map[string]any{"owner": "it"}}); r.Status != http.StatusOK {
		t.Fatalf("a change of a webhook whose URL stays: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/webhooks/"+id, admin, map[string]any{"url": "https://10.1.2.4/hook"}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "url")
}
