package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

const mgmt = api.ManagementBase

// create posts a body and returns the new id, failing the test unless 201.
func (n *testNode) create(t testing.TB, token, collection string, body any) string {
	t.Helper()
	r := n.do(t, http.MethodPost, mgmt+"/"+collection, token, body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create %s: %d %s", collection, r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var c api.Created
	if err := json.Unmarshal(data, &c); err != nil || c.ID == "" || c.Links["self"].Href != "./"+collection+"/"+c.ID {
		t.Fatalf("create %s: %s", collection, data)
	}
	return c.ID
}

// detail reads an entity as a map.
func (n *testNode) detail(t testing.TB, token, collection, id string) map[string]any {
	t.Helper()
	r := n.do(t, http.MethodGet, mgmt+"/"+collection+"/"+id, token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("get %s/%s: %d %s", collection, id, r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// listIDs lists a collection with a filter and returns the ids and total.
func (n *testNode) listIDs(t testing.TB, token, path, filter string) ([]string, int) {
	t.Helper()
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	r := n.do(t, http.MethodGet, mgmt+path+sep+"limit=500&filter="+url.QueryEscape(filter), token, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("list %s: %d %s", path, r.Status, r.Body)
	}
	var env struct {
		Data []map[string]any `json:"data"`
		Meta api.Meta         `json:"meta"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(env.Data))
	for i, d := range env.Data {
		ids[i], _ = d["id"].(string)
	}
	return ids, int(env.Meta.Pagination.TotalCount)
}

// expectError checks status, code and the field named in cause.
func expectError(t testing.TB, r response, status int, code, field string) {
	t.Helper()
	_, e := r.envelope(t)
	if r.Status != status || e.Code != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
	if field != "" {
		cause, _ := json.Marshal(e.Cause)
		if !strings.Contains(string(cause), `"field":"`+field+`"`) {
			t.Fatalf("cause %s does not name field %q", cause, field)
		}
	}
}

const (
	hashA = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	fpA   = "0123456789abcdef0123456789abcdef01234567"
)

// TestPostureCheckLifecycle creates, reads, lists with a filter, updates,
// patches and deletes a posture check of every type over HTTPS.
func TestPostureCheckLifecycle(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)
	cases := []struct {
		typ    string
		create map[string]any
		check  func(t *testing.T, m map[string]any)
		put    map[string]any
		patch  map[string]any
		after  func(t *testing.T, m map[string]any)
	}{
		{
			typ: "OS",
			create: map[string]any{"typeId": "OS", "name": "os-check", "attributes": []string{"os"},
				"operatingSystems": []any{map[string]any{"type": "WINDOWS", "versions": []string{">=10.0.19041 <11.0.0"}}, map[string]any{"type": "macos"}}},
			check: func(t *testing.T, m map[string]any) {
				oses := m["operatingSystems"].([]any)
				if oses[0].(map[string]any)["type"] != "Windows" || oses[1].(map[string]any)["type"] != "macOS" {
					t.Fatalf("OS types not canonical: %v", oses)
				}
			},
			put:   map[string]any{"typeId": "OS", "name": "os-check-2", "operatingSystems": []any{map[string]any{"type": "Linux", "versions": []string{"5.x"}}}},
			patch: map[string]any{"roleAttributes": []string{"patched"}},
			after: func(t *testing.T, m map[string]any) {
				if m["name"] != "os-check-2" || m["operatingSystems"].([]any)[0].(map[string]any)["type"] != "Linux" {
					t.Fatalf("PUT not applied: %v", m)
				}
			},
		},
		{
			typ:    "MAC",
			create: map[string]any{"typeId": "MAC", "name": "mac-check", "macAddresses": []string{"AA:BB:CC:DD:EE:FF", "a1-b2-c3-d4-e5-f6", "001122334455"}},
			check: func(t *testing.T, m map[string]any) {
				if len(m["macAddresses"].([]any)) != 3 {
					t.Fatalf("macAddresses: %v", m)
				}
			},
			put:   map[string]any{"typeId": "MAC", "name": "mac-check-2", "macAddresses": []string{"00:00:00:00:00:01"}},
			patch: map[string]any{"macAddresses": []string{"00:00:00:00:00:02"}},
			after: func(t *testing.T, m map[string]any) {
				if m["macAddresses"].([]any)[0] != "00:00:00:00:00:02" {
					t.Fatalf("patch not applied: %v", m)
				}
			},
		},
		{
			typ:    "DOMAIN",
			create: map[string]any{"typeId": "DOMAIN", "name": "domain-check", "macAddresses": []string{"corp.example"}},
			check: func(t *testing.T, m map[string]any) {
				if m["domains"].([]any)[0] != "corp.example" {
					t.Fatalf("the seed's macAddresses spelling was not taken as domains: %v", m)
				}
			},
			put:   map[string]any{"typeId": "DOMAIN", "name": "domain-check-2", "domains": []string{"a.example"}},
			patch: map[string]any{"domains": []string{"b.example", "c.example"}},
			after: func(t *testing.T, m map[string]any) {
				if len(m["domains"].([]any)) != 2 {
					t.Fatalf("patch not applied: %v", m)
				}
			},
		},
		{
			typ:    "MFA",
			create: map[string]any{"typeId": "MFA", "timeoutSeconds": 0, "promptOnWake": true},
			check: func(t *testing.T, m map[string]any) {
				if !strings.HasPrefix(m["name"].(string), "MFA check ") || m["timeoutSeconds"].(float64) != -1 || m["promptOnWake"] != true {
					t.Fatalf("MFA defaults: %v", m)
				}
			},
			put:   map[string]any{"typeId": "MFA", "name": "mfa-2", "timeoutSeconds": 300, "promptOnUnlock": true},
			patch: map[string]any{"timeoutSeconds": -1},
			after: func(t *testing.T, m map[string]any) {
				if m["name"] != "mfa-2" || m["promptOnUnlock"] != true || m["promptOnWake"] != false {
					t.Fatalf("PUT not applied: %v", m)
				}
			},
		},
		{
			typ: "PROCESS",
			create: map[string]any{"typeId": "PROCESS", "name": "process-check",
				"process": map[string]any{"osType": "Windows", "path": `C:\bin\av.exe`, "hashes": []string{strings.ToUpper(hashA)}, "signerFingerprint": fpA}},
			check: func(t *testing.T, m map[string]any) {
				p := m["process"].(map[string]any)
				if p["hashes"].([]any)[0] != hashA || p["signerFingerprint"] != fpA {
					t.Fatalf("process: %v", p)
				}
			},
			put:   map[string]any{"typeId": "PROCESS", "name": "process-check-2", "process": map[string]any{"os": "LINUX", "path": "/usr/bin/av"}},
			patch: map[string]any{"tags": map[string]any{"owner": "secops", "critical": true, "note": nil}},
			after: func(t *testing.T, m map[string]any) {
				if m["process"].(map[string]any)["osType"] != "Linux" || m["tags"].(map[string]any)["owner"] != "secops" {
					t.Fatalf("update not applied: %v", m)
				}
			},
		},
		{
			typ: "PROCESS_MULTI",
			create: map[string]any{"typeId": "PROCESS_MULTI", "name": "multi-check", "semantic": "OneOf",
				"processes": []any{map[string]any{"os": "WINDOWS", "path": `C:\a.exe`, "hashes": []string{hashA}, "signerFingerprints": []string{fpA}}, map[string]any{"osType": "Linux", "path": "/b"}}},
			check: func(t *testing.T, m map[string]any) {
				if m["semantic"] != "AnyOf" || len(m["processes"].([]any)) != 2 {
					t.Fatalf("multi: %v", m)
				}
			},
			put:   map[string]any{"typeId": "PROCESS_MULTI", "name": "multi-check-2", "semantic": "AllOf", "processes": []any{map[string]any{"osType": "macOS", "path": "/c"}}},
			patch: map[string]any{"semantic": "AnyOf"},
			after: func(t *testing.T, m map[string]any) {
				if m["semantic"] != "AnyOf" || m["name"] != "multi-check-2" {
					t.Fatalf("update not applied: %v", m)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			id := n.create(t, tok, "posture-checks", c.create)
			m := n.detail(t, tok, "posture-checks", id)
			if m["typeId"] != c.typ || m["id"] != id || m["createdAt"] == nil || m["_links"] == nil {
				t.Fatalf("detail: %v", m)
			}
			c.check(t, m)
			ids, total := n.listIDs(t, tok, "/posture-checks", fmt.Sprintf(`typeId = "%s" and id = "%s"`, c.typ, id))
			if total != 1 || ids[0] != id {
				t.Fatalf("filtered list: %v (%d)", ids, total)
			}
			if r := n.do(t, http.MethodPut, mgmt+"/posture-checks/"+id, tok, c.put); r.Status != http.StatusOK {
				t.Fatalf("put: %d %s", r.Status, r.Body)
			}
			if r := n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+id, tok, c.patch); r.Status != http.StatusOK {
				t.Fatalf("patch: %d %s", r.Status, r.Body)
			}
			c.after(t, n.detail(t, tok, "posture-checks", id))
			if r := n.do(t, http.MethodDelete, mgmt+"/posture-checks/"+id, tok, nil); r.Status != http.StatusOK {
				t.Fatalf("delete: %d %s", r.Status, r.Body)
			}
			expectError(t, n.do(t, http.MethodGet, mgmt+"/posture-checks/"+id, tok, nil), 404, posture.CodeNotFound, "")
			expectError(t, n.do(t, http.MethodDelete, mgmt+"/posture-checks/"+id, tok, nil), 404, posture.CodeNotFound, "")
		})
	}
}

// TestPatchWithNullLists: a patch as OpenZiti's generated clients send it,
// with null for the check's list it does not set, changes what it sets and
// keeps the list (the check cannot be without it).
func TestPatchWithNullLists(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)
	for _, c := range []struct {
		create map[string]any
		list   string
	}{
		{map[string]any{"typeId": "OS", "name": "os", "operatingSystems": []any{map[string]any{"type": "Linux"}}}, "operatingSystems"},
		{map[string]any{"typeId": "MAC", "name": "mac", "macAddresses": []string{"00:00:00:00:00:01"}}, "macAddresses"},
		{map[string]any{"typeId": "DOMAIN", "name": "domain", "domains": []string{"corp.example"}}, "domains"},
		{map[string]any{"typeId": "PROCESS", "name": "process", "process": map[string]any{"osType": "Linux", "path": "/usr/bin/av"}}, "process"},
		{map[string]any{"typeId": "PROCESS_MULTI", "name": "multi", "semantic": "AllOf", "processes": []any{map[string]any{"osType": "Linux", "path": "/b"}}}, "processes"},
	} {
		id := n.create(t, tok, "posture-checks", c.create)
		before := n.detail(t, tok, "posture-checks", id)[c.list]
		patch := map[string]any{"typeId": c.create["typeId"], c.list: nil, "tags": map[string]any{"owner": "secops"}}
		if r := n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+id, tok, patch); r.Status != http.StatusOK {
			t.Fatalf("%s: a patch with %s null: %d %s", c.create["typeId"], c.list, r.Status, r.Body)
		}
		after := n.detail(t, tok, "posture-checks", id)
		if !cmp.Equal(after[c.list], before) || after["tags"].(map[string]any)["owner"] != "secops" {
			t.Fatalf("%s after the patch: %v, want %s %v kept", c.create["typeId"], after, c.list, before)
		}
	}
}

// TestPostureCheckValidation proves each validation rule answers 400 with
// the offending field and changes nothing.
func TestPostureCheckValidation(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)
	n.create(t, tok, "posture-checks", map[string]any{"typeId": "MAC", "name": "taken", "macAddresses": []string{"001122334455"}})
	win := func(extra map[string]any) map[string]any {
		p := map[string]any{"osType": "Windows", "path": `C:\x.exe`}
		for k, v := range extra {
			p[k] = v
		}
		return map[string]any{"typeId": "PROCESS", "name": "p", "process": p}
	}
	cases := []struct {
		name  string
		body  any
		code  string
		field string
	}{
		{"missing typeId", map[string]any{"name": "x"}, posture.CodeCouldNotValidate, "typeId"},
		{"unknown typeId", map[string]any{"typeId": "FIREWALL", "name": "x"}, posture.CodeCouldNotValidate, "typeId"},
		{"missing name", map[string]any{"typeId": "MAC", "macAddresses": []string{"001122334455"}}, posture.CodeCouldNotValidate, "name"},
		{"blank name", map[string]any{"typeId": "MAC", "name": "  ", "macAddresses": []string{"001122334455"}}, posture.CodeCouldNotValidate, "name"},
		{"duplicate name", map[string]any{"typeId": "MAC", "name": "taken", "macAddresses": []string{"001122334455"}}, posture.CodeCouldNotValidate, "name"},
		{"bad attribute", map[string]any{"typeId": "MAC", "name": "x", "roleAttributes": []string{"#a"}, "macAddresses": []string{"001122334455"}}, posture.CodeCouldNotValidate, "roleAttributes"},
		{"bad tag value", map[string]any{"typeId": "MAC", "name": "x", "tags": map[string]any{"n": 1}, "macAddresses": []string{"001122334455"}}, posture.CodeCouldNotValidate, "tags.n"},
		{"no operating systems", map[string]any{"typeId": "OS", "name": "x"}, posture.CodeCouldNotValidate, "operatingSystems"},
		{"unknown OS type", map[string]any{"typeId": "OS", "name": "x", "operatingSystems": []any{map[string]any{"type": "BeOS"}}}, posture.CodeCouldNotValidate, "operatingSystems[0].type"},
		{"bad semver range", map[string]any{"typeId": "OS", "name": "x", "operatingSystems": []any{map[string]any{"type": "Linux", "versions": []string{">=1.0", "not-a-version"}}}}, posture.CodeCouldNotValidate, "operatingSystems[0].versions[1]"},
		{"no MAC addresses", map[string]any{"typeId": "MAC", "name": "x"}, posture.CodeCouldNotValidate, "macAddresses"},
		{"bad MAC address", map[string]any{"typeId": "MAC", "name": "x", "macAddresses": []string{"00:11:22:33:44"}}, posture.CodeCouldNotValidate, "macAddresses[0]"},
		{"non-hex MAC address", map[string]any{"typeId": "MAC", "name": "x", "macAddresses": []string{"00:11:22:33:44:GG"}}, posture.CodeCouldNotValidate, "macAddresses[0]"},
		{"no domains", map[string]any{"typeId": "DOMAIN", "name": "x"}, posture.CodeCouldNotValidate, "domains"},
		{"blank domain", map[string]any{"typeId": "DOMAIN", "name": "x", "domains": []string{""}}, posture.CodeCouldNotValidate, "domains[0]"},
		{"no process", map[string]any{"typeId": "PROCESS", "name": "x"}, posture.CodeCouldNotValidate, "process"},
		{"process without path", win(map[string]any{"path": ""}), posture.CodeCouldNotValidate, "process.path"},
		{"process path with a bidirectional override", win(map[string]any{"path": "C:\\fdp\u202e.exe"}), posture.CodeCouldNotValidate, "process.path"},
		{"multi process path with a line break", map[string]any{"typeId": "PROCESS_MULTI", "name": "x", "semantic": "AllOf",
			"processes": []any{map[string]any{"osType": "Linux", "path": "/a\nb"}}}, posture.CodeCouldNotValidate, "processes[0].path"},
		{"process bad OS", win(map[string]any{"osType": "Plan9"}), posture.CodeCouldNotValidate, "process.osType"},
		{"short hash", win(map[string]any{"hashes": []string{hashA[:63]}}), posture.CodeCouldNotValidate, "process.hashes[0]"},
		{"long hash", win(map[string]any{"hashes": []string{hashA + "0"}}), posture.CodeCouldNotValidate, "process.hashes[0]"},
		{"non-hex hash", win(map[string]any{"hashes": []string{"z" + hashA[1:]}}), posture.CodeCouldNotValidate, "process.hashes[0]"},
		{"bad fingerprint", win(map[string]any{"signerFingerprint": fpA[:39]}), posture.CodeCouldNotValidate, "process.signerFingerprint"},
		{"multi without semantic", map[string]any{"typeId": "PROCESS_MULTI", "name": "x", "processes": []any{map[string]any{"osType": "Linux", "path": "/a"}}}, posture.CodeCouldNotValidate, "semantic"},
		{"multi bad semantic", map[string]any{"typeId": "PROCESS_MULTI", "name": "x", "semantic": "NoneOf", "processes": []any{map[string]any{"osType": "Linux", "path": "/a"}}}, posture.CodeCouldNotValidate, "semantic"},
		{"multi without processes", map[string]any{"typeId": "PROCESS_MULTI", "name": "x", "semantic": "AllOf"}, posture.CodeCouldNotValidate, "processes"},
		{"multi bad hash", map[string]any{"typeId": "PROCESS_MULTI", "name": "x", "semantic": "AllOf", "processes": []any{map[string]any{"osType": "Linux", "path": "/a", "hashes": []string{"abc"}}}}, posture.CodeCouldNotValidate, "processes[0].hashes[0]"},
		{"not JSON", "{", posture.CodeCouldNotParseBody, ""},
		{"not an object", "[1,2]", posture.CodeCouldNotParseBody, ""},
		{"wrong field type", `{"typeId":"MFA","timeoutSeconds":"soon"}`, posture.CodeCouldNotParseBody, ""},
	}
	lastBefore, _ := n.elog.LastSeq(t.Context())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, n.do(t, http.MethodPost, mgmt+"/posture-checks", tok, c.body), 400, c.code, c.field)
		})
	}
	if last, _ := n.elog.LastSeq(t.Context()); last != lastBefore {
		t.Fatalf("rejected requests appended %d events", last-lastBefore)
	}
	// An update may not change the type, and validates like a create.
	id := n.create(t, tok, "posture-checks", map[string]any{"typeId": "DOMAIN", "name": "d", "domains": []string{"a"}})
	expectError(t, n.do(t, http.MethodPut, mgmt+"/posture-checks/"+id, tok, map[string]any{"typeId": "MAC", "name": "d", "macAddresses": []string{"001122334455"}}), 400, posture.CodeCouldNotValidate, "typeId")
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+id, tok, map[string]any{"name": "taken"}), 400, posture.CodeCouldNotValidate, "name")
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+id, tok, map[string]any{"domains": []string{}}), 400, posture.CodeCouldNotValidate, "domains")
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/posture-checks/nope", tok, map[string]any{"name": "x"}), 404, posture.CodeNotFound, "")
	// Lists: a bad filter and bad paging.
	expectError(t, n.do(t, http.MethodGet, mgmt+"/posture-checks?filter="+url.QueryEscape(`name = `), tok, nil), 400, posture.CodeInvalidFilter, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/posture-checks?limit=x", tok, nil), 400, posture.CodeInvalidPagination, "")
	// Types, including MFA.
	types, total := n.listIDs(t, tok, "/posture-check-types", "")
	if total != 6 || !strings.Contains(strings.Join(types, ","), "MFA") {
		t.Fatalf("posture-check-types: %v", types)
	}
}

// TestConcurrentCreatesOfOneName races creates of the same name: exactly
// one wins, the others are told the name is taken.
func TestConcurrentCreatesOfOneName(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)
	for _, collection := range []string{"posture-checks", "identities", "services"} {
		var wg sync.WaitGroup
		statuses := make([]int, 8)
		for i := range statuses {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := map[string]any{"name": "same-" + collection, "typeId": "DOMAIN", "domains": []string{"x"}, "type": "Device"}
				statuses[i] = n.do(t, http.MethodPost, mgmt+"/"+collection, tok, body).Status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusBadRequest:
			default:
				t.Fatalf("%s: unexpected status %d", collection, s)
			}
		}
		if created != 1 {
			t.Fatalf("%s: %d creates of one name succeeded: %v", collection, created, statuses)
		}
		_, total := n.listIDs(t, tok, "/"+collection, `name = "same-`+collection+`"`)
		if total != 1 {
			t.Fatalf("%s: %d entities with the name", collection, total)
		}
	}
}

// TestDisableIdentity: POST /identities/:id/disable refuses the identity at
// once (its API session, a new login), for good or for durationMinutes;
// /enable lets it in again; the default admin cannot be disabled.
func TestDisableIdentity(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "laptop")
	post := func(path string, body any, want int) {
		t.Helper()
		if r := n.do(t, http.MethodPost, mgmt+"/identities/"+ep.id+path, admin, body); r.Status != want {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
	}
	login := func() int { return n.loginWith(t, n.http, "laptop", "laptop-password") }

	post("/disable", map[string]any{"durationMinutes": 0}, http.StatusOK)
	if r := n.do(t, http.MethodGet, clientAPI+"/current-identity", ep.token, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a disabled identity's API session: %d %s", r.Status, r.Body)
	}
	if got := login(); got != http.StatusUnauthorized {
		t.Fatalf("a disabled identity logs in: %d", got)
	}
	d := n.detail(t, admin, "identities", ep.id)
	if d["disabled"] != true || d["disabledAt"] == nil || d["disabledUntil"] != nil {
		t.Fatalf("disabled for good: %v %v %v", d["disabled"], d["disabledAt"], d["disabledUntil"])
	}
	post("/enable", nil, http.StatusOK)
	if got := login(); got != http.StatusOK {
		t.Fatalf("an enabled identity logs in: %d", got)
	}
	// The disable ended the API sessions it had: a token of before it
	// does not work again.
	if r := n.do(t, http.MethodGet, clientAPI+"/current-identity", ep.token, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("a token of before the disable, once enabled: %d %s", r.Status, r.Body)
	}
	if d := n.detail(t, admin, "identities", ep.id); d["disabled"] != false || d["disabledAt"] != nil {
		t.Fatalf("enabled: %v %v", d["disabled"], d["disabledAt"])
	}

	post("/disable", map[string]any{"durationMinutes": 2}, http.StatusOK)
	if got := login(); got != http.StatusUnauthorized {
		t.Fatalf("disabled for two minutes, logs in: %d", got)
	}
	if d := n.detail(t, admin, "identities", ep.id); d["disabledUntil"] == nil {
		t.Fatalf("a timed disable shows no disabledUntil: %v", d)
	}
	clk.Advance(2*time.Minute + time.Second)
	if got := login(); got != http.StatusOK {
		t.Fatalf("two minutes later: %d", got)
	}
	// Ended, it shows as enabled, and an update of another field leaves
	// it so; an update that disables it disables it until enabled.
	if d := n.detail(t, admin, "identities", ep.id); d["disabled"] != false || d["disabledUntil"] != nil {
		t.Fatalf("after a timed disable: %v %v", d["disabled"], d["disabledUntil"])
	}
	patch := func(body map[string]any) {
		t.Helper()
		if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+ep.id, admin, body); r.Status != http.StatusOK {
			t.Fatalf("PATCH %v: %d %s", body, r.Status, r.Body)
		}
	}
	patch(map[string]any{"roleAttributes": []string{"laptops"}})
	if got := login(); got != http.StatusOK {
		t.Fatalf("after an update of its attributes: %d", got)
	}
	patch(map[string]any{"disabled": true})
	clk.Advance(time.Hour)
	if got := login(); got != http.StatusUnauthorized {
		t.Fatalf("disabled by an update, an hour later: %d", got)
	}
	admin = n.adminToken(t) // the hour ended the admin's API session

	post("/disable", map[string]any{"durationMinutes": -1}, http.StatusBadRequest)
	post("/disable", `{"durationMinutes": "soon"}`, http.StatusBadRequest)
	var me struct{ ID string }
	n.getJSON(t, mgmt+"/current-identity", admin, &me)
	if r := n.do(t, http.MethodPost, mgmt+"/identities/"+me.ID+"/disable", admin, nil); r.Status != http.StatusBadRequest {
		t.Fatalf("disabling the default admin: %d %s", r.Status, r.Body)
	}
}

// TestNamesNewAndOld: a new name, role attribute or username may not hold
// control characters or invisible formatting, but an entity named before
// that rule keeps its name and attributes through its updates.
func TestNamesNewAndOld(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	w := &api.Writer{Log: n.elog, Barrier: n.store, Now: time.Now}
	old := posture.Service{ID: posture.NewID(), Name: "old\x01name", RoleAttributes: []string{"old\x01attr"}, CreatedAt: time.Now(), UpdatedAt: time.Now()}
	if err := w.ModelContext(t.Context(), api.Stamp{Actor: "test"}, func() ([]posture.Payload, error) {
		return []posture.Payload{posture.Created[posture.Service]{Entity: old}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := n.do(t, http.MethodPatch, mgmt+"/services/"+old.ID, admin, map[string]any{"roleAttributes": []string{"old\x01attr", "apps"}}); r.Status != http.StatusOK {
		t.Fatalf("an update of an entity with an older name and attribute: %d %s", r.Status, r.Body)
	}
	for _, body := range []map[string]any{
		{"name": "new\x01name"},
		{"name": "new-name", "roleAttributes": []string{"a\u202eb"}},
		{"name": " lead"}, // refused, not trimmed
		{"name": "trail "},
	} {
		if r := n.do(t, http.MethodPost, mgmt+"/services", admin, body); r.Status != http.StatusBadRequest {
			t.Fatalf("%v: %d %s", body, r.Status, r.Body)
		}
	}
	if r := n.do(t, http.MethodPatch, mgmt+"/services/"+old.ID, admin, map[string]any{"roleAttributes": []string{"new\x01attr"}}); r.Status != http.StatusBadRequest {
		t.Fatalf("a new attribute with a control character: %d %s", r.Status, r.Body)
	}
	id := n.create(t, admin, "identities", map[string]any{"name": "spoofer", "type": "User"})
	if r := n.do(t, http.MethodPost, mgmt+"/authenticators", admin, map[string]any{"method": "updb", "identityId": id,
		"username": "ad\u202enimx", "password": "spoofer-password"}); r.Status != http.StatusBadRequest {
		t.Fatalf("a username with a bidirectional override: %d %s", r.Status, r.Body)
	}
}

// TestListsNameTheirFields: a list's meta names the fields its filter and
// sort take (meta.filterableFields, as the OpenZiti controller does), and
// a sort on each of those named here works.
func TestListsNameTheirFields(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "lister", "laptops")
	for _, l := range []struct {
		path, token string
		want        []string
	}{
		{mgmt + "/identities", admin, []string{"id", "isAdmin", "name", "roleAttributes"}},
		{mgmt + "/posture-checks", admin, []string{"id", "name", "typeId"}},
		{mgmt + "/failed-service-requests", admin, []string{"identityId", "serviceName", "sessionType", "when"}},
		{clientAPI + "/sessions", ep.token, []string{"id", "serviceId", "type"}},
		{mgmt + "/identity-role-attributes", admin, []string{"id", "name"}},
		{mgmt + "/identities/" + ep.id + "/posture-history", admin, []string{"at", "kind", "seq", "summary"}},
	} {
		r := n.do(t, http.MethodGet, l.path, l.token, nil)
		var env struct {
			Meta struct {
				FilterableFields []string `json:"filterableFields"`
			} `json:"meta"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", l.path, r.Status, r.Body)
		}
		for _, f := range env.Meta.FilterableFields {
			if strings.Contains(f, "_links") {
				t.Errorf("%s: filterableFields name a link: %q", l.path, f)
			}
		}
		for _, f := range l.want {
			if !slices.Contains(env.Meta.FilterableFields, f) {
				t.Errorf("%s: filterableFields %v lack %q", l.path, env.Meta.FilterableFields, f)
			}
			if r := n.do(t, http.MethodGet, l.path+"?sort="+url.QueryEscape(f+" desc"), l.token, nil); r.Status != http.StatusOK {
				t.Errorf("%s: a sort on %s: %d %s", l.path, f, r.Status, r.Body)
			}
		}
	}
}

// TestConfigRelations: a config type lists its configs, a config the
// services that use it, and a service carries "config" (which OpenZiti's
// serviceDetail requires): in a list, its configs of the types the
// configTypes parameter (by name or id, or "all") or the admin's login
// asked for, as the controller's management answers; empty in a detail and
// when none is asked for. Its configs' ids are in "configs".
// An address under an entity that is no operation is a route 404, not a
// missing entity named after the rest of the path.
func TestConfigRelations(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ct := n.create(t, admin, "config-types", map[string]any{"name": "host.v1", "schema": map[string]any{"type": "object"}})
	other := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	cfg := n.create(t, admin, "configs", map[string]any{"name": "crm-host", "configTypeId": ct, "data": map[string]any{"port": 443}})
	n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": other, "data": map[string]any{"port": 80}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "configs": []string{cfg}})
	n.create(t, admin, "services", map[string]any{"name": "wiki"})

	if ids, total := n.listIDs(t, admin, "/config-types/"+ct+"/configs", ""); total != 1 || ids[0] != cfg {
		t.Fatalf("configs of host.v1: %v", ids)
	}
	if ids, total := n.listIDs(t, admin, "/configs/"+cfg+"/services", ""); total != 1 || ids[0] != svc {
		t.Fatalf("services of crm-host: %v", ids)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/config-types/x0000000x/configs", admin, nil), 404, posture.CodeNotFound, "")
	data, _ := n.do(t, http.MethodGet, mgmt+"/services/"+svc, admin, nil).envelope(t)
	var got struct {
		Config  map[string]map[string]any `json:"config"`
		Configs []string                  `json:"configs"`
	}
	if err := json.Unmarshal(data, &got); err != nil || got.Config == nil || len(got.Config) != 0 || len(got.Configs) != 1 || got.Configs[0] != cfg {
		t.Fatalf("service's config and configs: %s", data)
	}
	// crm's config in a detail or a list (where wiki's is empty).
	hostConfig := func(t *testing.T, path, token string) map[string]map[string]any {
		t.Helper()
		data, _ := n.do(t, http.MethodGet, mgmt+path, token, nil).envelope(t)
		type view struct {
			Name   string                    `json:"name"`
			Config map[string]map[string]any `json:"config"`
		}
		var list []view
		if strings.HasPrefix(path, "/services/") {
			list = []view{{Name: "crm"}}
			if err := json.Unmarshal(data, &list[0]); err != nil {
				t.Fatalf("%s: %s", path, data)
			}
		} else if err := json.Unmarshal(data, &list); err != nil {
			t.Fatalf("%s: %s", path, data)
		}
		for _, s := range list {
			if s.Name == "wiki" && len(s.Config) != 0 {
				t.Fatalf("%s: wiki has no config: %s", path, data)
			}
			if s.Name == "crm" {
				return s.Config
			}
		}
		t.Fatalf("%s: no crm in %s", path, data)
		return nil
	}
	for _, asked := range []string{"host.v1", ct, "all", "intercept.v1," + ct, "nope,host.v1"} {
		if c := hostConfig(t, "/services?configTypes="+url.QueryEscape(asked), admin); len(c) != 1 || c["host.v1"]["port"] != 443.0 {
			t.Fatalf("services with config types %q: crm's config %v", asked, c)
		}
	}
	tooMany := strings.TrimSuffix(strings.Repeat("host.v1,", api.MaxConfigTypes+1), ",")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/services?configTypes="+tooMany, admin, nil), 400, posture.CodeCouldNotValidate, fmt.Sprintf("configTypes[%d]", api.MaxConfigTypes))
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/services?configTypes="+tooMany, admin, nil), 400, posture.CodeCouldNotValidate, fmt.Sprintf("configTypes[%d]", api.MaxConfigTypes))
	if c := hostConfig(t, "/services?configTypes=intercept.v1", admin); len(c) != 0 {
		t.Fatalf("crm has no intercept.v1 config: %v", c)
	}
	r := n.do(t, http.MethodPost, api.ManagementBase+"/authenticate?method=password", "",
		map[string]any{"username": "admin", "password": testAdminPassword, "configTypes": []string{"host.v1"}})
	hostAdmin := r.Header.Get(api.HeaderSession)
	if c := hostConfig(t, "/services", hostAdmin); r.Status != http.StatusOK || len(c) != 1 || c["host.v1"] == nil {
		t.Fatalf("services for an admin who logged in with host.v1: %d, %v", r.Status, c)
	}
	// A detail leaves them out, as the controller's does.
	for _, tok := range []string{admin, hostAdmin} {
		if c := hostConfig(t, "/services/"+svc+"?configTypes=all", tok); len(c) != 0 {
			t.Fatalf("crm's detail: %v", c)
		}
	}
	r = n.do(t, http.MethodGet, mgmt+"/config-types/"+ct+"/nothing-here", admin, nil)
	if r.Status != http.StatusNotFound || strings.Contains(string(r.Body), "nothing-here") && strings.Contains(string(r.Body), "config type") {
		t.Fatalf("an unknown sub-path: %d %s", r.Status, r.Body)
	}
}

// TestIdentityServiceConfigs: an identity's own config for a service takes
// the place of the service's config of that type, for that identity's
// clients only; it is listed, replaced, removed, and goes with the
// identity.
func TestIdentityServiceConfigs(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	host := n.create(t, admin, "config-types", map[string]any{"name": "host.v1", "schema": map[string]any{"type": "object"}})
	intercept := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	shared := n.create(t, admin, "configs", map[string]any{"name": "crm-host", "configTypeId": host, "data": map[string]any{"port": 443}})
	own := n.create(t, admin, "configs", map[string]any{"name": "crm-host-lab", "configTypeId": host, "data": map[string]any{"port": 8443}})
	icpt := n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": intercept, "data": map[string]any{"port": 80}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "configs": []string{shared, icpt}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial-crm", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + svc}})
	lab := n.endpoint(t, admin, "lab-laptop", "laptops")
	other := n.endpoint(t, admin, "other", "laptops")
	path := mgmt + "/identities/" + lab.id + "/service-configs"

	hostPort := func(t *testing.T, tok string) any {
		t.Helper()
		var list []struct {
			Config map[string]map[string]any `json:"config"`
		}
		n.getJSON(t, clientAPI+"/services?configTypes=all", tok, &list)
		if len(list) != 1 || list[0].Config["intercept.v1"]["port"] != 80.0 {
			t.Fatalf("services: %+v", list)
		}
		return list[0].Config["host.v1"]["port"]
	}
	listed := func(t *testing.T) []map[string]any {
		t.Helper()
		var list []map[string]any
		n.getJSON(t, path, admin, &list)
		return list
	}

	if l := listed(t); len(l) != 0 {
		t.Fatalf("service configs before any: %v", l)
	}
	for _, bad := range []struct {
		body   any
		status int
		code   string
		field  string
	}{
		{map[string]any{"serviceId": svc, "configId": own}, http.StatusBadRequest, posture.CodeCouldNotParseBody, ""},
		// An unknown service or config is 404, as on the controller, with
		// the pair's field named.
		{[]map[string]any{{"serviceId": "x0000000x", "configId": own}}, http.StatusNotFound, posture.CodeNotFound, "[0].serviceId"},
		{[]map[string]any{{"serviceId": svc, "configId": own}, {"serviceId": svc, "configId": "x0000000x"}}, http.StatusNotFound, posture.CodeNotFound, "[1].configId"},
	} {
		expectError(t, n.do(t, http.MethodPost, path, admin, bad.body), bad.status, bad.code, bad.field)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities/x0000000x/service-configs", admin, []map[string]any{{"serviceId": svc, "configId": own}}),
		http.StatusNotFound, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodPost, path, lab.token, []map[string]any{{"serviceId": svc, "configId": own}}), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	if l := listed(t); len(l) != 0 {
		t.Fatalf("refused requests changed the service configs: %v", l)
	}

	changedAt := func(t *testing.T) string {
		t.Helper()
		var u struct{ LastChangeAt string }
		n.getJSON(t, clientAPI+"/current-api-session/service-updates", lab.token, &u)
		return u.LastChangeAt
	}
	before := changedAt(t)
	if r := n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": own}}); r.Status != http.StatusOK {
		t.Fatalf("assign: %d %s", r.Status, r.Body)
	}
	// Its clients learn that their services changed.
	if after := changedAt(t); after <= before {
		t.Fatalf("service updates' lastChangeAt %s, was %s", after, before)
	}
	if l := listed(t); len(l) != 1 || l[0]["serviceId"] != svc || l[0]["configId"] != own ||
		l[0]["service"].(map[string]any)["name"] != "crm" || l[0]["config"].(map[string]any)["name"] != "crm-host-lab" {
		t.Fatalf("service configs: %v", l)
	}
	if p := hostPort(t, lab.token); p != 8443.0 {
		t.Fatalf("lab's host.v1 port %v, want its own 8443", p)
	}
	if p := hostPort(t, other.token); p != 443.0 {
		t.Fatalf("another identity's host.v1 port %v, want the service's 443", p)
	}
	// Another config of the same type replaces it; removing by the
	// service's config of that type removes it.
	if r := n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": shared}}); r.Status != http.StatusOK {
		t.Fatalf("assign again: %d %s", r.Status, r.Body)
	}
	if l := listed(t); len(l) != 1 || l[0]["configId"] != shared {
		t.Fatalf("service configs after a second of one type: %v", l)
	}
	n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": own}})
	if r := n.do(t, http.MethodDelete, path, admin, []map[string]any{{"serviceId": svc, "configId": shared}}); r.Status != http.StatusOK {
		t.Fatalf("remove: %d %s", r.Status, r.Body)
	}
	if l := listed(t); len(l) != 0 {
		t.Fatalf("service configs after the remove: %v", l)
	}
	if p := hostPort(t, lab.token); p != 443.0 {
		t.Fatalf("lab's host.v1 port %v after the remove, want 443", p)
	}
	// A delete names what it removes: without pairs (a body a proxy
	// dropped) it is refused and removes nothing.
	n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": own}})
	for _, body := range []any{nil, []any{}} {
		expectError(t, n.do(t, http.MethodDelete, path, admin, body), http.StatusBadRequest, posture.CodeCouldNotValidate, "body")
	}
	if l := listed(t); len(l) != 1 {
		t.Fatalf("a refused delete changed the service configs: %v", l)
	}
	// A change that changes nothing records nothing: the clients are not
	// sent to read their services again.
	before = changedAt(t)
	last, _ := n.elog.LastSeq(t.Context())
	for _, r := range []response{
		n.do(t, http.MethodPost, path, admin, []any{}),
		n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": own}}),
		n.do(t, http.MethodDelete, path, admin, []map[string]any{{"serviceId": "x0000000x", "configId": "x0000000x"}}),
	} {
		if r.Status != http.StatusOK {
			t.Fatalf("a change that changes nothing: %d %s", r.Status, r.Body)
		}
	}
	if after := changedAt(t); after != before {
		t.Fatalf("changes that change nothing moved lastChangeAt %s -> %s", before, after)
	}
	if err := n.elog.Read(t.Context(), last+1, 0, func(events []posture.Event) error {
		for _, e := range events {
			if e.Type == posture.TypeIdentityServiceConfigsSet {
				return fmt.Errorf("a change that changes nothing recorded %s", e.Type)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// A change of the config an identity has as its own moves its
	// indicator, as a change of a service's config moves its clients'.
	before = changedAt(t)
	if r := n.do(t, http.MethodPatch, mgmt+"/configs/"+own, admin, map[string]any{"data": map[string]any{"port": 9443}}); r.Status != http.StatusOK {
		t.Fatalf("change the identity's own config: %d %s", r.Status, r.Body)
	}
	if after := changedAt(t); after == before {
		t.Fatalf("a change of the identity's own config left lastChangeAt at %s", before)
	}
	// A config deleted since is dropped at the next change: it is not kept
	// (where it would count against the limit), and the service's own
	// config of its type comes back.
	before = changedAt(t)
	if r := n.do(t, http.MethodDelete, mgmt+"/configs/"+own, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete a config only an identity uses: %d %s", r.Status, r.Body)
	}
	if after := changedAt(t); after == before {
		t.Fatalf("deleting the identity's own config left lastChangeAt at %s", before)
	}
	n.do(t, http.MethodPost, path, admin, []map[string]any{{"serviceId": svc, "configId": icpt}})
	if l := listed(t); len(l) != 1 || l[0]["configId"] != icpt {
		t.Fatalf("service configs after their config's delete: %v", l)
	}
	if kept, err := n.store.IdentityServiceConfigs(lab.id); err != nil || len(kept[svc]) != 1 || kept[svc][intercept] != icpt {
		t.Fatalf("kept service configs %v %v, want only the intercept one", kept, err)
	}
	if p := hostPort(t, lab.token); p != 443.0 {
		t.Fatalf("lab's host.v1 port %v once its own config is gone, want the service's 443", p)
	}

	// The counts of GET /summary.
	var counts map[string]int
	n.getJSON(t, mgmt+"/summary", admin, &counts)
	for name, want := range map[string]int{"identities": 3, "services": 1, "services.edge": 1, "configs": 2, "configTypes": 2,
		"servicePolicies": 1, "authenticators": 3, "apiSessions": 3, "postureChecks": 0, "identityTypes": len(posture.IdentityTypes)} {
		if counts[name] != want {
			t.Errorf("summary %s: %d, want %d (%v)", name, counts[name], want, counts)
		}
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/summary", lab.token, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
}

// TestServicesAsIdentity: GET /services?asIdentity= lists what the
// identity's policies grant it, by id or name, with its permissions;
// an unknown identity is 404. encryptionRequired is set at create.
func TestServicesAsIdentity(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	db := n.create(t, admin, "services", map[string]any{"name": "db"})
	n.create(t, admin, "services", map[string]any{"name": "wiki"})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial-crm", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + crm}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial-db", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + db}})
	n.create(t, admin, "service-policies", map[string]any{"name": "bind-db", "type": "Bind", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + db}})
	lab := n.create(t, admin, "identities", map[string]any{"name": "lab-laptop", "type": "Device", "roleAttributes": []string{"laptops"}})
	n.create(t, admin, "identities", map[string]any{"name": "nobody", "type": "Device"})

	type view struct {
		Name        string   `json:"name"`
		Permissions []string `json:"permissions"`
	}
	for _, ref := range []string{lab, "lab-laptop"} {
		var list []view
		n.getJSON(t, mgmt+"/services?asIdentity="+ref, admin, &list)
		if len(list) != 2 || list[0].Name+list[1].Name != "crmdb" && list[0].Name+list[1].Name != "dbcrm" {
			t.Fatalf("services as %s: %+v", ref, list)
		}
		for _, v := range list {
			if want := map[string]string{"crm": "Dial", "db": "BindDial"}[v.Name]; strings.Join(v.Permissions, "") != want {
				t.Fatalf("permissions of %s as %s: %v, want %s", v.Name, ref, v.Permissions, want)
			}
		}
	}
	var none []view
	n.getJSON(t, mgmt+"/services?asIdentity=nobody", admin, &none)
	if len(none) != 0 {
		t.Fatalf("services as an identity no policy grants: %+v", none)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/services?asIdentity=no-such-identity", admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/services?asIdentity="+strings.Repeat("x", 300), admin, nil), http.StatusBadRequest, posture.CodeCouldNotValidate, "asIdentity")

	// encryptionRequired is set at create: a change is refused, the same
	// value and its absence pass.
	expectError(t, n.do(t, http.MethodPatch, mgmt+"/services/"+crm, admin, map[string]any{"encryptionRequired": false}), http.StatusBadRequest, posture.CodeCouldNotValidate, "encryptionRequired")
	for _, body := range []map[string]any{{"name": "crm", "encryptionRequired": true}, {"name": "crm"}} {
		if r := n.do(t, http.MethodPut, mgmt+"/services/"+crm, admin, body); r.Status != http.StatusOK {
			t.Fatalf("put %v: %d %s", body, r.Status, r.Body)
		}
	}
	if d := n.detail(t, admin, "services", crm); d["encryptionRequired"] != true {
		t.Fatalf("encryptionRequired changed: %v", d)
	}
}

// TestIdentityAppDataAndHosting: an identity keeps its appData and hosting
// fields as given (the ziti CLI sets them), through a patch that does not
// name them; bad values are refused and change nothing.
func TestIdentityAppDataAndHosting(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	id := n.create(t, admin, "identities", map[string]any{"name": "svc-host", "type": "Device", "appData": map[string]any{"k": "v"},
		"defaultHostingCost": 5, "defaultHostingPrecedence": "required"})
	check := func(want map[string]any) {
		t.Helper()
		d := n.detail(t, admin, "identities", id)
		for k, v := range want {
			if got, _ := json.Marshal(d[k]); string(got) != v.(string) {
				t.Errorf("%s: %s, want %s", k, got, v)
			}
		}
	}
	check(map[string]any{"appData": `{"k":"v"}`, "defaultHostingCost": `5`, "defaultHostingPrecedence": `"required"`,
		"serviceHostingCosts": `{}`, "serviceHostingPrecedences": `{}`})
	if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+id, admin, map[string]any{"serviceHostingCosts": map[string]int{crm: 3},
		"serviceHostingPrecedences": map[string]string{crm: "failed"}}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	check(map[string]any{"appData": `{"k":"v"}`, "defaultHostingCost": `5`, "serviceHostingCosts": `{"` + crm + `":3}`,
		"serviceHostingPrecedences": `{"` + crm + `":"failed"}`})
	for _, bad := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"defaultHostingCost": 70000}, "defaultHostingCost"},
		{map[string]any{"defaultHostingPrecedence": "sometimes"}, "defaultHostingPrecedence"},
		{map[string]any{"serviceHostingCosts": map[string]int{"x0000000x": 1}}, "serviceHostingCosts.x0000000x"},
		{map[string]any{"appData": map[string]any{"k": []int{1}}}, "appData.k"},
	} {
		expectError(t, n.do(t, http.MethodPatch, mgmt+"/identities/"+id, admin, bad.body), http.StatusBadRequest, posture.CodeCouldNotValidate, bad.field)
	}
	check(map[string]any{"defaultHostingCost": `5`, "defaultHostingPrecedence": `"required"`, "appData": `{"k":"v"}`})
	// An entry set to null goes.
	db := n.create(t, admin, "services", map[string]any{"name": "db"})
	if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+id, admin, map[string]any{"serviceHostingCosts": map[string]any{crm: nil, db: 4},
		"serviceHostingPrecedences": map[string]any{crm: nil, db: "required"}}); r.Status != http.StatusOK {
		t.Fatalf("patch with null entries: %d %s", r.Status, r.Body)
	}
	check(map[string]any{"serviceHostingCosts": `{"` + db + `":4}`, "serviceHostingPrecedences": `{"` + db + `":"required"}`})
	// A service deleted since holds nothing back: its entries go with the
	// identity's next change, a disable included.
	if r := n.do(t, http.MethodDelete, mgmt+"/services/"+db, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete db: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, mgmt+"/identities/"+id+"/disable", admin, map[string]any{}); r.Status != http.StatusOK {
		t.Fatalf("disable an identity whose hosting names a deleted service: %d %s", r.Status, r.Body)
	}
	check(map[string]any{"serviceHostingCosts": `{}`, "serviceHostingPrecedences": `{}`, "disabled": `true`})
	n.do(t, http.MethodPost, mgmt+"/identities/"+id+"/enable", admin, map[string]any{})
	// The identity reads its own appData.
	n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "svc-host", "password": "svc-host-password"})
	var own map[string]any
	n.getJSON(t, clientAPI+"/current-identity", n.login(t, clientAPI, "svc-host", "svc-host-password"), &own)
	if d, _ := json.Marshal(own["appData"]); string(d) != `{"k":"v"}` {
		t.Fatalf("current identity's appData: %s", d)
	}
}

// TestConfigChangeMovesServiceUpdates: a change of a config moves the
// service-update indicator of the clients of the services that carry it,
// as a change of the service does, and of no one else.
func TestConfigChangeMovesServiceUpdates(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ct := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	cfg := n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": ct, "data": map[string]any{"port": 80}})
	n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}, "configs": []string{cfg}})
	n.create(t, admin, "services", map[string]any{"name": "wiki", "roleAttributes": []string{"docs"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial-apps", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial-docs", "type": "Dial", "identityRoles": []string{"#readers"}, "serviceRoles": []string{"#docs"}})
	laptop := n.endpoint(t, admin, "laptop", "laptops")
	reader := n.endpoint(t, admin, "reader", "readers")
	changedAt := func(ep endpoint) string {
		t.Helper()
		var u struct{ LastChangeAt string }
		n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &u)
		return u.LastChangeAt
	}
	laptopBefore, readerBefore := changedAt(laptop), changedAt(reader)
	if r := n.do(t, http.MethodPatch, mgmt+"/configs/"+cfg, admin, map[string]any{"data": map[string]any{"port": 8080}}); r.Status != http.StatusOK {
		t.Fatalf("patch config: %d %s", r.Status, r.Body)
	}
	if after := changedAt(laptop); after <= laptopBefore {
		t.Errorf("crm's client: lastChangeAt %s, was %s", after, laptopBefore)
	}
	if after := changedAt(reader); after != readerBefore {
		t.Errorf("wiki's client: lastChangeAt %s, was %s", after, readerBefore)
	}
}

// TestUpdatesThatChangeNothingRecordNothing: a PATCH or PUT that leaves an
// entity as it is (the same name, the same tags, nothing) answers 200 and
// appends no event, so that nothing is re-evaluated nor announced; one
// that changes a field records it.
func TestUpdatesThatChangeNothingRecordNothing(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ct := n.create(t, admin, "config-types", map[string]any{"name": "host.v1", "schema": map[string]any{"type": "object"}})
	entities := map[string]map[string]any{
		"identities":       {"name": "laptop", "type": "Device", "isAdmin": false, "roleAttributes": []string{"sales"}},
		"services":         {"name": "crm", "roleAttributes": []string{"crm"}},
		"configs":          {"name": "crm-host", "configTypeId": ct, "data": map[string]any{"port": 443}},
		"posture-checks":   {"name": "windows", "typeId": "OS", "operatingSystems": []map[string]any{{"type": "Windows", "versions": []string{">=10.0.0"}}}},
		"service-policies": {"name": "sales-crm", "type": "Dial", "semantic": "AnyOf", "identityRoles": []string{"#sales"}, "serviceRoles": []string{"#crm"}},
	}
	// recordsNothing sends the updates of path that change nothing, then one
	// that sets its tags: the log moves by that one event only.
	recordsNothing := func(t *testing.T, path string, same func() []response) {
		last, err := n.elog.LastSeq(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range same() {
			if r.Status != http.StatusOK {
				t.Fatalf("an update that changes nothing: %d %s", r.Status, r.Body)
			}
		}
		if now, err := n.elog.LastSeq(t.Context()); err != nil || now != last {
			t.Fatalf("updates that change nothing moved the log from %d to %d (%v)", last, now, err)
		}
		if r := n.do(t, http.MethodPatch, path, admin, map[string]any{"tags": map[string]any{"owner": "it"}}); r.Status != http.StatusOK {
			t.Fatalf("an update: %d %s", r.Status, r.Body)
		}
		if now, err := n.elog.LastSeq(t.Context()); err != nil || now != last+1 {
			t.Fatalf("an update moved the log from %d to %d, want one event (%v)", last, now, err)
		}
	}
	for kind, body := range entities {
		t.Run(kind, func(t *testing.T) {
			id := n.create(t, admin, kind, body)
			path := mgmt + "/" + kind + "/" + id
			recordsNothing(t, path, func() []response {
				return []response{
					n.do(t, http.MethodPatch, path, admin, map[string]any{}),
					n.do(t, http.MethodPatch, path, admin, map[string]any{"name": body["name"]}),
					n.do(t, http.MethodPatch, path, admin, map[string]any{"tags": map[string]any{}}),
					n.do(t, http.MethodPut, path, admin, body),
				}
			})
			if d := n.detail(t, admin, kind, id); fmt.Sprint(d["tags"]) != "map[owner:it]" {
				t.Fatalf("tags after the update: %v", d["tags"])
			}
		})
	}
	// So does a password authenticator's, by an admin or by its identity:
	// it would also refuse the logins in flight (their credential changed).
	t.Run("authenticators", func(t *testing.T) {
		ep := n.endpoint(t, admin, "person")
		auths, _ := n.listIDs(t, admin, "/identities/"+ep.id+"/authenticators", "")
		path := mgmt + "/authenticators/" + auths[0]
		recordsNothing(t, path, func() []response {
			return []response{
				n.do(t, http.MethodPatch, path, admin, map[string]any{}),
				n.do(t, http.MethodPatch, path, admin, map[string]any{"username": "person", "tags": map[string]any{}}),
				n.do(t, http.MethodPatch, clientAPI+"/current-identity/authenticators/"+auths[0], ep.token,
					map[string]any{"currentPassword": "person-password", "username": "person"}),
			}
		})
	})
}
