package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestEveryOperationMatchesItsDocument calls every operation of both APIs
// at least once with a request that succeeds (and the operations of
// entities once more for a missing id), so that the contract transport
// validates each request and answer against the document: no operation
// can drift from it unnoticed because no other test happens to call it.
func TestEveryOperationMatchesItsDocument(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ok := func(method, path, tok string, body any, want int) response {
		t.Helper()
		r := n.do(t, method, path, tok, body)
		if r.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.Status, r.Body, want)
		}
		return r
	}

	// Informational operations, on both APIs.
	for _, base := range []string{clientAPI, mgmt} {
		for _, p := range []string{"/", "/version", "/enumerated-capabilities", "/protocols", "/specs", "/specs/edge-client", "/specs/edge-management/spec"} {
			ok(http.MethodGet, base+p, "", nil, http.StatusOK)
		}
		ok(http.MethodGet, base+"/specs/nope", "", nil, http.StatusNotFound)
	}
	// Each API's own document at /swagger.json, where OpenZiti serves it.
	for base, title := range map[string]string{clientAPI: "postured Edge Client API", mgmt: "postured Management API"} {
		var doc struct{ Info struct{ Title string } }
		if r := ok(http.MethodGet, base+"/swagger.json", "", nil, http.StatusOK); json.Unmarshal(r.Body, &doc) != nil || doc.Info.Title != title {
			t.Fatalf("%s/swagger.json: %.300s", base, r.Body)
		}
	}
	ok(http.MethodGet, mgmt+"/current-api-session", admin, nil, http.StatusOK)

	// Every kind of the management API: create, list, detail, update,
	// patch, its sub-lists, delete; and a missing id.
	ct := n.create(t, admin, "config-types", map[string]any{"name": "intercept.v1", "schema": map[string]any{"type": "object"}})
	cfg := n.create(t, admin, "configs", map[string]any{"name": "crm-intercept", "configTypeId": ct, "data": map[string]any{"port": 443}})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm", "encryptionRequired": true, "roleAttributes": []string{"apps"}, "configs": []string{cfg}})
	check := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa", "roleAttributes": []string{"strict"}, "timeoutSeconds": 600, "promptOnWake": true})
	ep := n.endpoint(t, admin, "laptop", "laptops")
	router := n.create(t, admin, "edge-routers", map[string]any{"name": "er1", "roleAttributes": []string{"public"}, "hostname": "er1.example"})
	sp := n.create(t, admin, "service-policies", map[string]any{"name": "dial-crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{}})
	erp := n.create(t, admin, "edge-router-policies", map[string]any{"name": "erp", "identityRoles": []string{"#all"}, "edgeRouterRoles": []string{"#public"}})
	serp := n.create(t, admin, "service-edge-router-policies", map[string]any{"name": "serp", "serviceRoles": []string{"#all"}, "edgeRouterRoles": []string{"#all"}})
	extjwt := n.create(t, admin, "external-jwt-signers", map[string]any{"name": "idp", "issuer": "https://idp.example", "audience": "postured",
		"jwksEndpoint": "https://idp.example/jwks", "enabled": true, "kid": "k1", "externalAuthUrl": "https://idp.example/auth", "scopes": []string{"openid"}, "clientId": "postured"})
	enr := n.create(t, admin, "enrollments", map[string]any{"identityId": ep.id, "method": "ott", "expiresAt": "2099-01-01T00:00:00Z"})

	kinds := []struct {
		collection, id string
		update         map[string]any
		patch          map[string]any
		subs           []string
	}{
		{"config-types", ct, map[string]any{"name": "intercept.v2"}, map[string]any{"tags": map[string]any{"a": "b"}}, []string{"configs"}},
		{"configs", cfg, map[string]any{"name": "crm-intercept", "data": map[string]any{"port": 8443}}, map[string]any{"name": "crm-intercept-2"}, []string{"services"}},
		{"services", svc, map[string]any{"name": "crm", "roleAttributes": []string{"apps"}, "configs": []string{cfg}}, map[string]any{"maxIdleTimeMillis": 1000},
			[]string{"configs", "edge-routers", "service-edge-router-policies", "service-policies"}},
		{"posture-checks", check, map[string]any{"typeId": "MFA", "name": "mfa", "timeoutSeconds": 300}, map[string]any{"promptOnUnlock": true}, []string{"service-policies"}},
		{"identities", ep.id, map[string]any{"name": "laptop", "type": "Device", "isAdmin": false, "roleAttributes": []string{"laptops"}}, map[string]any{"tags": map[string]any{"owner": "it"}},
			[]string{"authenticators", "edge-router-policies", "edge-routers", "enrollments", "failed-service-requests", "posture-data", "posture-history", "service-policies", "services"}},
		{"edge-routers", router, map[string]any{"name": "er1", "roleAttributes": []string{"public"}, "cost": 10}, map[string]any{"noTraversal": true},
			[]string{"edge-router-policies", "service-edge-router-policies"}},
		{"service-policies", sp, map[string]any{"name": "dial-crm", "type": "Dial", "semantic": "AnyOf", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + svc}},
			map[string]any{"tags": map[string]any{"team": "crm"}}, []string{"identities", "posture-checks", "services"}},
		{"edge-router-policies", erp, map[string]any{"name": "erp", "identityRoles": []string{"#all"}, "edgeRouterRoles": []string{"#all"}}, map[string]any{"semantic": "AnyOf"},
			[]string{"edge-routers", "identities"}},
		{"service-edge-router-policies", serp, map[string]any{"name": "serp", "serviceRoles": []string{"#all"}, "edgeRouterRoles": []string{"@" + router}}, map[string]any{"semantic": "AllOf"},
			[]string{"edge-routers", "services"}},
		{"external-jwt-signers", extjwt, map[string]any{"name": "idp", "issuer": "https://idp.example", "audience": "postured", "jwksEndpoint": "https://idp.example/jwks", "enabled": true},
			map[string]any{"enabled": false}, nil},
	}
	for _, k := range kinds {
		base := mgmt + "/" + k.collection
		ok(http.MethodGet, base, admin, nil, http.StatusOK)
		ok(http.MethodGet, base+"/"+k.id, admin, nil, http.StatusOK)
		ok(http.MethodPut, base+"/"+k.id, admin, k.update, http.StatusOK)
		ok(http.MethodPatch, base+"/"+k.id, admin, k.patch, http.StatusOK)
		for _, sub := range k.subs {
			ok(http.MethodGet, base+"/"+k.id+"/"+sub, admin, nil, http.StatusOK)
		}
		ok(http.MethodGet, base+"/x0000000x", admin, nil, http.StatusNotFound)
		ok(http.MethodPut, base+"/x0000000x", admin, k.update, http.StatusNotFound)
		ok(http.MethodPatch, base+"/x0000000x", admin, k.patch, http.StatusNotFound)
		ok(http.MethodDelete, base+"/x0000000x", admin, nil, http.StatusNotFound)
	}
	for _, p := range []string{"/identity-role-attributes", "/service-role-attributes", "/edge-router-role-attributes", "/posture-check-role-attributes",
		"/posture-check-types", "/posture-check-types/MFA", "/authenticators", "/enrollments", "/enrollments/" + enr, "/cas", "/controllers",
		"/identities/" + ep.id + "/policy-advice/" + svc, "/identity-types", "/identity-types/Device", "/current-identity/authenticators",
		"/auth-policies", "/auth-policies/default", "/services/" + svc + "/identities", "/network-jwts"} {
		ok(http.MethodGet, mgmt+p, admin, nil, http.StatusOK)
	}
	ok(http.MethodGet, mgmt+"/identity-types/Nobody", admin, nil, http.StatusNotFound)
	ok(http.MethodGet, mgmt+"/auth-policies/strict", admin, nil, http.StatusNotFound)
	// Every identity names the default auth policy, which says what logins
	// allow; it is read, not changed.
	if d := n.detail(t, admin, "auth-policies", "default"); d["primary"].(map[string]any)["updb"].(map[string]any)["minPasswordLength"] != float64(api.MinPassword) {
		t.Errorf("the default auth policy: %v", d)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/auth-policies", admin, map[string]any{"name": "strict"}), http.StatusMethodNotAllowed, posture.CodeMethodNotAllowed, "")
	// Authenticators: an admin sets another identity's, and its own as the
	// client API lets any identity do.
	epAuth, _ := n.listIDs(t, admin, "/identities/"+ep.id+"/authenticators", "")
	auth := epAuth[0]
	ok(http.MethodPut, mgmt+"/authenticators/"+auth, admin, map[string]any{"username": "laptop", "password": "laptop-password-2"}, http.StatusOK)
	ok(http.MethodPatch, mgmt+"/authenticators/"+auth, admin, map[string]any{"tags": map[string]any{"set": "by admin"}}, http.StatusOK)
	ok(http.MethodPatch, mgmt+"/authenticators/x0000000x", admin, map[string]any{"password": "whatever"}, http.StatusNotFound)
	ids, _ := n.listIDs(t, admin, "/current-identity/authenticators", "")
	own := ids[0]
	ok(http.MethodGet, mgmt+"/current-identity/authenticators/"+own, admin, nil, http.StatusOK)
	ok(http.MethodPatch, mgmt+"/current-identity/authenticators/"+own, admin, map[string]any{"currentPassword": testAdminPassword, "tags": map[string]any{"a": "b"}}, http.StatusOK)
	ok(http.MethodPut, mgmt+"/current-identity/authenticators/"+own, admin, map[string]any{"currentPassword": testAdminPassword, "username": "admin", "password": testAdminPassword}, http.StatusOK)

	// The client API: services, sessions, the service's routers and
	// terminators, and the admin-only service operations.
	ok(http.MethodGet, clientAPI+"/services", ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/services/"+svc, ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/services/"+svc+"/edge-routers", ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/services/"+svc+"/terminators", ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/services/x0000000x", ep.token, nil, http.StatusNotFound)
	ok(http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": "0", "typeId": "ENDPOINT_STATE", "woken": true}, http.StatusCreated)
	data, _ := ok(http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc, "type": "Dial"}, http.StatusCreated).envelope(t)
	var sess struct{ ID string }
	if err := json.Unmarshal(data, &sess); err != nil {
		t.Fatal(err)
	}
	ok(http.MethodGet, clientAPI+"/sessions", ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/sessions/"+sess.ID, ep.token, nil, http.StatusOK)
	// Every identity's API sessions and sessions, on the management API.
	for _, p := range []string{"/api-sessions", "/api-sessions/" + ep.apiSessionID, "/sessions", "/sessions/" + sess.ID} {
		ok(http.MethodGet, mgmt+p, admin, nil, http.StatusOK)
	}
	ok(http.MethodDelete, clientAPI+"/sessions/"+sess.ID, ep.token, nil, http.StatusOK)
	ok(http.MethodDelete, mgmt+"/sessions/"+sess.ID, admin, nil, http.StatusNotFound)
	ok(http.MethodGet, clientAPI+"/sessions/"+sess.ID, ep.token, nil, http.StatusNotFound)
	ok(http.MethodGet, clientAPI+"/current-identity/edge-routers", ep.token, nil, http.StatusOK)
	ok(http.MethodGet, clientAPI+"/current-api-session/service-updates", ep.token, nil, http.StatusOK)
	clientAdmin := n.login(t, api.ClientBase, "admin", testAdminPassword)
	ok(http.MethodPut, clientAPI+"/services/"+svc, clientAdmin, map[string]any{"name": "crm", "roleAttributes": []string{"apps"}}, http.StatusOK)
	ok(http.MethodPatch, clientAPI+"/services/"+svc, clientAdmin, map[string]any{"terminatorStrategy": "weighted"}, http.StatusOK)

	// Deletes, children first.
	for _, p := range []string{"/enrollments/" + enr, "/external-jwt-signers/" + extjwt, "/service-edge-router-policies/" + serp, "/edge-router-policies/" + erp,
		"/service-policies/" + sp, "/edge-routers/" + router, "/posture-checks/" + check, "/identities/" + ep.id} {
		ok(http.MethodDelete, mgmt+p, admin, nil, http.StatusOK)
	}
	ok(http.MethodDelete, clientAPI+"/services/"+svc, clientAdmin, nil, http.StatusOK)
	ok(http.MethodDelete, mgmt+"/configs/"+cfg, admin, nil, http.StatusOK)
	ok(http.MethodDelete, mgmt+"/config-types/"+ct, admin, nil, http.StatusOK)
	ok(http.MethodDelete, mgmt+"/api-sessions/"+ep.apiSessionID, admin, nil, http.StatusNotFound) // ended with its identity
	var clientAdminSession struct{ ID string }
	n.getJSON(t, clientAPI+"/current-api-session", clientAdmin, &clientAdminSession)
	ok(http.MethodDelete, mgmt+"/api-sessions/"+clientAdminSession.ID, admin, nil, http.StatusOK)
	ok(http.MethodDelete, mgmt+"/current-api-session", admin, nil, http.StatusOK)
}
