package main

// Wire conformance with the OpenZiti clients: each test is one item, written
// from what the real controller (edge-api 0.26.34) answers; docs/api.md's "Wire
// compatibility with OpenZiti clients" lists them.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// dataMap decodes an envelope's data as an object, failing unless 200.
func dataMap(t testing.TB, r response) map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return m
}

// dataList decodes an envelope's data as a list of objects, failing unless
// 200.
func dataList(t testing.TB, r response) []map[string]any {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var l []map[string]any
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return l
}

// byID finds an item of a list by id.
func byID(t testing.TB, items []map[string]any, id string) map[string]any {
	t.Helper()
	for _, it := range items {
		if it["id"] == id {
			return it
		}
	}
	t.Fatalf("no item %s in %v", id, items)
	return nil
}

// Item 1: listRoot answers with or without the trailing slash, on both APIs
// and on the /edge/v1 alias, with the version document.
func TestListRootWithAndWithoutSlash(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	version := dataMap(t, n.do(t, http.MethodGet, clientAPI+"/version", "", nil))
	for _, path := range []string{clientAPI, clientAPI + "/", mgmt, mgmt + "/", "/edge/v1", "/edge/v1/", "/"} {
		root := dataMap(t, n.do(t, http.MethodGet, path, "", nil))
		if root["version"] != version["version"] || root["apiVersions"] == nil {
			t.Errorf("GET %s: %v, want the version document %v", path, root, version)
		}
	}
}

// Item 2: a config update with the client's ConfigUpdate body (no
// configTypeId) keeps the config's type; naming another type is refused.
func TestConfigUpdateKeepsItsType(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ct := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1"})
	other := n.create(t, admin, "config-types", map[string]any{"name": "host.v1"})
	cfg := n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": ct, "data": map[string]any{"port": 443}})

	r := n.do(t, http.MethodPut, mgmt+"/configs/"+cfg, admin, map[string]any{"name": "crm-intercept-2", "data": map[string]any{"port": 8443}, "tags": map[string]any{"team": "crm"}})
	if r.Status != http.StatusOK {
		t.Fatalf("PUT without configTypeId: %d %s", r.Status, r.Body)
	}
	got := n.detail(t, admin, "configs", cfg)
	if got["configTypeId"] != ct || got["name"] != "crm-intercept-2" || got["data"].(map[string]any)["port"] != 8443.0 {
		t.Fatalf("after update: %v", got)
	}
	r = n.do(t, http.MethodPut, mgmt+"/configs/"+cfg, admin, map[string]any{"name": "crm-intercept-2", "configTypeId": other, "data": map[string]any{}})
	expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "configTypeId")
}

// Item 3: external JWT signers keep kid, and answer commonName, notBefore
// and notAfter of their certificate.
func TestExtJWTSignerKidAndCertificateFields(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := selfSignedPEM(t, key)
	cert := parseCertPEM(t, certPEM)
	id := n.create(t, admin, "external-jwt-signers", map[string]any{"name": "idp", "issuer": "https://idp.example",
		"audience": "postured", "certPem": certPEM, "enabled": true, "kid": "key-1"})

	check := func(s map[string]any, kid string) {
		t.Helper()
		if s["kid"] != kid || s["commonName"] != cert.Subject.CommonName {
			t.Errorf("kid/commonName: %v %v", s["kid"], s["commonName"])
		}
		for field, want := range map[string]time.Time{"notBefore": cert.NotBefore, "notAfter": cert.NotAfter} {
			got, err := time.Parse(time.RFC3339, s[field].(string))
			if err != nil || !got.Equal(want) {
				t.Errorf("%s: %v, want %s", field, s[field], want)
			}
		}
	}
	check(n.detail(t, admin, "external-jwt-signers", id), "key-1")
	check(byID(t, dataList(t, n.do(t, http.MethodGet, mgmt+"/external-jwt-signers", admin, nil)), id), "key-1")

	r := n.do(t, http.MethodPut, mgmt+"/external-jwt-signers/"+id, admin, map[string]any{"name": "idp", "issuer": "https://idp.example",
		"audience": "postured", "certPem": certPEM, "enabled": true, "kid": "key-2"})
	if r.Status != http.StatusOK {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	check(n.detail(t, admin, "external-jwt-signers", id), "key-2")
	if r := n.do(t, http.MethodPatch, mgmt+"/external-jwt-signers/"+id, admin, map[string]any{"kid": "key-3"}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	check(n.detail(t, admin, "external-jwt-signers", id), "key-3")

	// A kid names one signer.
	r = n.do(t, http.MethodPost, mgmt+"/external-jwt-signers", admin, map[string]any{"name": "idp2", "issuer": "https://idp2.example",
		"audience": "postured", "certPem": certPEM, "enabled": true, "kid": "key-3"})
	expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "kid")
}

// Items 4 and 5: an identity keeps the envInfo and sdkInfo its clients
// reported at authenticate (the latest, after the API session ended),
// hasApiSession follows its live API sessions, and identity detail, list
// and current-identity carry every field the real controller sends.
func TestIdentityKeepsClientReportsAndFullShape(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id := n.create(t, admin, "identities", map[string]any{"name": "laptop", "type": "Device", "isAdmin": false})
	n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "laptop", "password": "laptop-password"})

	identity := func() map[string]any { return n.detail(t, admin, "identities", id) }
	if got := identity(); got["hasApiSession"] != false || len(got["sdkInfo"].(map[string]any)) != 0 {
		t.Fatalf("before any login: %v", got)
	}
	authenticate := func(version string) string {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/authenticate?method=password", "", map[string]any{
			"username": "laptop", "password": "laptop-password",
			"envInfo": map[string]any{"os": "windows", "arch": "amd64", "osRelease": "10", "osVersion": "10.0.19045", "hostname": "lap-1"},
			"sdkInfo": map[string]any{"type": "ziti-sdk-c", "version": version, "appId": "ziti-edge-tunnel", "appVersion": "1.2.3"},
		})
		if r.Status != http.StatusOK {
			t.Fatalf("authenticate: %d %s", r.Status, r.Body)
		}
		return r.Header.Get(api.HeaderSession)
	}
	tok := authenticate("1.0.0")
	got := identity()
	if got["hasApiSession"] != true || got["envInfo"].(map[string]any)["hostname"] != "lap-1" || got["sdkInfo"].(map[string]any)["version"] != "1.0.0" {
		t.Fatalf("after login: hasApiSession %v envInfo %v sdkInfo %v", got["hasApiSession"], got["envInfo"], got["sdkInfo"])
	}
	item := byID(t, dataList(t, n.do(t, http.MethodGet, mgmt+"/identities?limit=500", admin, nil)), id)
	if item["hasApiSession"] != true || item["sdkInfo"].(map[string]any)["appId"] != "ziti-edge-tunnel" {
		t.Fatalf("list item: %v", item)
	}

	// Every field of identityDetail, in detail, list and current-identity.
	want := []string{"authPolicyId", "authPolicy", "defaultHostingCost", "defaultHostingPrecedence", "envInfo", "sdkInfo",
		"hasApiSession", "hasEdgeRouterConnection", "serviceHostingCosts", "serviceHostingPrecedences", "enrollment",
		"authenticators", "isMfaEnabled", "isDefaultAdmin", "typeId", "type", "disabled", "_links", "createdAt", "updatedAt"}
	current := dataMap(t, n.do(t, http.MethodGet, clientAPI+"/current-identity", tok, nil))
	for name, view := range map[string]map[string]any{"detail": got, "list": item, "current-identity": current} {
		for _, k := range want {
			if _, ok := view[k]; !ok {
				t.Errorf("%s lacks %s: %v", name, k, view)
			}
		}
		if view["authPolicyId"] != "default" || view["authPolicy"].(map[string]any)["id"] != "default" {
			t.Errorf("%s: auth policy %v %v", name, view["authPolicyId"], view["authPolicy"])
		}
	}
	if current["sdkInfo"].(map[string]any)["type"] != "ziti-sdk-c" || current["hasApiSession"] != true {
		t.Errorf("current-identity: %v", current)
	}

	// A later login's report replaces the earlier; the reports outlive the
	// API sessions, hasApiSession does not.
	tok2 := authenticate("1.1.0")
	for _, tk := range []string{tok, tok2} {
		if r := n.do(t, http.MethodDelete, clientAPI+"/current-api-session", tk, nil); r.Status != http.StatusOK {
			t.Fatalf("logout: %d %s", r.Status, r.Body)
		}
	}
	got = identity()
	if got["hasApiSession"] != false || got["sdkInfo"].(map[string]any)["version"] != "1.1.0" || got["envInfo"].(map[string]any)["os"] != "windows" {
		t.Fatalf("after logout: hasApiSession %v sdkInfo %v envInfo %v", got["hasApiSession"], got["sdkInfo"], got["envInfo"])
	}
}

// Item 6: management services carry permissions and postureQueries.
func TestManagementServiceShape(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id := n.create(t, admin, "services", map[string]any{"name": "crm", "encryptionRequired": true})
	for name, s := range map[string]map[string]any{
		"detail": n.detail(t, admin, "services", id),
		"list":   byID(t, dataList(t, n.do(t, http.MethodGet, mgmt+"/services", admin, nil)), id),
	} {
		perms, _ := s["permissions"].([]any)
		queries, ok := s["postureQueries"].([]any)
		if len(perms) != 2 || perms[0] != "Bind" || perms[1] != "Dial" || !ok || len(queries) != 0 {
			t.Errorf("%s: permissions %v postureQueries %v", name, s["permissions"], s["postureQueries"])
		}
	}
}

// On the client API an admin sees every service, granted or not (seed:
// "List services (admin)", "Get a service (admin)"), with the permissions
// its policies grant: none for this one, which POST /sessions refuses it;
// an identity without a grant sees none of them.
func TestClientServicesForAdmins(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id := n.create(t, admin, "services", map[string]any{"name": "ungranted"})
	for name, s := range map[string]map[string]any{
		"detail": func() map[string]any {
			var v map[string]any
			n.getJSON(t, clientAPI+"/services/"+id, admin, &v)
			return v
		}(),
		"list": byID(t, dataList(t, n.do(t, http.MethodGet, clientAPI+"/services", admin, nil)), id),
	} {
		if perms, ok := s["permissions"].([]any); !ok || len(perms) != 0 {
			t.Errorf("%s: permissions %v, want none", name, s["permissions"])
		}
	}
	user := n.endpoint(t, admin, "no-grants")
	if got := dataList(t, n.do(t, http.MethodGet, clientAPI+"/services", user.token, nil)); len(got) != 0 {
		t.Fatalf("an identity without grants lists %v", got)
	}
	if r := n.do(t, http.MethodGet, clientAPI+"/services/"+id, user.token, nil); r.Status != http.StatusNotFound {
		t.Fatalf("an identity without grants gets the service: %d %s", r.Status, r.Body)
	}
}

// Item 7: current-identity/edge-routers items carry _links, createdAt and
// updatedAt.
func TestCurrentIdentityEdgeRoutersShape(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	router := n.create(t, admin, "edge-routers", map[string]any{"name": "er1", "roleAttributes": []string{"public"}})
	n.create(t, admin, "edge-router-policies", map[string]any{"name": "erp", "identityRoles": []string{"#all"}, "edgeRouterRoles": []string{"#public"}})
	ep := n.endpoint(t, admin, "laptop", "laptops")
	created := n.detail(t, admin, "edge-routers", router)
	items := dataList(t, n.do(t, http.MethodGet, clientAPI+"/current-identity/edge-routers", ep.token, nil))
	if len(items) != 1 {
		t.Fatalf("edge routers: %v", items)
	}
	r := items[0]
	links, _ := r["_links"].(map[string]any)
	self, _ := links["self"].(map[string]any)
	if r["id"] != router || self["href"] != "./edge-routers/"+router || r["createdAt"] != created["createdAt"] || r["updatedAt"] != created["updatedAt"] {
		t.Fatalf("edge router item: %v (detail %v)", r, created)
	}
}

// Item 8: specs and posture-check types have createdAt and updatedAt.
func TestBuiltinRecordsHaveTimes(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	views := dataList(t, n.do(t, http.MethodGet, clientAPI+"/specs", "", nil))
	views = append(views, dataMap(t, n.do(t, http.MethodGet, clientAPI+"/specs/edge-management", "", nil)))
	views = append(views, dataList(t, n.do(t, http.MethodGet, mgmt+"/posture-check-types", admin, nil))...)
	views = append(views, dataMap(t, n.do(t, http.MethodGet, mgmt+"/posture-check-types/OS", admin, nil)))
	for _, v := range views {
		for _, k := range []string{"createdAt", "updatedAt"} {
			s, _ := v[k].(string)
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				t.Errorf("%s %s: %v", v["id"], k, v[k])
			}
		}
	}
}

// Item 9: where the real controller leaves a key out or sends "", postured
// does not send null: a CA's externalIdClaim, an enrollment's username, an
// edge router's fingerprint.
func TestNoNullWhereTheControllerOmits(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ca := newTestCA(t, "wire-ca")
	caID := n.addCA(t, admin, "wire-ca", ca)
	if v, ok := n.detail(t, admin, "cas", caID)["externalIdClaim"]; ok {
		t.Errorf("CA externalIdClaim: %v, want the key left out", v)
	}
	id, _ := n.enrolledIdentity(t, admin, "phone", map[string]any{"ott": true})
	enrollments := dataList(t, n.do(t, http.MethodGet, mgmt+"/identities/"+id+"/enrollments", admin, nil))
	if len(enrollments) != 1 {
		t.Fatalf("enrollments: %v", enrollments)
	}
	if v, ok := enrollments[0]["username"]; ok {
		t.Errorf("ott enrollment username: %v, want the key left out", v)
	}
	router := n.create(t, admin, "edge-routers", map[string]any{"name": "er1"})
	if v := n.detail(t, admin, "edge-routers", router)["fingerprint"]; v != "" {
		t.Errorf("unenrolled edge router fingerprint: %#v, want \"\"", v)
	}
}

// Item 10: PROCESS and PROCESS_MULTI checks accept SHA-512 hashes (what the
// C SDK reports) as well as SHA-256, compared case-insensitively; other
// lengths are refused.
func TestProcessChecksAcceptSHA512(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	sha512 := strings.Repeat("0123456789ABCDEF", 8)
	proc := n.create(t, admin, "posture-checks", map[string]any{"typeId": "PROCESS", "name": "edr",
		"process": map[string]any{"osType": "Windows", "path": `C:\edr.exe`, "hashes": []string{sha512}}})
	n.create(t, admin, "posture-checks", map[string]any{"typeId": "PROCESS_MULTI", "name": "edr-multi", "semantic": "AnyOf",
		"processes": []any{map[string]any{"osType": "Windows", "path": `C:\edr.exe`, "hashes": []string{sha512, hashA}}}})
	for _, bad := range []string{sha512[:100], sha512 + "00", strings.Repeat("zz", 64)} {
		r := n.do(t, http.MethodPost, mgmt+"/posture-checks", admin, map[string]any{"typeId": "PROCESS", "name": "bad",
			"process": map[string]any{"osType": "Windows", "path": `C:\edr.exe`, "hashes": []string{bad}}})
		expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "process.hashes[0]")
	}
	stored := n.detail(t, admin, "posture-checks", proc)["process"].(map[string]any)["hashes"].([]any)
	if len(stored) != 1 || stored[0] != strings.ToLower(sha512) {
		t.Fatalf("stored hashes: %v", stored)
	}

	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "edr-dial", "type": "Dial",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + proc}})
	ep := n.endpoint(t, admin, "laptop")
	post := func(hash string) {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": proc, "typeId": "PROCESS",
			"path": `C:\edr.exe`, "isRunning": true, "hash": hash})
		if r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	post(strings.Repeat("ff", 64))
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm})
	expectError(t, r, http.StatusConflict, posture.CodeInvalidPosture, "")
	post(strings.ToLower(sha512))
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm}); r.Status != http.StatusCreated {
		t.Fatalf("session with the SHA-512 of the process: %d %s", r.Status, r.Body)
	}
}

// A PROCESS check reads the responses to its own query (reference §5.3: the
// response whose id is the check's), while a PROCESS_MULTI check reads a
// path's newest response whichever query it answered. The identity keeps a
// process for each path and check id.
func TestProcessCheckReadsItsOwnResponses(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	const path = `C:\edr.exe`
	single := n.create(t, admin, "posture-checks", map[string]any{"typeId": "PROCESS", "name": "edr",
		"process": map[string]any{"osType": "Windows", "path": path}})
	multi := n.create(t, admin, "posture-checks", map[string]any{"typeId": "PROCESS_MULTI", "name": "edr-multi", "semantic": "AllOf",
		"processes": []any{map[string]any{"osType": "Windows", "path": path}}})
	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	wiki := n.create(t, admin, "services", map[string]any{"name": "wiki"})
	n.create(t, admin, "service-policies", map[string]any{"name": "crm-edr", "type": "Dial",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + single}})
	n.create(t, admin, "service-policies", map[string]any{"name": "wiki-edr", "type": "Dial",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + wiki}, "postureCheckRoles": []string{"@" + multi}})
	ep := n.endpoint(t, admin, "laptop")
	post := func(id string, running bool) {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": id, "typeId": "PROCESS",
			"path": path, "isRunning": running})
		if r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	session := func(service string, want int) {
		t.Helper()
		r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": service})
		if r.Status != want {
			t.Fatalf("session for %s: %d %s, want %d", service, r.Status, r.Body, want)
		}
		if r.Status == http.StatusCreated {
			data, _ := r.envelope(t)
			var s struct{ ID string }
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			if r := n.do(t, http.MethodDelete, clientAPI+"/sessions/"+s.ID, ep.token, nil); r.Status != http.StatusOK {
				t.Fatalf("delete session: %d %s", r.Status, r.Body)
			}
		}
	}

	// The process running, reported in answer to the multi check: the multi
	// check passes, the single one has no answer of its own.
	post(multi, true)
	session(wiki, http.StatusCreated)
	session(crm, http.StatusConflict)
	post(single, true)
	session(crm, http.StatusCreated)
	// A newer answer to the multi check says it stopped: the multi check
	// fails, the single one still reads its own answer.
	post(multi, false)
	session(wiki, http.StatusConflict)
	session(crm, http.StatusCreated)

	data, _ := n.do(t, http.MethodGet, mgmt+"/identities/"+ep.id+"/posture-data", admin, nil).envelope(t)
	var pd struct {
		Processes []struct {
			PostureCheckID string
			IsRunning      bool
		}
	}
	if err := json.Unmarshal(data, &pd); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range pd.Processes {
		got = append(got, fmt.Sprintf("%s %v", p.PostureCheckID, p.IsRunning))
	}
	slices.Sort(got)
	want := []string{multi + " false", single + " true"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("posture-data processes: %v, want %v", got, want)
	}
}
