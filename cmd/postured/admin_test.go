package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestAdminRecover: a holder of the default admin's session token enrolls
// MFA on it, so that its owner's password alone no longer lets it in and no
// other admin may remove it. On the stopped node, an operator's `admin
// recover` removes the MFA and ends its API sessions (the stolen token
// stops working), and with POSTURED_ADMIN_PASSWORD sets a new password;
// each event names the operator.
func TestAdminRecover(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	stolen := n.adminToken(t)
	n.enrollAndVerifyMFA(t, stolen, clk)
	partial := n.login(t, api.ManagementBase, "admin", testAdminPassword)
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities", partial, nil), 401, posture.CodeUnauthorized, "")
	n.srv.Close()
	n.Close()

	data := "--data-dir=" + cfg.DataDir
	out, err := command(t, "admin", "recover", data, "--actor", "ops@host")
	if err != nil || !strings.Contains(out, "recovered by ops@host: MFA removed (sequence ") || !strings.Contains(out, "API sessions ended") {
		t.Fatalf("admin recover: %v %q", err, out)
	}
	if out, err := command(t, "admin", "recover", data); err != nil || !strings.HasPrefix(out, "nothing to recover for the default admin") {
		t.Fatalf("admin recover again: %v %q", err, out)
	}
	t.Setenv("POSTURED_ADMIN_PASSWORD", "1234")
	if _, err := command(t, "admin", "recover", data); err == nil || !strings.Contains(err.Error(), "POSTURED_ADMIN_PASSWORD") {
		t.Fatalf("a short password: %v", err)
	}
	t.Setenv("POSTURED_ADMIN_PASSWORD", "recovered-password")
	if out, err := command(t, "admin", "recover", data); err != nil || !strings.Contains(out, "password of admin set") {
		t.Fatalf("admin recover with a password: %v %q", err, out)
	}

	n = startTestNode(t, cfg)
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities", stolen, nil), 401, posture.CodeUnauthorized, "")
	if r := n.do(t, http.MethodPost, mgmt+"/authenticate?method=password", "", map[string]string{"username": "admin", "password": testAdminPassword}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d %s", r.Status, r.Body)
	}
	tok := n.login(t, api.ManagementBase, "admin", "recovered-password")
	if r := n.do(t, http.MethodGet, mgmt+"/identities", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("the recovered admin (no MFA asked): %d %s", r.Status, r.Body)
	}
	var removed, set bool
	if err := n.elog.Read(t.Context(), 1, 0, func(b []posture.Event) error {
		for _, e := range b {
			p, err := e.Decode()
			if err != nil {
				return err
			}
			switch p := p.(type) {
			case posture.MFARemoved:
				removed = removed || e.Actor == "ops@host" && p.By == posture.MFARemovedByOperator
			case posture.Updated[posture.Authenticator]:
				set = set || p.Entity.Username == "admin" && p.Entity.PasswordHashSealed != "" && !strings.Contains(string(e.Data), "argon2")
			}
		}
		return nil
	}); err != nil || !removed || !set {
		t.Fatalf("the recovery's events: MFA removed by the operator %v, password set sealed %v (%v)", removed, set, err)
	}
	// The admin's timeline says what changed its credentials, and who.
	id, err := n.store.IdentityByName("admin")
	if err != nil {
		t.Fatal(err)
	}
	n.srv.Close()
	n.Close()
	admin, err := command(t, "audit", "identity", id.ID, data)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`("admin") created, by postured`, "MFA enrollment started, by the identity itself",
		"MFA enrolled (verified with a code), by the identity itself", "MFA removed, by ops@host", `("admin") changed: password, by `,
	} {
		if !strings.Contains(admin, want) {
			t.Errorf("the admin's timeline does not say %q:\n%s", want, admin)
		}
	}
}

// TestAdminRecoverOnARunningNode: admin recover through a running node's
// NATS port ends every API session of the default admin, also that of a
// login with the old password recorded after the command read the log (it
// used to end only the sessions its replay saw), and the old password no
// longer logs in.
func TestAdminRecoverOnARunningNode(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	n := startTestNode(t, cfg)
	stolen := n.adminToken(t)
	var raced string
	recoverReplayed = func() { raced = n.adminToken(t) }
	t.Cleanup(func() { recoverReplayed = func() {} })
	t.Setenv("POSTURED_ADMIN_PASSWORD", "recovered-password")
	out, err := command(t, "admin", "recover", "--nats-url", "tls://"+cfg.NatsListen,
		"--nats-tls-ca", filepath.Join(cfg.DataDir, "pki", "ca.pem"),
		"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", "postured.nk"),
		"--secrets-key-file", filepath.Join(cfg.DataDir, "pki", "secrets.key"), "--actor", "ops@host")
	if err != nil || !strings.Contains(out, "password of admin set") || !strings.Contains(out, "its API sessions ended") {
		t.Fatalf("admin recover: %v %q", err, out)
	}
	if raced == "" {
		t.Fatal("no login while admin recover ran")
	}
	for deadline := time.Now().Add(10 * time.Second); n.do(t, http.MethodGet, mgmt+"/identities", stolen, nil).Status != http.StatusUnauthorized; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stolen token still works")
		}
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities", raced, nil), 401, posture.CodeUnauthorized, "")
	if r := n.do(t, http.MethodPost, mgmt+"/authenticate?method=password", "", map[string]string{"username": "admin", "password": testAdminPassword}); r.Status != http.StatusUnauthorized {
		t.Fatalf("the old password: %d %s", r.Status, r.Body)
	}
	tok := n.login(t, api.ManagementBase, "admin", "recovered-password")
	if r := n.do(t, http.MethodGet, mgmt+"/identities", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("the recovered admin: %d %s", r.Status, r.Body)
	}
}
