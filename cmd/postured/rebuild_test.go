package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture/api"
)

// dumpCaughtUp waits until the projection has applied the whole log and
// returns its dump.
func (n *testNode) dumpCaughtUp(t testing.TB) string {
	t.Helper()
	last, err := n.elog.LastSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.store.WaitFor(t.Context(), last); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := n.store.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRebuildIsByteEqual deletes the projections folder of a node that has
// served writes; the restarted node rebuilds it from the log to the same
// bytes.
func TestRebuildIsByteEqual(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	for i := range 5 {
		tok := n.adminToken(t)
		if i%2 == 0 {
			n.do(t, "DELETE", api.ClientBase+"/current-api-session", tok, nil)
		}
	}
	n.createUser(t, "rebuild-user", "user-password", false)
	// Management changes of every kind, including updates and deletes.
	tok := n.adminToken(t)
	id := n.create(t, tok, "identities", map[string]any{"name": "laptop", "type": "Device", "roleAttributes": []string{"laptops"}})
	check := n.create(t, tok, "posture-checks", map[string]any{"typeId": "OS", "name": "win", "attributes": []string{"os"}, "operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	mfa := n.create(t, tok, "posture-checks", map[string]any{"typeId": "MFA", "timeoutSeconds": 60})
	svc := n.create(t, tok, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	n.create(t, tok, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#laptops", "@" + id}, "serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + mfa, "#os"}})
	n.create(t, tok, "edge-routers", map[string]any{"name": "er", "roleAttributes": []string{"public"}})
	n.create(t, tok, "edge-router-policies", map[string]any{"name": "erp", "identityRoles": []string{"#all"}, "edgeRouterRoles": []string{"#public"}})
	n.do(t, "PATCH", mgmt+"/posture-checks/"+check, tok, map[string]any{"attributes": []string{"os", "windows"}})
	n.do(t, "DELETE", mgmt+"/posture-checks/"+mfa, tok, nil)
	n.do(t, "PUT", mgmt+"/identities/"+id, tok, map[string]any{"name": "laptop-renamed", "type": "Device"})
	before := n.dumpCaughtUp(t)
	n.srv.Close()
	n.Close()

	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "projections")); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	after := n.dumpCaughtUp(t)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("the rebuilt projection differs (-before +after):\n%s", diff)
	}
}
