package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestOversizedEvents sends requests under the 1 MiB body limit whose events
// would not be: JSON escaping makes an event bigger than its request ("<"
// is written as 6 bytes). Fields that have no business being large are
// refused with a validation error naming the field; whatever else would
// make an event larger than the log accepts is 413, never a 500.
func TestOversizedEvents(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.WriteBudgetKiB = 16 // serve's default
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "laptop-1", "laptops")
	big := func(size int) string { return strings.Repeat("<", size) }
	post := func(path, token string, body any) response {
		t.Helper()
		return n.do(t, http.MethodPost, path, token, literal(t, body))
	}

	expect := func(what string, r response, status int, code, field string) {
		t.Helper()
		_, e := r.envelope(t)
		if r.Status != status || e.Code != code {
			t.Fatalf("%s: %d %s, want %d %s", what, r.Status, truncate(r.Body), status, code)
		}
		if field != "" {
			cause, _ := e.Cause.(map[string]any)
			if cause["field"] != field {
				t.Fatalf("%s: cause %v, want the field %q", what, cause, field)
			}
		}
		if e.Message == "" {
			t.Fatalf("%s: no message", what)
		}
		t.Logf("%s: %d %s %s %v", what, r.Status, e.Code, e.Message, e.Cause)
	}

	// An identity with large tags, and with long role attributes.
	r := post(api.ManagementBase+"/identities", admin,
		map[string]any{"name": "tagged", "type": "Device", "tags": map[string]any{"notes": big(300_000)}})
	expect("identity with a 300 KB tag", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "tags.notes")
	many := map[string]any{}
	for i := range 400 {
		many[fmt.Sprintf("t%03d", i)] = big(2000)
	}
	r = post(api.ManagementBase+"/identities", admin,
		map[string]any{"name": "tagged", "type": "Device", "tags": many})
	expect("identity with 400 tags of 2,000 characters", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "tags")
	r = post(api.ManagementBase+"/identities", admin,
		map[string]any{"name": "attributed", "type": "Device", "roleAttributes": []string{"ok", big(200_000)}})
	expect("identity with a 200 KB role attribute", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "roleAttributes[1]")

	// A login with an 800 KB sdkInfo, and one with a large envInfo.
	r = post(clientAPI+"/authenticate?method=password", "", map[string]any{
		"username": "laptop-1", "password": "laptop-1-password", "sdkInfo": map[string]any{"type": "go", "appVersion": big(800_000)}})
	expect("login with an 800 KB sdkInfo", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "sdkInfo.appVersion")
	r = post(clientAPI+"/authenticate?method=password", "", map[string]any{
		"username": "laptop-1", "password": "laptop-1-password", "envInfo": map[string]any{"hostname": big(300_000)}})
	expect("login with a 300 KB envInfo", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "envInfo.hostname")

	// A bulk posture response of 3,813 entries with long ids.
	var bulk []map[string]any
	for i := range 3813 {
		bulk = append(bulk, map[string]any{"id": fmt.Sprintf("%0200d", i), "typeId": "DOMAIN", "domain": "corp"})
	}
	r = post(clientAPI+"/posture-response-bulk", ep.token, bulk)
	expect("bulk of 3,813 posture responses", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "[1000]")
	r = post(clientAPI+"/posture-response", ep.token, map[string]any{"id": big(100_000), "typeId": "DOMAIN", "domain": "corp"})
	expect("posture response with a 100 KB id", r, http.StatusBadRequest, posture.CodeCouldNotValidate, "id")

	// Within every field's bound, but too large as an event once escaped:
	// 413, with a message that says so.
	bulk = bulk[:0]
	for i := range 400 {
		bulk = append(bulk, map[string]any{"id": fmt.Sprint(i), "typeId": "PROCESS", "path": big(2000), "isRunning": true})
	}
	r = post(clientAPI+"/posture-response-bulk", ep.token, bulk)
	expect("bulk whose event exceeds the log's limit", r, http.StatusRequestEntityTooLarge, posture.CodeRequestEntityTooLarge, "")
	if _, e := r.envelope(t); !strings.Contains(e.Message, "event") {
		t.Fatalf("413 message %q does not say the event is too large", e.Message)
	}
	// It kept nothing, so it cost the identity's budget only its body,
	// not the whole burst its event would have: the same request is 413
	// again, not 429.
	r = post(clientAPI+"/posture-response-bulk", ep.token, bulk)
	expect("the same bulk again", r, http.StatusRequestEntityTooLarge, posture.CodeRequestEntityTooLarge, "")
	// But it is not free: past the burst's bodies, 429.
	r = post(clientAPI+"/posture-response-bulk", ep.token, bulk)
	expect("the same bulk a third time", r, http.StatusTooManyRequests, posture.CodeTooManyRequests, "")

	// The node still works, and the same requests within bounds pass (an
	// identity's budget refills: the next check is on another identity).
	ep = n.endpoint(t, admin, "laptop-2", "laptops")
	r = post(clientAPI+"/posture-response", ep.token, map[string]any{"id": "x", "typeId": "DOMAIN", "domain": "corp"})
	if r.Status != http.StatusCreated {
		t.Fatalf("posture after the refusals: %d %s", r.Status, r.Body)
	}
	n.create(t, admin, "identities", map[string]any{"name": "tagged", "type": "Device", "tags": map[string]any{"notes": big(1000)}})
}

// literal is v as JSON with "<" written as it is (json.Marshal would
// escape it to six bytes, as the event encoder does).
func literal(t testing.TB, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if b.Len() > api.MaxBody {
		t.Fatalf("the request body is %d bytes, over the body limit", b.Len())
	}
	return b.String()
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
