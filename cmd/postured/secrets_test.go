package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/secrets"
)

// needle is a secret a test looks for, by name.
type needle struct {
	name  string
	value []byte
}

// secretNeedles are the forms of a secret that must not be found: the
// value, and for a JWT its signature (the part no other field repeats).
func secretNeedles(name, value string) []needle {
	if value == "" {
		panic("empty secret " + name)
	}
	out := []needle{{name, []byte(value)}}
	if parts := strings.Split(value, "."); len(parts) == 3 {
		out = append(out, needle{name + " (signature)", []byte(parts[2])})
	}
	return out
}

// scanDir reads every file under dir and returns, for each needle found,
// the files that hold it.
func scanDir(t *testing.T, dir string, needles []needle) map[string][]string {
	t.Helper()
	found := map[string][]string{}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil // a file removed while the walk ran (a compaction)
		}
		if err != nil {
			return err
		}
		files++
		for _, nd := range needles {
			if bytes.Contains(data, nd.value) {
				rel, _ := filepath.Rel(dir, path)
				found[nd.name] = append(found[nd.name], rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no file under %s", dir)
	}
	return found
}

// TestNoSecretInClear enrolls MFA, creates OTT enrollments (one used), an
// edge router, a CA and a session, then scans every byte of the data
// directory (the log store, the key bucket, the projections) and every
// `events tail` line for the secrets the API handed out: the TOTP secret
// (base32 and raw), the one-time tokens, the JWTs, the API session
// tokens and the password hashes. None is found, nor in the node's debug log, while a marker stored in clear is found in both
// stores (the scan reads what it must). The secrets still work.
func TestNoSecretInClear(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	var logs lockedBuffer
	clk := useFakeClock(&cfg)
	n := startTestNodeLog(t, cfg, slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	admin := n.adminToken(t)
	tail := follow(t, "--nats-url", "tls://"+cfg.NatsListen, "--nats-tls-ca", filepath.Join(cfg.DataDir, "pki", "ca.pem"),
		"--nats-nkey", filepath.Join(cfg.DataDir, "nats", "creds", "auditor.nk"), "--from", fmt.Sprint(n.lastSeq(t)+1))

	marker := "clear-marker-" + posture.NewID()
	ep := n.endpoint(t, admin, marker, "laptops")

	// MFA: enrolled and verified; the recovery codes are shown once.
	_, secret := n.enrollAndVerifyMFA(t, ep.token, clk)
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	partial, s := n.loginSession(t, marker, marker+"-password")
	if !s.IsMFARequired {
		t.Fatal("login needs no MFA after enrollment")
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa: %d %s", r.Status, r.Body)
	}

	// One-time enrollments: one pending, one used.
	_, pending := n.enrolledIdentity(t, admin, "pending-"+marker, map[string]any{"ott": true})
	_, used := n.enrolledIdentity(t, admin, "used-"+marker, map[string]any{"ott": true})
	n.enrollOTT(t, used.Token)
	// An edge router's enrollment and a CA's verification token.
	router := n.detail(t, admin, "edge-routers", n.create(t, admin, "edge-routers", map[string]any{"name": "router-" + marker}))
	ca := n.caDetail(t, admin, n.addCA(t, admin, "ca-"+marker, newTestCA(t, "ca-"+marker)))

	// A session, last.
	svc := n.create(t, admin, "services", map[string]any{"name": "svc-" + marker, "roleAttributes": []string{"apps"}})
	n.create(t, admin, "service-policies", map[string]any{"name": "p-" + marker, "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", partial, map[string]any{"serviceId": svc})
	if r.Status != http.StatusCreated {
		t.Fatalf("session: %d %s", r.Status, r.Body)
	}
	var session struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	data, _ := r.envelope(t)
	if err := json.Unmarshal(data, &session); err != nil || session.Token == "" {
		t.Fatalf("session %s: %v", data, err)
	}
	tailed := tail(`"session.created"`)

	// Password hashes (the admin's and the endpoint's), which a reader of
	// the log could otherwise try guesses against offline.
	needles := []needle{{"TOTP secret (raw)", raw}, {"password hash", []byte("$argon2id$")}}
	for _, s := range []struct{ name, value string }{
		{"TOTP secret (base32)", secret},
		{"pending enrollment token", pending.Token}, {"pending enrollment JWT", pending.JWT},
		{"used enrollment token", used.Token}, {"used enrollment JWT", used.JWT},
		{"edge router enrollment token", router["enrollmentToken"].(string)},
		{"edge router enrollment JWT", router["enrollmentJwt"].(string)},
		{"CA verification token", ca.VerificationToken},
		{"session token", session.Token},
		{"admin API session token", admin}, {"endpoint API session token", ep.token}, {"MFA API session token", partial},
	} {
		needles = append(needles, secretNeedles(s.name, s.value)...)
	}
	// The MFA secret as the authenticator app gets it is in the
	// provisioning URL; base32 with padding is another spelling.
	needles = append(needles, needle{"TOTP secret (padded base32)", []byte(base32.StdEncoding.EncodeToString(raw))})

	// The marker (an identity name, stored in clear) is found in the log
	// store and in the projections: the scan sees both. The projection is
	// flushed first, so that its memory table is in its files too; its
	// dump (every key and value, decompressed) is scanned as well.
	dump := n.dumpCaughtUp(t)
	if err := n.store.Flush(); err != nil {
		t.Fatal(err)
	}
	control := scanDir(t, cfg.DataDir, []needle{{"marker", []byte(marker)}})["marker"]
	var inLog, inProjections bool
	for _, f := range control {
		inLog = inLog || strings.HasPrefix(f, "nats"+string(filepath.Separator))
		inProjections = inProjections || strings.HasPrefix(f, "projections"+string(filepath.Separator))
	}
	if !inLog || !inProjections {
		t.Fatalf("the marker stored in clear is not found in both stores (found in %v): the scan proves nothing", control)
	}
	if !strings.Contains(tailed, marker) || !strings.Contains(dump, marker) {
		t.Fatal("the marker is not in the events tail output or the projection dump: the scan proves nothing")
	}
	logged := logs.String()
	if !strings.Contains(logged, `enroll?method=ott\u0026token=REDACTED`) && !strings.Contains(logged, "enroll?method=ott&token=REDACTED") {
		t.Fatalf("the debug log has no enrollment request with its token redacted: the scan proves nothing:\n%s", logged)
	}

	for name, files := range scanDir(t, cfg.DataDir, needles) {
		t.Errorf("%s found in clear in %v", name, files)
	}
	for _, nd := range needles {
		if strings.Contains(tailed, string(nd.value)) {
			t.Errorf("%s found in the events tail output", nd.name)
		}
		if strings.Contains(dump, string(nd.value)) {
			t.Errorf("%s found in the projection dump", nd.name)
		}
		if strings.Contains(logged, string(nd.value)) {
			t.Errorf("%s found in the log", nd.name)
		}
	}
	// The projection keeps sealed values only.
	m, err := n.store.MFA(ep.id)
	if err != nil || m.Secret != "" || m.RecoveryNonce != "" || !secrets.IsSealed(m.SecretSealed) || !secrets.IsSealed(m.RecoveryNonceSealed) {
		t.Fatalf("MFA record %+v, %v", m, err)
	}

	// The secrets still work: the pending token enrolls, the session token
	// is shown to its owner.
	n.enrollOTT(t, pending.Token)
	var sessions []struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	n.getJSON(t, clientAPI+"/sessions", partial, &sessions)
	if len(sessions) != 1 || sessions[0].Token != session.Token {
		t.Fatalf("sessions %+v, want the token %q", sessions, session.Token)
	}
}

// TestSecretsAcrossNodes: two nodes on one NATS cluster share the secrets
// key (beside the shared CA). What one node sealed, the other opens: an MFA
// enrolled on A completes a login on B, an enrollment created on A shows
// the same token and JWT on B and enrolls there, a session created on A
// shows its token on B.
func TestSecretsAcrossNodes(t *testing.T) {
	_, a, b := startTwoNodes(t)
	clk := newStepClock(time.Now())
	a.client.Writer.Now, b.client.Writer.Now = clk.Now, clk.Now
	caughtUp := func(n, from *clusterNode) {
		t.Helper()
		if err := n.store.WaitFor(t.Context(), from.lastSeq(t)); err != nil {
			t.Fatal(err)
		}
	}
	admin := a.adminToken(t)
	ep := a.endpoint(t, admin, "roaming-user", "laptops")
	_, secret := a.enrollAndVerifyMFA(t, ep.token, clk)

	caughtUp(b, a)
	partial, s := b.loginSession(t, "roaming-user", "roaming-user-password")
	if !s.IsMFARequired {
		t.Fatal("login on B needs no MFA")
	}
	if r := b.do(t, http.MethodPost, clientAPI+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa on B with the secret sealed on A: %d %s", r.Status, r.Body)
	}

	_, enr := a.enrolledIdentity(t, admin, "roaming-laptop", map[string]any{"ott": true})
	caughtUp(b, a)
	onB := b.detail(t, b.adminToken(t), "enrollments", enr.ID)
	if onB["token"] != enr.Token || onB["jwt"] != enr.JWT {
		t.Fatalf("enrollment on B shows token %v jwt %v, want A's", onB["token"], onB["jwt"])
	}
	b.enrollOTT(t, enr.Token)

	svc := a.create(t, admin, "services", map[string]any{"name": "crm", "roleAttributes": []string{"apps"}})
	a.create(t, admin, "service-policies", map[string]any{"name": "crm-dial", "type": "Dial", "identityRoles": []string{"#laptops"}, "serviceRoles": []string{"#apps"}})
	caughtUp(a, b)
	r := a.do(t, http.MethodPost, clientAPI+"/sessions", partial, map[string]any{"serviceId": svc})
	if r.Status != http.StatusCreated {
		t.Fatalf("session on A: %d %s", r.Status, r.Body)
	}
	var created struct {
		Token string `json:"token"`
	}
	data, _ := r.envelope(t)
	if err := json.Unmarshal(data, &created); err != nil || created.Token == "" {
		t.Fatalf("session %s: %v", data, err)
	}
	caughtUp(b, a)
	var sessions []struct {
		Token string `json:"token"`
	}
	b.getJSON(t, clientAPI+"/sessions", partial, &sessions)
	if len(sessions) != 1 || sessions[0].Token != created.Token {
		t.Fatalf("sessions on B %+v, want the token A issued", sessions)
	}
}

// TestDeletingAnIdentityShredsItsSecrets: deleting an identity destroys its
// data key, so that the sealed TOTP secret its events still carry can no
// longer be opened, by this node or by a fresh one with the same key file.
func TestDeletingAnIdentityShredsItsSecrets(t *testing.T) {
	// With a NATS port, the node's own connection has the postured
	// role's permissions: destroying a key must be one of them.
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "leaver")
	n.enrollAndVerifyMFA(t, ep.token, clk)
	m, err := n.store.MFA(ep.id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.secrets.Open(t.Context(), ep.id, posture.FieldMFASecret, m.SecretSealed); err != nil {
		t.Fatalf("open before the deletion: %v", err)
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/identities/"+ep.id, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if _, err := n.secrets.Open(t.Context(), ep.id, posture.FieldMFASecret, m.SecretSealed); !errors.Is(err, secrets.ErrShredded) {
		t.Fatalf("open after the deletion: %v, want ErrShredded", err)
	}
	fresh, err := openSecrets(t.Context(), &n.cfg, n.elog, n.log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fresh.Open(t.Context(), ep.id, posture.FieldMFASecret, m.SecretSealed); !errors.Is(err, secrets.ErrShredded) {
		t.Fatalf("open on a fresh keyring after the deletion: %v, want ErrShredded", err)
	}
}

// TestLegacyClearSecretsStillWork: a log written before secrets were sealed
// holds a TOTP secret, a recovery nonce, unkeyed recovery code hashes and
// an enrollment token and JWT in clear. They still decode and work
// (migrate on read): a TOTP and a recovery code of the old enrollment log
// in, the old enrollment shows its token and enrolls with it.
func TestLegacyClearSecretsStillWork(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	var me struct {
		ID string `json:"id"`
	}
	n.getJSON(t, clientAPI+"/current-identity", n.createUser(t, "old-timer", "old-timer-password", false), &me)
	id := me.ID
	const secret, recovery = "JBSWY3DPEHPK3PXP", "QWERTY"
	st := api.Stamp{Actor: "legacy"}
	w := n.client.Writer
	legacyHash := legacyRecoveryHashForTest(id, recovery)
	if _, err := w.AppendContext(t.Context(), st, posture.MFAEnrolled{MFA: posture.MFA{
		ID: posture.NewID(), IdentityID: id, Secret: secret, Issuer: "postured", Account: "old-timer",
		RecoveryNonce: posture.NewToken(), RecoveryCodes: []string{legacyHash},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.AppendContext(t.Context(), st, posture.MFAVerified{IdentityID: id}); err != nil {
		t.Fatal(err)
	}
	partial, s := n.loginSession(t, "old-timer", "old-timer-password")
	if !s.IsMFARequired {
		t.Fatal("the legacy enrollment is not in force")
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("TOTP of a legacy clear secret: %d %s", r.Status, r.Body)
	}
	other, _ := n.loginSession(t, "old-timer", "old-timer-password")
	if r := n.do(t, http.MethodPost, clientAPI+"/authenticate/mfa", other, map[string]string{"code": recovery}); r.Status != http.StatusOK {
		t.Fatalf("legacy recovery code: %d %s", r.Status, r.Body)
	}

	// A legacy enrollment: token and JWT in clear, found by the token.
	target := n.create(t, admin, "identities", map[string]any{"name": "old-laptop", "type": "Device", "isAdmin": false})
	token, now := posture.NewToken(), time.Now().UTC()
	enr := posture.Enrollment{ID: posture.NewID(), Method: posture.EnrollOTT, IdentityID: target, Token: token,
		JWT: "legacy.jwt.value", ExpiresAt: now.Add(time.Hour), CreatedAt: now, UpdatedAt: now}
	if err := w.ModelContext(t.Context(), st, func() ([]posture.Payload, error) {
		return []posture.Payload{posture.Created[posture.Enrollment]{Entity: enr}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := n.detail(t, admin, "enrollments", enr.ID); d["token"] != token || d["jwt"] != "legacy.jwt.value" {
		t.Fatalf("legacy enrollment shows %v", d)
	}
	n.enrollOTT(t, token)
}

// legacyRecoveryHashForTest is the unkeyed recovery code hash of logs
// written before secrets were sealed.
func legacyRecoveryHashForTest(identityID, code string) string {
	sum := sha256.Sum256([]byte("postured recovery code\x00" + identityID + "\x00" + code))
	return hex.EncodeToString(sum[:])
}

// A node whose log holds sealed values does not start without the key that
// sealed them, nor with another one (a key file left out of a restore would otherwise be replaced
// by a new key that opens none of them); nor does a node whose CA is gone
// from a data directory with a log, nor one whose CA key others may read.
// With what was lost put back, it starts and reads what it sealed.
func TestServeKeepsItsKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := defaultTestConfig(dir)
	var enr enrollmentDetail
	t.Run("first", func(t *testing.T) {
		n := startTestNode(t, cfg)
		_, enr = n.enrolledIdentity(t, n.adminToken(t), "laptop", map[string]any{"ott": true})
	})
	open := func() error {
		n, err := openNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
		if err == nil {
			n.Close()
		}
		return err
	}
	moved := func(path string) (restore func()) {
		aside := filepath.Join(t.TempDir(), filepath.Base(path))
		if err := os.Rename(path, aside); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := os.Rename(aside, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	pkiDir := filepath.Join(dir, "pki")

	restore := moved(filepath.Join(pkiDir, "secrets.key"))
	if err := open(); err == nil || !strings.Contains(err.Error(), "no secrets key at") {
		t.Fatalf("without the secrets key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, "secrets.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start created a key: %v", err)
	}
	restore()

	// Another deployment's key is not this log's.
	other := filepath.Join(t.TempDir(), "other.key")
	if _, _, err := secrets.LoadOrCreateKEK(other); err != nil {
		t.Fatal(err)
	}
	cfg.SecretsKeyFile = other
	if err := open(); err == nil || !strings.Contains(err.Error(), "is not the one that sealed the log's data keys") {
		t.Fatalf("with another secrets key: %v", err)
	}
	cfg.SecretsKeyFile = ""

	restoreKey, restoreCert := moved(filepath.Join(pkiDir, "ca.key")), moved(filepath.Join(pkiDir, "ca.pem"))
	if err := open(); err == nil || !strings.Contains(err.Error(), "no ca.key nor ca.pem in") {
		t.Fatalf("without the CA: %v", err)
	}
	restoreCert()
	// Half a CA: the missing key is not made anew either.
	if err := open(); err == nil || !strings.Contains(err.Error(), "no ca.key in") {
		t.Fatalf("without the CA key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pkiDir, "ca.key")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a refused start created a CA key: %v", err)
	}
	restoreKey()

	if err := os.Chmod(filepath.Join(pkiDir, "ca.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := open(); err == nil || !strings.Contains(err.Error(), "accessible to others") {
		t.Fatalf("with a CA key others may read: %v", err)
	}
	if err := os.Chmod(filepath.Join(pkiDir, "ca.key"), 0o600); err != nil {
		t.Fatal(err)
	}

	n := startTestNode(t, cfg)
	if got := n.detail(t, n.adminToken(t), "enrollments", enr.ID); got["jwt"] != enr.JWT {
		t.Fatalf("the enrollment after the keys came back: jwt %v, want %v", got["jwt"], enr.JWT)
	}
}
