package main

import (
	"net/http"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestServiceSubRoutesHideInvisibleServices: for a non-admin, the edge
// routers and the terminators of a service it may not see answer 404, as
// GET /services/:id does and as a service that does not exist does, so
// that neither the service nor its existence leaks; a granted service
// answers 200.
func TestServiceSubRoutesHideInvisibleServices(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	granted := n.create(t, admin, "services", map[string]any{"name": "granted", "encryptionRequired": true})
	hidden := n.create(t, admin, "services", map[string]any{"name": "hidden", "encryptionRequired": true})
	n.create(t, admin, "service-policies", map[string]any{"name": "everyone-dials-granted", "type": "Dial", "semantic": "AnyOf",
		"identityRoles": []string{"#all"}, "serviceRoles": []string{"@" + granted}})
	user := n.createUser(t, "plain-user", "plain-password", false)

	for _, sub := range []string{"", "/edge-routers", "/terminators"} {
		if r := n.do(t, http.MethodGet, api.ClientBase+"/services/"+granted+sub, user, nil); r.Status != http.StatusOK {
			t.Errorf("granted service%s: %d %s", sub, r.Status, r.Body)
		}
		for _, id := range []string{hidden, posture.NewID()} {
			r := n.do(t, http.MethodGet, api.ClientBase+"/services/"+id+sub, user, nil)
			if _, e := r.envelope(t); r.Status != http.StatusNotFound || e.Code != posture.CodeNotFound {
				t.Errorf("service %s%s: got %d %s, want 404 NOT_FOUND", id, sub, r.Status, r.Body)
			}
		}
		// An admin sees every service that exists.
		if sub != "" {
			if r := n.do(t, http.MethodGet, api.ClientBase+"/services/"+hidden+sub, admin, nil); r.Status != http.StatusOK {
				t.Errorf("admin, service%s: %d %s", sub, r.Status, r.Body)
			}
		}
	}
}
