package main

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/client"
	"github.com/seed-0809debe/posture/api/management"
)

type apiRoutes struct {
	base   string
	spec   []byte
	routes []api.Route
}

func (n *testNode) apis() []apiRoutes {
	return []apiRoutes{
		{api.ClientBase, client.Spec, n.client.Routes()},
		{api.ManagementBase, management.Spec, n.management.Routes()},
	}
}

var echoParam = regexp.MustCompile(`:([A-Za-z]+)`)

// TestEveryRouteIsDeclared proves that the route tables are the whole truth:
// echo serves exactly the routes they list.
func TestEveryRouteIsDeclared(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	var declared, served []string
	for _, a := range n.apis() {
		for _, r := range a.routes {
			declared = append(declared, r.Method+" "+a.base+r.Path)
			if r.Method == http.MethodGet {
				declared = append(declared, http.MethodHead+" "+a.base+r.Path)
			}
		}
	}
	// The system routes (metrics, probes) are outside the two APIs.
	for _, p := range api.SystemPaths {
		declared = append(declared, http.MethodGet+" "+p, http.MethodHead+" "+p)
	}
	for _, r := range n.handler.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	sort.Strings(declared)
	sort.Strings(served)
	if diff := cmp.Diff(declared, served); diff != "" {
		t.Fatalf("served routes differ from the route tables (-declared +served):\n%s", diff)
	}
}

// TestRoutesRequireAuthentication walks every registered route: each
// non-public one answers 401 without a session (and with a malformed or
// unknown token), and each admin one answers 401 to a non-admin session.
func TestRoutesRequireAuthentication(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	userToken := n.createUser(t, "plain-user", "user-password", false)

	for _, a := range n.apis() {
		for _, r := range a.routes {
			path := a.base + echoParam.ReplaceAllString(r.Path, "x0000000x")
			name := r.Method + " " + path
			if r.Access == api.Public {
				continue
			}
			for _, tok := range []string{"", "not-a-uuid", posture.NewToken()} {
				resp := n.do(t, r.Method, path, tok, nil)
				if _, e := resp.envelope(t); resp.Status != http.StatusUnauthorized || e.Code != posture.CodeUnauthorized {
					t.Errorf("%s with token %q: %d %s, want 401 UNAUTHORIZED", name, tok, resp.Status, resp.Body)
				}
			}
			if r.Access == api.Admin {
				resp := n.do(t, r.Method, path, userToken, nil)
				if _, e := resp.envelope(t); resp.Status != http.StatusUnauthorized || e.Code != posture.CodeUnauthorized {
					t.Errorf("%s as a non-admin: %d %s, want 401 UNAUTHORIZED", name, resp.Status, resp.Body)
				}
			}
			if r.Method == http.MethodGet {
				if resp := n.do(t, http.MethodHead, path, "", nil); resp.Status != http.StatusUnauthorized || len(resp.Body) != 0 {
					t.Errorf("HEAD %s without a session: %d %q, want 401 without content", path, resp.Status, resp.Body)
				}
			}
		}
	}
}

// TestOpenAPIDocumentsMatchRoutes checks each API's OpenAPI document against
// its route table: the same operations, with the same access level.
func TestOpenAPIDocumentsMatchRoutes(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	for _, a := range n.apis() {
		if *rewriteSpecs {
			if err := rewriteSpec(a.base, a.routes); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(specFile(a.base))
			if err != nil {
				t.Fatal(err)
			}
			a.spec = data
		}
		var doc struct {
			Paths map[string]map[string]specOp `json:"paths"`
		}
		if err := json.Unmarshal(a.spec, &doc); err != nil {
			t.Fatalf("%s: %v", a.base, err)
		}
		var inSpec, inRoutes []string
		ops := map[string]bool{}
		for path, methods := range doc.Paths {
			for method, op := range methods {
				inSpec = append(inSpec, strings.ToUpper(method)+" "+path+" "+op.Access)
				if op.OperationID == "" || ops[op.OperationID] {
					t.Errorf("%s: %s %s: missing or duplicate operationId %q", a.base, method, path, op.OperationID)
				}
				ops[op.OperationID] = true
			}
		}
		for _, r := range a.routes {
			inRoutes = append(inRoutes, r.Method+" "+echoParam.ReplaceAllString(r.Path, "{$1}")+" "+r.Access.String())
		}
		sort.Strings(inSpec)
		sort.Strings(inRoutes)
		if diff := cmp.Diff(inSpec, inRoutes); diff != "" {
			t.Errorf("%s: the OpenAPI document differs from the routes (-spec +routes); run the test with -rewrite and review the diff:\n%s", a.base, diff)
		}
	}
}

// createUser makes an identity with a password authenticator directly
// through the log and returns a client API token for it.
func (n *testNode) createUser(t testing.TB, name, password string, admin bool) string {
	t.Helper()
	w := &api.Writer{Log: n.elog, Barrier: n.store, Now: time.Now}
	now := time.Now()
	hash, err := api.HashPassword(t.Context(), password)
	if err != nil {
		t.Fatal(err)
	}
	id := posture.Identity{ID: posture.NewID(), Name: name, Type: posture.IdentityUser, IsAdmin: admin, RoleAttributes: []string{}, CreatedAt: now, UpdatedAt: now}
	err = w.ModelContext(t.Context(), api.Stamp{Actor: "test"}, func() ([]posture.Payload, error) {
		return []posture.Payload{
			posture.Created[posture.Identity]{Entity: id},
			posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: posture.NewID(), IdentityID: id.ID, Method: posture.MethodPassword, Username: name, PasswordHash: hash, CreatedAt: now, UpdatedAt: now}},
		}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n.login(t, api.ClientBase, name, password)
}

// A body labelled with another media type than JSON is refused with 415
// UNSUPPORTED_MEDIA_TYPE in the envelope and changes nothing; JSON with a
// charset and a body without a Content-Type are read; the
// check comes after authentication; enrollment still takes a PEM CSR
// (TestEnrollOTT).
func TestJSONBodiesOnly(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	body := []byte(`{"name":"typed"}`)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "image/png", "not a type", "application/json; charset=latin1", "application/json; charset=utf-16"} {
		r := n.send(t, request{method: http.MethodPost, path: mgmt + "/services", token: admin, contentType: ct, body: body})
		expectError(t, r, http.StatusUnsupportedMediaType, posture.CodeUnsupportedMediaType, "")
		if !strings.Contains(string(r.Body), "the body must be JSON") {
			t.Errorf("Content-Type %q: %s", ct, r.Body)
		}
	}
	if r := n.do(t, http.MethodGet, mgmt+`/services?filter=name="typed"`, admin, nil); !strings.Contains(string(r.Body), `"count":0`) && !strings.Contains(string(r.Body), `"totalCount":0`) {
		t.Fatalf("a refused body created a service: %s", r.Body)
	}
	expectError(t, n.send(t, request{method: http.MethodPost, path: mgmt + "/services", contentType: "text/plain", body: body}), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	for i, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF8", "application/json; charset=us-ascii"} {
		if r := n.send(t, request{method: http.MethodPost, path: mgmt + "/services", token: admin, contentType: ct, body: []byte(fmt.Sprintf(`{"name":"typed-utf8-%d"}`, i))}); r.Status != http.StatusCreated {
			t.Errorf("JSON with a charset: %d %s", r.Status, r.Body)
		}
	}
	// A patch of nothing (null, an empty body) is refused, not a no-op.
	svc := n.create(t, admin, "services", map[string]any{"name": "patched"})
	for _, body := range []string{"null", ""} {
		r := n.send(t, request{method: http.MethodPatch, path: mgmt + "/services/" + svc, token: admin, contentType: "application/json", body: []byte(body)})
		expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotParseBody, "")
	}
	// Off the document, which says application/json: a +json type, and no
	// Content-Type at all.
	plain := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}}}
	for i, ct := range []string{"application/merge-patch+json", ""} {
		req, err := http.NewRequest(http.MethodPost, n.srv.URL+mgmt+"/services", strings.NewReader(fmt.Sprintf(`{"name":"typed-%d"}`, i+2)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(api.HeaderSession, admin)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := plain.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Errorf("Content-Type %q: %d", ct, resp.StatusCode)
		}
	}
	// An encoded body is not read: 415, and nothing is created.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(`{"name":"gzipped"}`))
	zw.Close()
	req, err := http.NewRequest(http.MethodPost, n.srv.URL+mgmt+"/services", &gz)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderSession, admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Content-Encoding", "identity") // the second header is read too
	req.Header.Add("Content-Encoding", "gzip")
	resp, err := plain.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType || !strings.Contains(string(data), `not encoded (Content-Encoding: \"gzip\")`) {
		t.Errorf("a gzip body: %d %s", resp.StatusCode, data)
	}
	if r := n.do(t, http.MethodGet, mgmt+`/services?filter=name="gzipped"`, admin, nil); !strings.Contains(string(r.Body), `"totalCount":0`) {
		t.Fatalf("a gzip body created a service: %s", r.Body)
	}
}

// An operation that takes no body checks one that is sent anyway: broken
// JSON is refused with COULD_NOT_PARSE_BODY and one over the size limit
// with 413, and neither enrolls MFA; an empty object or no body does.
func TestBodiesOfOperationsWithoutOne(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.createUser(t, "nobody", "password-123", false)
	enroll := request{method: http.MethodPost, path: api.ClientBase + "/current-identity/mfa", token: tok, contentType: "application/json"}
	for _, bad := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"name":`, http.StatusBadRequest, posture.CodeCouldNotParseBody},
		{`{} trailing`, http.StatusBadRequest, posture.CodeCouldNotParseBody},
		{"{\"a\":\"\xff\"}", http.StatusBadRequest, posture.CodeCouldNotParseBody},
		{`{"pad":"` + strings.Repeat("x", api.MaxBody) + `"}`, http.StatusRequestEntityTooLarge, posture.CodeRequestEntityTooLarge},
	} {
		r := enroll
		r.body = []byte(bad.body)
		expectError(t, n.send(t, r), bad.status, bad.code, "")
	}
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil), http.StatusNotFound, posture.CodeNotFound, "")
	r := enroll
	r.body = []byte(`{}`)
	if got := n.send(t, r); got.Status != http.StatusOK && got.Status != http.StatusCreated {
		t.Fatalf("enroll MFA with {}: %d %s", got.Status, got.Body)
	}
	if got := n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil); got.Status != http.StatusOK {
		t.Fatalf("MFA after enrolling: %d %s", got.Status, got.Body)
	}
}

// A filter or sort naming a field the listed items do not have is refused
// with INVALID_FILTER or INVALID_SORT_IDENTIFIER, saying which, instead of
// matching nothing or leaving the order as it was; the fields the items
// show, nested ones and tags included, are taken.
func TestListUnknownFields(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	n.create(t, admin, "services", map[string]any{"name": "crm", "tags": map[string]any{"env": "prod"}})
	for _, path := range []string{"/identities", "/services", "/service-policies", "/posture-checks", "/edge-routers", "/configs", "/enrollments", "/external-jwt-signers", "/webhooks", "/authenticators"} {
		r := n.do(t, http.MethodGet, mgmt+path+"?filter="+url.QueryEscape(`nme = "admin"`), admin, nil)
		if r.Status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", path, r.Status, r.Body)
			continue
		}
		expectError(t, r, http.StatusBadRequest, posture.CodeInvalidFilter, "")
		if !strings.Contains(string(r.Body), `unknown field \"nme\"`) {
			t.Errorf("%s with an unknown filter field: %s", path, r.Body)
		}
		expectError(t, n.do(t, http.MethodGet, mgmt+path+"?sort=nosuchfield", admin, nil), http.StatusBadRequest, posture.CodeInvalidSort, "")
		expectError(t, n.do(t, http.MethodGet, mgmt+path+"?filter="+url.QueryEscape(`true sort by nosuchfield`), admin, nil), http.StatusBadRequest, posture.CodeInvalidFilter, "")
	}
	for _, q := range []string{`name = "admin"`, `isAdmin = true and createdAt > datetime(2000-01-01T00:00:00Z) sort by updatedAt desc`} {
		if ids, _ := n.listIDs(t, admin, "/identities", q); len(ids) != 1 {
			t.Errorf("identities where %s: %v", q, ids)
		}
	}
	if ids, _ := n.listIDs(t, admin, "/services", `tags.env = "prod"`); len(ids) != 1 {
		t.Errorf("services by tag: %v", ids)
	}
	// Role attributes are an id and a name.
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identity-role-attributes?filter="+url.QueryEscape(`nme = "x"`), admin, nil), http.StatusBadRequest, posture.CodeInvalidFilter, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identity-role-attributes?sort=nosuch", admin, nil), http.StatusBadRequest, posture.CodeInvalidSort, "")
	n.endpoint(t, admin, "attributed", "alpha", "beta")
	var attrs []string
	n.getJSON(t, mgmt+"/identity-role-attributes?sort="+url.QueryEscape("id desc"), admin, &attrs)
	if len(attrs) != 2 || attrs[0] != "beta" || attrs[1] != "alpha" {
		t.Errorf("role attributes by id, descending: %v", attrs)
	}
	// The specs list filters too.
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/specs?filter="+url.QueryEscape("((("), "", nil), http.StatusBadRequest, posture.CodeInvalidFilter, "")
	if r := n.do(t, http.MethodGet, clientAPI+"/specs?filter="+url.QueryEscape(`id = "edge-client"`), "", nil); r.Status != http.StatusOK ||
		!strings.Contains(string(r.Body), `"totalCount":1`) {
		t.Errorf("specs by id: %d %s", r.Status, r.Body)
	}
	// A field only some of an entity's views show (an MFA check's timeout,
	// an updb enrollment's username) is a field, even where no item has
	// it, and on an empty list.
	n.create(t, admin, "posture-checks", map[string]any{"typeId": "DOMAIN", "name": "corp", "domains": []string{"corp"}})
	laptop, _ := n.enrolledIdentity(t, admin, "laptop", map[string]any{"ott": true})
	policy := n.create(t, admin, "service-policies", map[string]any{"name": "all", "type": "Dial", "identityRoles": []string{"#all"}, "serviceRoles": []string{"#all"}})
	expectError(t, n.do(t, http.MethodGet, mgmt+"/service-policies/"+policy+"/identities?filter="+url.QueryEscape(`nme = "x"`), admin, nil), http.StatusBadRequest, posture.CodeInvalidFilter, "")
	for _, q := range []struct{ path, filter string }{
		{"/posture-checks", `timeoutSeconds = 60`},
		{"/enrollments", `username = "x"`},
		{"/identities/" + laptop + "/enrollments", `username = "x"`},
		{"/service-policies/" + policy + "/identities", `isAdmin = true`},
		{"/edge-routers", `isOnline = true`},
	} {
		if r := n.do(t, http.MethodGet, mgmt+q.path+"?filter="+url.QueryEscape(q.filter), admin, nil); r.Status != http.StatusOK {
			t.Errorf("%s where %s: %d %s", q.path, q.filter, r.Status, r.Body)
		}
	}
}

// Model changes racing for the model subject all land: 64 concurrent
// creates of identities with an enrollment (two events each, in a chain)
// answer 201, and each identity has its enrollment (a chain that lost its
// race after its first event appends the rest, rather than deciding again
// on a state that holds half of it).
func TestConcurrentModelChanges(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	var wg sync.WaitGroup
	ids := make(chan string, 64)
	for i := range 64 {
		wg.Go(func() {
			r := n.do(t, http.MethodPost, mgmt+"/identities", admin, map[string]any{"name": fmt.Sprintf("user-%d", i), "type": "User",
				"isAdmin": false, "enrollment": map[string]any{"updb": fmt.Sprintf("user-%d", i)}})
			if r.Status != http.StatusCreated {
				t.Errorf("create %d: %d %s", i, r.Status, r.Body)
				return
			}
			var c api.Created
			data, _ := r.envelope(t)
			_ = json.Unmarshal(data, &c)
			ids <- c.ID
		})
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		if enr, _ := n.identityEnrollments(t, admin, id); enr["updb"].ID == "" {
			t.Errorf("identity %s has no enrollment", id)
		}
	}
}

// TestHeadAnswersAsGet: HEAD on a GET operation answers what GET would,
// status and headers, without the content (RFC 9110, section 9.3.2).
func TestHeadAnswersAsGet(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	for _, path := range []string{mgmt + "/identities", mgmt + "/identities/nosuchid00", api.ClientBase + "/version", "/readyz", "/livez"} {
		get, head := n.do(t, http.MethodGet, path, admin, nil), n.do(t, http.MethodHead, path, admin, nil)
		if head.Status != get.Status || len(head.Body) != 0 ||
			head.Header.Get("Content-Type") != get.Header.Get("Content-Type") || head.Header.Get("Content-Length") != strconv.Itoa(len(get.Body)) {
			t.Errorf("HEAD %s: %d %v %q; GET: %d %v, %d bytes", path, head.Status, head.Header, head.Body, get.Status, get.Header, len(get.Body))
		}
	}
}
