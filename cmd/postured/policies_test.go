package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/seed-0809debe/posture"
)

// TestPolicyRoleMatching is a scenario over HTTPS: identities, services,
// checks and edge routers with role attributes; policies of every semantic
// and role form; and the sub-lists that answer who selects what.
func TestPolicyRoleMatching(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)
	ident := func(name string, attrs ...string) string {
		return n.create(t, tok, "identities", map[string]any{"name": name, "type": "Device", "isAdmin": false, "roleAttributes": attrs})
	}
	service := func(name string, attrs ...string) string {
		return n.create(t, tok, "services", map[string]any{"name": name, "encryptionRequired": true, "roleAttributes": attrs})
	}
	alice := ident("alice", "laptops", "sales")
	bob := ident("bob", "laptops")
	carol := ident("carol", "phones")
	crm := service("crm", "sales-apps")
	wiki := service("wiki", "public")
	vault := service("vault")
	check := n.create(t, tok, "posture-checks", map[string]any{"typeId": "DOMAIN", "name": "corp", "attributes": []string{"corp"}, "domains": []string{"corp"}})
	router := n.create(t, tok, "edge-routers", map[string]any{"name": "er1", "roleAttributes": []string{"public"}})
	n.create(t, tok, "edge-routers", map[string]any{"name": "er2", "roleAttributes": []string{"private"}})

	policy := func(name string, sem string, identities, services []string) string {
		return n.create(t, tok, "service-policies", map[string]any{"name": name, "type": "Dial", "semantic": sem,
			"identityRoles": identities, "serviceRoles": services, "postureCheckRoles": []string{"#corp"}})
	}
	allOf := policy("allof", "AllOf", []string{"#laptops", "#sales"}, []string{"#sales-apps"})
	anyOf := policy("anyof", "AnyOf", []string{"#sales", "#phones"}, []string{"#public", "#sales-apps"})
	byID := policy("byid", "AllOf", []string{"@" + bob}, []string{"@" + vault})
	everyone := policy("everyone", "AllOf", []string{"#all"}, []string{"@" + wiki})
	empty := policy("empty", "AnyOf", []string{}, []string{"#all"})

	members := func(path string) []string {
		ids, _ := n.listIDs(t, tok, path, "")
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	expect := func(path string, want ...string) {
		t.Helper()
		if got := members(path); !slices.Equal(got, sorted(want...)) {
			t.Errorf("%s: got %v, want %v", path, got, sorted(want...))
		}
	}
	expect("/service-policies/"+allOf+"/identities", alice)
	expect("/service-policies/"+anyOf+"/identities", alice, carol)
	expect("/service-policies/"+byID+"/identities", bob)
	expect("/service-policies/"+everyone+"/identities", alice, bob, carol, n.adminID(t, tok))
	expect("/service-policies/" + empty + "/identities")
	expect("/service-policies/"+anyOf+"/services", crm, wiki)
	expect("/service-policies/"+empty+"/services", crm, wiki, vault)
	expect("/service-policies/"+allOf+"/posture-checks", check)
	expect("/identities/"+alice+"/service-policies", allOf, anyOf, everyone)
	expect("/identities/"+bob+"/service-policies", byID, everyone)
	expect("/identities/"+alice+"/services", crm, wiki)
	expect("/identities/"+bob+"/services", vault, wiki)
	expect("/services/"+wiki+"/service-policies", anyOf, everyone, empty)
	expect("/services/"+wiki+"/identities", alice, bob, carol, n.adminID(t, tok))
	expect("/services/"+crm+"/identities", alice, carol)
	expect("/services/"+vault+"/identities", bob)
	n.create(t, tok, "service-policies", map[string]any{"name": "carol-hosts-vault", "type": "Bind", "identityRoles": []string{"@" + carol}, "serviceRoles": []string{"@" + vault}})
	expect("/services/"+vault+"/identities", bob, carol)
	expect("/services/"+vault+"/identities?policyType=Dial", bob)
	expect("/services/"+vault+"/identities?policyType=bind", carol)
	expectError(t, n.do(t, http.MethodGet, mgmt+"/services/"+vault+"/identities?policyType=Host", tok, nil), 400, posture.CodeCouldNotValidate, "policyType")
	expect("/posture-checks/"+check+"/service-policies", allOf, anyOf, byID, everyone, empty)

	// Display names resolve @id to @name.
	p := n.detail(t, tok, "service-policies", byID)
	if d := p["identityRolesDisplay"].([]any)[0].(map[string]any); d["role"] != "@"+bob || d["name"] != "@bob" {
		t.Errorf("identityRolesDisplay: %v", d)
	}

	// Edge routers an identity may use and those permitted for a service.
	n.create(t, tok, "edge-router-policies", map[string]any{"name": "erp", "identityRoles": []string{"#laptops"}, "edgeRouterRoles": []string{"#public"}})
	n.create(t, tok, "service-edge-router-policies", map[string]any{"name": "serp", "serviceRoles": []string{"@" + crm}, "edgeRouterRoles": []string{"#all"}})
	expect("/identities/"+alice+"/edge-routers", router)
	expect("/identities/" + carol + "/edge-routers")
	if got := members("/services/" + crm + "/edge-routers"); len(got) != 2 {
		t.Errorf("service edge routers: %v", got)
	}

	// Changing an identity's roles changes what selects it.
	if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+bob, tok, map[string]any{"roleAttributes": []string{"laptops", "sales"}}); r.Status != http.StatusOK {
		t.Fatalf("patch identity: %d %s", r.Status, r.Body)
	}
	expect("/identities/"+bob+"/service-policies", allOf, anyOf, byID, everyone)

	// Deleting an entity strips its @id from policies.
	if r := n.do(t, http.MethodDelete, mgmt+"/services/"+vault, tok, nil); r.Status != http.StatusOK {
		t.Fatalf("delete service: %d", r.Status)
	}
	if roles := n.detail(t, tok, "service-policies", byID)["serviceRoles"].([]any); len(roles) != 0 {
		t.Errorf("@vault not stripped: %v", roles)
	}

	// Role attribute lists.
	r := n.do(t, http.MethodGet, mgmt+"/identity-role-attributes?filter="+url.QueryEscape(`id contains "es"`), tok, nil)
	if data, _ := r.envelope(t); string(data) != `["phones","sales"]` {
		t.Errorf("identity role attributes: %s", data)
	}

	// Role syntax is validated.
	for _, bad := range [][]string{{"laptops"}, {"#all", "#x"}, {"@"}} {
		expectError(t, n.do(t, http.MethodPost, mgmt+"/service-policies", tok, map[string]any{"name": "bad", "type": "Dial", "identityRoles": bad}), 400, posture.CodeCouldNotValidate, "identityRoles")
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/service-policies", tok, map[string]any{"name": "bad", "type": "Sideways"}), 400, posture.CodeCouldNotValidate, "type")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/service-policies", tok, map[string]any{"name": "bad", "type": "bind", "semantic": "Most"}), 400, posture.CodeCouldNotValidate, "semantic")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/service-policies/nope/identities", tok, nil), 404, posture.CodeNotFound, "")
}

func (n *testNode) adminID(t testing.TB, tok string) string {
	ids, _ := n.listIDs(t, tok, "/identities", `name = "admin"`)
	return ids[0]
}

// TestIdentitiesServicesConfigs covers the other kinds' rules: identity
// types, the default admin, authenticators, encryptionRequired fixed at
// create, config references.
func TestIdentitiesServicesConfigs(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.adminToken(t)

	id := n.create(t, tok, "identities", map[string]any{"name": "dev1", "type": "device", "isAdmin": false, "externalId": "ext-1", "tags": map[string]any{"site": "hq"}})
	m := n.detail(t, tok, "identities", id)
	if m["typeId"] != "Device" || m["externalId"] != "ext-1" || m["isAdmin"] != false {
		t.Fatalf("identity: %v", m)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities", tok, map[string]any{"name": "dev2", "type": "Toaster"}), 400, posture.CodeCouldNotValidate, "type")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities", tok, map[string]any{"name": "dev2", "externalId": "ext-1"}), 400, posture.CodeCouldNotValidate, "externalId")
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/identities/"+n.adminID(t, tok), tok, nil), 400, posture.CodeCouldNotValidate, "id")
	// Management lists take roleFilter and roleSemantic as policies' roles
	// select.
	n.create(t, tok, "identities", map[string]any{"name": "dev-hq", "type": "device", "isAdmin": false, "roleAttributes": []string{"hq", "laptops"}})
	n.create(t, tok, "identities", map[string]any{"name": "dev-branch", "type": "device", "isAdmin": false, "roleAttributes": []string{"branch", "laptops"}})
	for query, want := range map[string]int{
		"roleFilter=%23hq":      1,
		"roleFilter=%23laptops": 2,
		"roleFilter=%23laptops&roleFilter=%23hq&roleSemantic=AllOf": 1,
		"roleFilter=%23laptops&roleFilter=%23hq&roleSemantic=AnyOf": 2,
		"roleFilter=%40" + id: 1,
	} {
		var env struct{ Data []map[string]any }
		r := n.do(t, http.MethodGet, mgmt+"/identities?"+query, tok, nil)
		if err := json.Unmarshal(r.Body, &env); err != nil || r.Status != http.StatusOK || len(env.Data) != want {
			t.Errorf("identities?%s: %d, %d identities, want %d (%v)", query, r.Status, len(env.Data), want, err)
		}
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities?roleFilter=%23hq&roleSemantic=Bogus", tok, nil), 400, posture.CodeCouldNotValidate, "roleSemantic")
	// Nor is its only authenticator: it keeps a way to sign in.
	adminAuth, _ := n.listIDs(t, tok, "/identities/"+n.adminID(t, tok)+"/authenticators", "")
	if len(adminAuth) != 1 {
		t.Fatalf("the default admin's authenticators: %v", adminAuth)
	}
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/authenticators/"+adminAuth[0], tok, nil), 400, posture.CodeCouldNotValidate, "id")
	n.adminToken(t)

	// A password authenticator for the identity lets it log in (client API).
	authID := n.create(t, tok, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "dev1-user", "password": "dev1-password"})
	if a := n.detail(t, tok, "authenticators", authID); a["username"] != "dev1-user" || a["passwordHash"] != nil {
		t.Fatalf("authenticator view: %v", a)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", tok, map[string]any{"method": "updb", "identityId": id, "username": "other-user", "password": "pw-12345"}), 400, posture.CodeCouldNotValidate, "method")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", tok, map[string]any{"method": "updb", "identityId": "nope", "username": "dev1-user", "password": "pw-12345"}), 400, posture.CodeCouldNotValidate, "identityId")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", tok, map[string]any{"method": "updb", "identityId": id, "username": "abc", "password": "pw-12345"}), 400, posture.CodeCouldNotValidate, "username")
	userTok := n.login(t, "/edge/client/v1", "dev1-user", "dev1-password")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities", userTok, nil), 401, posture.CodeUnauthorized, "")
	if ids, _ := n.listIDs(t, tok, "/identities/"+id+"/authenticators", ""); len(ids) != 1 {
		t.Fatalf("identity authenticators: %v", ids)
	}
	// Deleting the identity ends its credentials and API sessions.
	if r := n.do(t, http.MethodDelete, mgmt+"/identities/"+id, tok, nil); r.Status != http.StatusOK {
		t.Fatalf("delete identity: %d", r.Status)
	}
	expectError(t, n.do(t, http.MethodGet, "/edge/client/v1/current-api-session", userTok, nil), 401, posture.CodeUnauthorized, "")
	expectError(t, n.do(t, http.MethodGet, mgmt+"/authenticators/"+authID, tok, nil), 404, posture.CodeNotFound, "")

	// Configs and services.
	ct := n.create(t, tok, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	cfg := n.create(t, tok, "configs", map[string]any{"name": "crm-intercept", "configTypeId": "intercept.v1", "data": map[string]any{"addresses": []string{"crm.corp"}}})
	expectError(t, n.do(t, http.MethodPost, mgmt+"/configs", tok, map[string]any{"name": "x", "configTypeId": "nope", "data": map[string]any{}}), 400, posture.CodeCouldNotValidate, "configTypeId")
	svc := n.create(t, tok, "services", map[string]any{"name": "crm", "encryptionRequired": false, "configs": []string{"crm-intercept"}})
	s := n.detail(t, tok, "services", svc)
	if s["encryptionRequired"] != false || s["configs"].([]any)[0] != cfg || s["terminatorStrategy"] != "smartrouting" {
		t.Fatalf("service: %v", s)
	}
	expectError(t, n.do(t, http.MethodPut, mgmt+"/services/"+svc, tok, map[string]any{"name": "crm", "encryptionRequired": true}), 400, posture.CodeCouldNotValidate, "encryptionRequired")
	if r := n.do(t, http.MethodPut, mgmt+"/services/"+svc, tok, map[string]any{"name": "crm"}); r.Status != http.StatusOK {
		t.Fatalf("put service: %d %s", r.Status, r.Body)
	}
	if s := n.detail(t, tok, "services", svc); s["encryptionRequired"] != false {
		t.Fatalf("encryptionRequired changed after create: %v", s)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/services", tok, map[string]any{"name": "x", "configs": []string{"nope"}}), 400, posture.CodeCouldNotValidate, "configs[0]")
	n.do(t, http.MethodPatch, mgmt+"/services/"+svc, tok, map[string]any{"configs": []string{cfg}})
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/configs/"+cfg, tok, nil), 409, posture.CodeReferenced, "")
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/config-types/"+ct, tok, nil), 409, posture.CodeReferenced, "")
}

// An "@id" role names an entity that exists: a policy naming none is
// refused (COULD_NOT_VALIDATE on the field), as a delete strips its id from
// policies, so that no policy is left naming nothing; one naming an entity
// of the field's kind is taken.
func TestRoleIDsNameEntities(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	for field, body := range map[string]map[string]any{
		"identityRoles":     {"name": "p1", "type": "Dial", "identityRoles": []string{"@doesNotExist"}, "serviceRoles": []string{"@" + svc}},
		"serviceRoles":      {"name": "p2", "type": "Dial", "identityRoles": []string{"#all"}, "serviceRoles": []string{"@nope"}},
		"postureCheckRoles": {"name": "p3", "type": "Dial", "identityRoles": []string{"#all"}, "serviceRoles": []string{"#all"}, "postureCheckRoles": []string{"@" + svc}},
	} {
		expectError(t, n.do(t, http.MethodPost, mgmt+"/service-policies", admin, body), http.StatusBadRequest, posture.CodeCouldNotValidate, field)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/edge-router-policies", admin, map[string]any{"name": "erp", "identityRoles": []string{"#all"}, "edgeRouterRoles": []string{"@gone"}}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "edgeRouterRoles")
	n.create(t, admin, "service-policies", map[string]any{"name": "ok", "type": "Dial", "identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + svc}})
}
