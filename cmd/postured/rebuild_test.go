package main

import (
	"bytes"
	bin "encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
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
	// A disable ends the API sessions of the identity.
	user := n.endpoint(t, tok, "disabled-user")
	if r := n.do(t, "POST", mgmt+"/identities/"+user.id+"/disable", tok, map[string]any{"durationMinutes": 5}); r.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	expectRebuiltEqual(t, n, cfg)
}

// expectRebuiltEqual stops n, deletes its projections and starts it again
// on cfg: the projection it rebuilds from the log must be byte-equal. The
// node appends a last checkpoint as it stops, which only the rebuilt
// projection applies: it may move the cursor, and nothing else.
func expectRebuiltEqual(t *testing.T, n *testNode, cfg serveCmd) {
	t.Helper()
	live, liveCursor := n.dumpCaughtUp(t), n.store.Cursor()
	n.srv.Close()
	n.Close()
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "projections")); err != nil {
		t.Fatal(err)
	}
	n = startTestNode(t, cfg)
	rebuilt := n.dumpCaughtUp(t)
	if c := n.store.Cursor(); c != liveCursor {
		if err := n.elog.Read(t.Context(), liveCursor+1, c, func(events []posture.Event) error {
			for _, e := range events {
				if e.Type != posture.TypeLogCheckpointed {
					return fmt.Errorf("event %d (%s) appended as the node stopped", e.Seq, e.Type)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		cursorLine := func(seq uint64) string { return fmt.Sprintf("%q %q\n", "c", bin.BigEndian.AppendUint64(nil, seq)) }
		rebuilt = strings.Replace(rebuilt, cursorLine(c), cursorLine(liveCursor), 1)
	}
	if diff := cmp.Diff(live, rebuilt); diff != "" {
		t.Fatalf("the rebuilt projection differs (-live +rebuilt):\n%s", diff)
	}
}

// TestGroupCommittedIngestRebuildsEqual: posture responses and session
// requests of many endpoints at once share messages of the log (group
// commit); every answer saw its own write, and the projection rebuilt from
// that log is byte-equal to the live one.
func TestGroupCommittedIngestRebuildsEqual(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	tok := n.adminToken(t)
	check := n.create(t, tok, "posture-checks", map[string]any{"typeId": "OS", "name": "win", "roleAttributes": []string{"os"},
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	svc := n.create(t, tok, "services", map[string]any{"name": "crm"})
	n.create(t, tok, "service-policies", map[string]any{"name": "p", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"#os"}})
	const endpoints, rounds = 24, 8
	eps := make([]endpoint, endpoints)
	for i := range eps {
		eps[i] = n.endpoint(t, tok, fmt.Sprintf("gc-%02d", i))
	}
	before := n.lastSeq(t)
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			for k := range rounds {
				// Passing and failing in turn: each response a transition.
				version := "10.0.19045"
				if (i+k)%2 == 1 {
					version = "9.0"
				}
				if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token,
					map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": version}); r.Status != http.StatusCreated {
					t.Errorf("posture response: %d %s", r.Status, r.Body)
					return
				}
				// The answer sees the response just written.
				want := http.StatusCreated
				if version == "9.0" {
					want = http.StatusConflict
				}
				if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc, "type": "Dial"}); r.Status != want {
					t.Errorf("session after %s: %d %s, want %d", version, r.Status, r.Body, want)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	// 2 events a round at least (the response, the session created or
	// denied): fewer messages than that means some were batched.
	if written := n.lastSeq(t) - before; written >= 2*endpoints*rounds {
		t.Fatalf("%d messages for at least %d events: nothing was batched", written, 2*endpoints*rounds)
	}
	expectRebuiltEqual(t, n, cfg)
}
