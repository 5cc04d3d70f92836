package main

import (
	"bytes"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
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
// (base32 and raw), the one-time tokens, the JWTs and the API session
// tokens. None is found, while a marker stored in clear is found in both
// stores (the scan reads what it must). The secrets still work.
func TestNoSecretInClear(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsListen = freeAddr(t)
	n := startTestNode(t, cfg)
	clk := useStepClock(n)
	admin := n.adminToken(t)
	tail := follow(t, "--nats-url", "nats://"+cfg.NatsListen, "--from", fmt.Sprint(n.lastSeq(t)+1))

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

	needles := []needle{{"TOTP secret (raw)", raw}}
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
