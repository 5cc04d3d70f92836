package main

import (
	"net/http"
	"testing"

	"github.com/seed-0809debe/posture"
)

// TestDefaultAdminFoundAfterRename: a start finds the default admin by the
// admin username, and by reading every identity once it was renamed or
// --admin-username changed; it never creates a second default admin.
func TestDefaultAdminFoundAfterRename(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	admin, err := n.store.IdentityByName(cfg.AdminUsername)
	if err != nil || !admin.IsDefaultAdmin {
		t.Fatalf("the default admin: %+v, %v", admin, err)
	}
	if r := n.do(t, http.MethodPatch, mgmt+"/identities/"+admin.ID, n.adminToken(t), map[string]any{"name": "root"}); r.Status != http.StatusOK {
		t.Fatalf("rename: %d %s", r.Status, r.Body)
	}
	for _, username := range []string{cfg.AdminUsername, "someone-else"} {
		n.srv.Close()
		n.Close()
		cfg.AdminUsername = username
		n = startTestNode(t, cfg)
		ids, err := n.store.Identities()
		if err != nil {
			t.Fatal(err)
		}
		var admins []posture.Identity
		for _, id := range ids {
			if id.IsDefaultAdmin {
				admins = append(admins, id)
			}
		}
		if len(admins) != 1 || admins[0].ID != admin.ID || admins[0].Name != "root" {
			t.Fatalf("--admin-username %s: default admins %+v, want only %s renamed root", username, admins, admin.ID)
		}
		n.adminToken(t) // still logs in with its password
	}
}
