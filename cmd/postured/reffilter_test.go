package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestFiltersOnReferences: a filter on a field that is a reference to
// another entity (an OpenZiti controller's foreign key) compares its id, on
// every list that has one: authenticators, enrollments, API sessions and
// sessions by identity, sessions by service and apiSession, identities by
// type (an identity type's id is its name) and configs by type (the
// config's configType); the reference's name and id stay fields of their
// own, and filterableFields name the references.
func TestFiltersOnReferences(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	bob := n.endpoint(t, admin, "bobby", "laptops")
	carol := n.endpoint(t, admin, "carol", "laptops")
	dave := n.create(t, admin, "identities", map[string]any{"name": "dave", "type": "Default", "enrollment": map[string]any{"ott": true}})
	n.create(t, admin, "identities", map[string]any{"name": "erin", "type": "User", "enrollment": map[string]any{"ott": true}})
	crm := n.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	wiki := n.create(t, admin, "services", map[string]any{"name": "wiki", "roleAttributes": []string{"apps"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "dial", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	bobCRM, carolWiki := n.dial(t, bob.token, crm), n.dial(t, carol.token, wiki)
	host := n.create(t, admin, "config-types", map[string]any{"name": "host.v1", "schema": map[string]any{"type": "object"}})
	intercept := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	hostCfg := n.create(t, admin, "configs", map[string]any{"name": "crm-host", "configTypeId": host, "data": map[string]any{"port": 443}})
	interceptCfg := n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": intercept, "data": map[string]any{"port": 80}})

	sorted := func(ids []string) []string { return slices.Sorted(slices.Values(ids)) }
	// idsWhere lists path whole and answers the ids of the entities whose
	// field holds id, sorted.
	idsWhere := func(path, field, id string) []string {
		t.Helper()
		var all []map[string]any
		n.getJSON(t, mgmt+path+"?limit=500", admin, &all)
		var out []string
		for _, e := range all {
			if e[field] == id {
				out = append(out, e["id"].(string))
			}
		}
		return sorted(out)
	}
	bobAuths := idsWhere("/authenticators", "identityId", bob.id)
	daveEnrollments := idsWhere("/enrollments", "identityId", dave)
	if len(bobAuths) != 1 || len(daveEnrollments) != 1 {
		t.Fatalf("bob's authenticators %v, dave's enrollments %v", bobAuths, daveEnrollments)
	}
	defaults := idsWhere("/identities", "typeId", "Default")
	if !slices.Contains(defaults, dave) || slices.Contains(defaults, bob.id) {
		t.Fatalf("identities of type Default: %v", defaults)
	}

	for _, c := range []struct {
		path, filter string
		want         []string
	}{
		{"/authenticators", `identity="` + bob.id + `"`, bobAuths},
		{"/authenticators", `identity="` + bob.id + `" and method="updb"`, bobAuths},
		{"/authenticators", `identity.name="bobby"`, bobAuths},
		{"/authenticators", `identity.id="` + bob.id + `"`, bobAuths},
		{"/authenticators", `identity in ["` + bob.id + `", "nobody"] and method="updb"`, bobAuths},
		{"/authenticators", `identity="bobby"`, nil},
		{"/enrollments", `identity="` + dave + `"`, daveEnrollments},
		{"/api-sessions", `identity="` + bob.id + `"`, []string{bob.apiSessionID}},
		{"/api-sessions", `identity="` + carol.id + `"`, []string{carol.apiSessionID}},
		{"/sessions", `identity="` + bob.id + `"`, []string{bobCRM}},
		{"/sessions", `service="` + wiki + `"`, []string{carolWiki}},
		{"/sessions", `service!="` + wiki + `"`, []string{bobCRM}},
		{"/sessions", `not service="` + crm + `"`, []string{carolWiki}},
		{"/sessions", `apiSession="` + bob.apiSessionID + `"`, []string{bobCRM}},
		{"/sessions", `service.name="crm" and identity="` + bob.id + `"`, []string{bobCRM}},
		{"/sessions", `isEmpty(service)`, nil},
		{"/identities", `type="Default"`, defaults},
		{"/identities", `type.name="Default"`, defaults},
		{"/identities", `type="Device" and name in ["bobby", "carol", "dave"]`, sorted([]string{bob.id, carol.id})},
		{"/configs", `type="` + host + `"`, []string{hostCfg}},
		{"/configs", `type.name="intercept.v1"`, []string{interceptCfg}},
		{"/configs", `type in ["` + host + `", "` + intercept + `"]`, sorted([]string{hostCfg, interceptCfg})},
		{"/configs", `configType="` + intercept + `"`, []string{interceptCfg}},
		{"/config-types/" + host + "/configs", `type="` + host + `"`, []string{hostCfg}},
	} {
		ids, total := n.listIDs(t, admin, c.path, c.filter)
		if got := sorted(ids); total != len(c.want) || !cmp.Equal(got, sorted(c.want), cmpEmpty) {
			t.Errorf("%s %s: %v (%d), want %v", c.path, c.filter, got, total, c.want)
		}
	}

	// A sort on a reference orders by its id.
	if ids, _ := n.listIDs(t, admin, "/configs", `true sort by type desc`); len(ids) != 2 || ids[0] != map[bool]string{true: hostCfg, false: interceptCfg}[host > intercept] {
		t.Errorf("configs sorted by type desc: %v (host.v1 %s, intercept.v1 %s)", ids, host, intercept)
	}
	r := n.do(t, http.MethodGet, mgmt+"/sessions?sort="+url.QueryEscape("service asc"), admin, nil)
	var sessions struct {
		Data []struct{ ID string } `json:"data"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &sessions) != nil || len(sessions.Data) != 2 ||
		sessions.Data[0].ID != map[bool]string{true: bobCRM, false: carolWiki}[crm < wiki] {
		t.Errorf("sessions sorted by service: %d %s", r.Status, r.Body)
	}

	// filterableFields name the references a filter compares by id.
	for path, want := range map[string][]string{
		"/authenticators": {"identity"}, "/enrollments": {"identity"}, "/api-sessions": {"identity"},
		"/sessions": {"identity", "service", "apiSession"}, "/identities": {"type"}, "/configs": {"type"},
	} {
		r := n.do(t, http.MethodGet, mgmt+path, admin, nil)
		var env struct {
			Meta api.Meta `json:"meta"`
		}
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &env) != nil {
			t.Fatalf("%s: %d %s", path, r.Status, r.Body)
		}
		for _, f := range want {
			if !slices.Contains(env.Meta.FilterableFields, f) {
				t.Errorf("%s: filterableFields %v lack %q", path, env.Meta.FilterableFields, f)
			}
		}
	}
	// A field no config has is still refused.
	expectError(t, n.do(t, http.MethodGet, mgmt+"/configs?filter="+url.QueryEscape(`kind="x"`), admin, nil), http.StatusBadRequest, posture.CodeInvalidFilter, "")
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

// TestCLIPasswordReset: `ziti edge update authenticator updb --identity
// bobby -p NEW` (ziti 1.1.15) finds bobby by id or name, then his password
// authenticator with the filter identity="<id>" and method="updb", expects
// exactly one, and patches its password.
func TestCLIPasswordReset(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	bob := n.endpoint(t, admin, "bobby", "laptops")
	n.endpoint(t, admin, "carol", "laptops")

	if ids, _ := n.listIDs(t, admin, "/identities", `id="bobby"`); len(ids) != 0 {
		t.Fatalf(`id="bobby": %v`, ids)
	}
	ids, _ := n.listIDs(t, admin, "/identities", `name="bobby"`)
	if len(ids) != 1 || ids[0] != bob.id {
		t.Fatalf(`name="bobby": %v, want %s`, ids, bob.id)
	}
	r := n.do(t, http.MethodGet, mgmt+"/authenticators?filter="+url.QueryEscape(`identity="`+ids[0]+`" and method="updb"`), admin, nil)
	var auths struct {
		Data []struct {
			ID         string `json:"id"`
			IdentityID string `json:"identityId"`
		} `json:"data"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &auths) != nil || len(auths.Data) != 1 || auths.Data[0].IdentityID != bob.id {
		t.Fatalf("incorrect number of results, expected 1: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPatch, mgmt+"/authenticators/"+auths.Data[0].ID, admin, map[string]any{"password": "bobby-new-password"}); r.Status != http.StatusOK {
		t.Fatalf("patch the password: %d %s", r.Status, r.Body)
	}
	n.login(t, clientAPI, "bobby", "bobby-new-password")
	if r := n.passwordLogin(t, "bobby", "bobby-password"); r.Status == http.StatusOK {
		t.Fatal("the old password still logs in")
	}
}
