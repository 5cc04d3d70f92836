package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestConsoleExplainDeletedIdentity: laptop-1 is deleted and an identity
// named like its id is created. Explain at laptop-1's denial, by its id,
// still explains laptop-1, as the API's policy advice does; now, the id
// names no identity and the one named so is explained, said with its id.
func TestConsoleExplainDeletedIdentity(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	admin := n.adminToken(t)
	if r := n.do(t, http.MethodDelete, mgmt+"/identities/"+st.identity, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete laptop-1: %d %s", r.Status, r.Body)
	}
	named := n.create(t, admin, "identities", map[string]any{"name": st.identity, "type": "Device", "roleAttributes": []string{"laptops"}})
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	b.signIn("admin", testAdminPassword)

	at := url.QueryEscape(st.deniedAt.UTC().Format(time.RFC3339Nano))
	p := b.get("/console/explain?identity=" + st.identity + "&service=" + st.service + "&at=" + at)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Decision: <strong>denied</strong>") ||
		!strings.Contains(p.Body, "<h2>identity "+st.identity+" (deleted since) → crm (Dial)") ||
		!strings.Contains(p.Body, `name="identity" value="`+st.identity+`"`) || strings.Contains(p.Body, named) {
		t.Fatalf("explain of deleted laptop-1 at its denial: %d\n%s", p.Status, p.Body)
	}
	p = b.get("/console/explain?identity=" + st.identity + "&service=" + st.service)
	want := "&#34;" + st.identity + "&#34; is not the id of an identity now, so it is taken as a name: explaining the identity named " + st.identity + " (id " + named + ")."
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="resolved"`) || !strings.Contains(p.Body, want) ||
		!strings.Contains(p.Body, `name="identity" value="`+named+`"`) {
		t.Fatalf("explain now of the id of deleted laptop-1: %d, want %s\n%s", p.Status, want, p.Body)
	}
}
