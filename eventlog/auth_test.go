package eventlog_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
	"github.com/seed-0809debe/posture/pki"
)

// listeningLog opens an embedded log that accepts NATS clients on a
// loopback port, with a certificate from a postured CA in dir/pki.
func listeningLog(t *testing.T, dir string) (*eventlog.Log, string) {
	return listeningLogTo(t, dir, nil)
}

// listeningLogTo is listeningLog with the server's log written to logs as
// JSON (nil: discarded).
func listeningLogTo(t *testing.T, dir string, logs *syncBuffer) (*eventlog.Log, string) {
	t.Helper()
	ca, err := pki.Open(filepath.Join(dir, "pki"), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServiceCertificate([]string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewJSONHandler(logs, nil))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{
		Dir: filepath.Join(dir, "nats"), Listen: "127.0.0.1:0", Logger: logger,
		ListenTLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, filepath.Join(dir, "pki", "ca.pem")
}

// seedOf is the seed file of a role among the embedded server's users.
func seedOf(t *testing.T, l *eventlog.Log, role string) string {
	t.Helper()
	for _, c := range l.Credentials() {
		if c.Role == role {
			return c.SeedFile
		}
	}
	t.Fatalf("no %s credentials", role)
	return ""
}

// strangerSeed is an nkey user that no server knows.
func strangerSeed(t *testing.T) string {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	path := filepath.Join(t.TempDir(), "stranger.nk")
	if err := os.WriteFile(path, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// openAs opens the log at urls with auth, as a reader when existing.
func openAs(t *testing.T, urls []string, auth eventlog.ClientAuth, existing bool) (*eventlog.Log, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{URLs: urls, Auth: auth, Existing: existing, Replicas: 1})
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return l, err
}

// refused asserts that opening the log fails at once with the URL and the
// cause in the message.
func refused(t *testing.T, what string, urls []string, auth eventlog.ClientAuth, cause string) {
	t.Helper()
	start := time.Now()
	_, err := openAs(t, urls, auth, true)
	if err == nil {
		t.Fatalf("%s: connected", what)
	}
	if !strings.Contains(err.Error(), urls[0]) || !strings.Contains(strings.ToLower(err.Error()), cause) {
		t.Errorf("%s: error %q does not name the URL %s and %q", what, err, urls[0], cause)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("%s: refused after %s, want at once", what, took)
	}
}

// checkAuditor proves that the auditor can read and follow the log and that
// its appends are refused: w is a writer on the same stream.
func checkAuditor(t *testing.T, w, auditor *eventlog.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := w.Append(ctx, event("audit", 1))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := auditor.Get(ctx, first); err != nil || got.Subject != "audit" {
		t.Fatalf("auditor get %d: %+v %v", first, got, err)
	}
	if got := collect(t, auditor, first, first); len(got) != 1 {
		t.Fatalf("auditor read %d events, want 1", len(got))
	}
	// Follow: a consumer from the next sequence sees an event appended
	// after it started.
	followed := make(chan posture.Event, 1)
	fctx, fcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		auditor.Consume(fctx, first+1, func(b []posture.Event) error {
			followed <- b[0]
			fcancel()
			return nil
		})
	})
	second := event("audit", 2)
	if _, err := w.Append(ctx, second); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-followed:
		if e.ID != second.ID {
			t.Errorf("auditor followed %s, want %s", e.ID, second.ID)
		}
	case <-ctx.Done():
		t.Fatal("the auditor's consumer did not deliver the new event")
	}
	fcancel()
	wg.Wait()

	// An append is refused, and nothing reaches the stream.
	before, err := w.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	_, err = auditor.Append(actx, event("audit", 3))
	if err == nil || !strings.Contains(err.Error(), "Permissions Violation for Publish") {
		t.Fatalf("auditor append: %v, want a permissions violation", err)
	}
	// The attack of a plain publish (an identity.updated with isAdmin on
	// postured.model) reaches nothing either.
	if err := auditor.Conn().Publish("postured.model", []byte(`{"type":"identity.updated"}`)); err != nil {
		t.Fatal(err)
	}
	if err := auditor.Conn().FlushWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	// The next event stored follows the last one the writer stored.
	if seq, err := w.Append(ctx, event("audit", 4)); err != nil || seq != before+1 {
		t.Fatalf("after refused publishes the writer appended at %d (%v), want %d", seq, err, before+1)
	}
	// Neither can it delete a message or purge the stream.
	js := auditor.JetStream()
	st, err := js.Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if err := st.DeleteMsg(dctx, first); err == nil {
		t.Error("auditor deleted a message")
	}
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	defer pcancel()
	if err := st.Purge(pctx); err == nil {
		t.Error("auditor purged the stream")
	}
	if got, err := w.Get(ctx, first); err != nil || got.Subject != "audit" {
		t.Fatalf("message %d after the auditor's attempts: %+v %v", first, got, err)
	}
}

// TestEmbeddedListenerRequiresCredentials: the embedded server with Listen
// refuses anonymous clients, unknown users and clients that do not trust
// its CA; the auditor reads and follows but cannot append; the credentials
// it generated are private files that survive a restart.
func TestEmbeddedListenerRequiresCredentials(t *testing.T) {
	dir := t.TempDir()
	l, caFile := listeningLog(t, dir)
	url := l.ListenURL()
	if !strings.HasPrefix(url, "tls://127.0.0.1:") {
		t.Fatalf("listen URL %q", url)
	}
	creds := l.Credentials()
	if len(creds) != 2 {
		t.Fatalf("credentials %+v, want postured and auditor", creds)
	}
	for _, c := range creds {
		fi, err := os.Stat(c.SeedFile)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", c.SeedFile, fi.Mode().Perm())
		}
		if !strings.HasPrefix(c.SeedFile, filepath.Join(dir, "nats")) {
			t.Errorf("%s is outside the data directory", c.SeedFile)
		}
	}

	urls := []string{url}
	refused(t, "anonymous", urls, eventlog.ClientAuth{TLSCA: caFile}, "authorization violation")
	refused(t, "unknown nkey", urls, eventlog.ClientAuth{TLSCA: caFile, NkeyFile: strangerSeed(t)}, "authorization violation")
	refused(t, "wrong password", urls, eventlog.ClientAuth{TLSCA: caFile, User: "postured", Password: "guess"}, "authorization violation")
	refused(t, "untrusted server", urls, eventlog.ClientAuth{NkeyFile: seedOf(t, l, eventlog.RoleAuditor)}, "certificate signed by unknown authority")
	// A plain-text client gets nothing either.
	if nc, err := nats.Connect(strings.Replace(url, "tls://", "nats://", 1), nats.Secure(&tls.Config{InsecureSkipVerify: true})); err == nil {
		nc.Close()
		t.Error("a client that skips verification and has no credentials connected")
	}

	auditor, err := openAs(t, urls, eventlog.ClientAuth{TLSCA: caFile, NkeyFile: seedOf(t, l, eventlog.RoleAuditor)}, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAuditor(t, l, auditor)
	checkAuditorTransitions(t, l, auditor)

	// Another postured process may use the node's server as its log.
	other, err := openAs(t, urls, eventlog.ClientAuth{TLSCA: caFile, NkeyFile: seedOf(t, l, eventlog.RolePostured)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Append(context.Background(), event("other", 1)); err != nil {
		t.Fatal(err)
	}
	cannotShortenHistory(t, other)

	// A restart keeps the credentials.
	seed, err := os.ReadFile(seedOf(t, l, eventlog.RoleAuditor))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
	auditor.Close()
	l.Close()
	l2, _ := listeningLog(t, dir)
	seed2, err := os.ReadFile(seedOf(t, l2, eventlog.RoleAuditor))
	if err != nil {
		t.Fatal(err)
	}
	if string(seed) != string(seed2) {
		t.Error("the auditor's seed changed across a restart")
	}
}

// TestSecureClusterAuth runs a three-node cluster configured as deploy/nats
// (accounts, nkey users with permissions, TLS, authenticated routes):
// postured works over TLS with its credentials on an R3 stream; anonymous
// clients, unknown users and clients that do not trust the CA are refused;
// the auditor reads and follows and cannot append; postured itself cannot
// delete history.
func TestSecureClusterAuth(t *testing.T) {
	c, sec := natstest.StartSecure(t, 3, natstest.SecureOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := eventlog.Open(ctx, eventlog.Options{URLs: c.URLs, Replicas: 3,
		Auth: eventlog.ClientAuth{NkeyFile: sec.PosturedSeed, TLSCA: sec.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if !strings.HasPrefix(w.Conn().ConnectedUrl(), "tls://") || !w.Conn().TLSRequired() {
		t.Errorf("connected to %s (TLS required: %v)", w.Conn().ConnectedUrl(), w.Conn().TLSRequired())
	}
	if leader := c.StreamLeader("POSTURED"); leader == nil {
		t.Error("no leader for the stream in the POSTURED account")
	}
	if err := w.Announce(ctx, eventlog.Node{ID: "n1", Name: "n1"}); err != nil {
		t.Fatalf("node registry: %v", err)
	}

	refused(t, "anonymous", c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile}, "authorization violation")
	refused(t, "unknown nkey", c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile, NkeyFile: strangerSeed(t)}, "authorization violation")
	refused(t, "wrong password", c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile, User: "route", Password: "guess"}, "authorization violation")
	refused(t, "untrusted server", c.URLs, eventlog.ClientAuth{TLSCA: sec.OtherCAFile, NkeyFile: sec.PosturedSeed}, "certificate signed by unknown authority")

	auditor, err := openAs(t, c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile, NkeyFile: sec.AuditorSeed}, true)
	if err != nil {
		t.Fatal(err)
	}
	checkAuditor(t, w, auditor)
	checkAuditorTransitions(t, w, auditor)
	cannotShortenHistory(t, w)

	// Not even a postured node deletes a message or purges the stream.
	st, err := w.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if err := st.DeleteMsg(dctx, 1); err == nil {
		t.Error("postured deleted a message")
	}
	if _, err := w.Get(ctx, 1); err != nil {
		t.Errorf("message 1: %v", err)
	}
}

// TestSecureClusterMutualTLS: with client verification on, a client with
// the right nkey but no certificate is refused, and one with a certificate
// from the CA works.
func TestSecureClusterMutualTLS(t *testing.T) {
	c, sec := natstest.StartSecure(t, 3, natstest.SecureOptions{VerifyClients: true})
	start := time.Now()
	_, err := openAs(t, c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile, NkeyFile: sec.PosturedSeed}, false)
	if err == nil {
		t.Fatal("connected without a client certificate")
	}
	if !strings.Contains(err.Error(), c.URLs[0]) || time.Since(start) > 11*time.Second {
		t.Errorf("after %s: %v", time.Since(start), err)
	}
	l, err := openAs(t, c.URLs, eventlog.ClientAuth{TLSCA: sec.CAFile, NkeyFile: sec.PosturedSeed,
		TLSCert: sec.ClientCert, TLSKey: sec.ClientKey}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), event("mtls", 1)); err != nil {
		t.Fatal(err)
	}
}

// TestOpenUnreachableURL: a server that cannot be reached fails Open within
// ten seconds with the URL and the cause.
func TestOpenUnreachableURL(t *testing.T) {
	url := "nats://" + natstest.ClosedAddr(t)
	start := time.Now()
	_, err := openAs(t, []string{url}, eventlog.ClientAuth{}, false)
	took := time.Since(start)
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %q does not name %s and the cause", err, url)
	}
	if took > 11*time.Second {
		t.Errorf("failed after %s, want at most 10s", took)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
}

// TestOpenMissingFiles: a credential or TLS file that is not there is
// named by what it is, before connecting.
func TestOpenMissingFiles(t *testing.T) {
	url := "nats://" + natstest.ClosedAddr(t)
	missing := filepath.Join(t.TempDir(), "nope")
	for what, auth := range map[string]eventlog.ClientAuth{
		"NATS nkey seed file":   {NkeyFile: missing},
		"NATS credentials file": {CredsFile: missing},
		"NATS servers' CA file": {TLSCA: missing},
	} {
		_, err := openAs(t, []string{url}, auth, false)
		if err == nil || !strings.Contains(err.Error(), "the "+what+": open "+missing) {
			t.Errorf("%s missing: %v", what, err)
		}
	}
}

// TestOpenWithoutJetStream: a NATS server without JetStream fails Open with
// its URL and the likely cause, not a bare deadline.
func TestOpenWithoutJetStream(t *testing.T) {
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(s.Shutdown)
	if !s.ReadyForConnections(5 * time.Second) {
		t.Fatal("server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = eventlog.Open(ctx, eventlog.Options{URLs: []string{s.ClientURL()}, Replicas: 1})
	if err == nil {
		t.Fatal("opened a log on a server without JetStream")
	}
	if !strings.Contains(err.Error(), s.ClientURL()) || !strings.Contains(err.Error(), "is JetStream enabled") {
		t.Errorf("error %q does not name %s and the likely cause", err, s.ClientURL())
	}
}

// TestOpenUnwritableStore: an embedded store on a path that cannot be
// written fails Open at once with the path and the reason.
func TestOpenUnwritableStore(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(file, "data", "nats")
	start := time.Now()
	_, err := eventlog.Open(context.Background(), eventlog.Options{Dir: dir})
	if err == nil {
		t.Fatal("opened a store under a regular file")
	}
	if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("error %q does not name the path and the cause", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("failed after %s", took)
	}

	t.Run("chmod", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only directory")
		}
		ro := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		_, err := eventlog.Open(context.Background(), eventlog.Options{Dir: ro})
		if err == nil || !strings.Contains(err.Error(), ro) || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("error %v, want %s and permission denied", err, ro)
		}
	})
}

// cannotShortenHistory: a postured node's credentials may not change the
// stream's limits (max_msgs 1 with discard old would drop every event but
// the last): the update is refused and every message stays.
func cannotShortenHistory(t *testing.T, w *eventlog.Log) {
	t.Helper()
	ctx := t.Context()
	before, err := w.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.MaxMsgs, cfg.Discard = 1, jetstream.DiscardOld
	uctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := w.JetStream().UpdateStream(uctx, cfg); err == nil {
		t.Fatal("postured's credentials updated the stream's limits")
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxMsgs > 0 || info.State.Msgs < before || info.State.FirstSeq != 1 {
		t.Fatalf("after a refused update: max_msgs %d, %d messages from %d (had %d)", info.Config.MaxMsgs, info.State.Msgs, info.State.FirstSeq, before)
	}
	// The data keys may be destroyed one by one (an identity's, when it is
	// deleted), not purged all at once.
	keys, err := w.OpenKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, "owner-1", []byte("a data key")); err != nil {
		t.Fatal(err)
	}
	kst, err := w.JetStream().Stream(ctx, "KV_postured_keys")
	if err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := kst.Purge(pctx); err == nil {
		t.Fatal("postured's credentials purged the data key bucket")
	}
	// Nor with a rollup, which the bucket refuses.
	msg := nats.NewMsg("$KV.postured_keys.zzz")
	msg.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupAll)
	msg.Data = []byte("x")
	if _, err := w.JetStream().PublishMsg(ctx, msg); err == nil {
		t.Fatal("a rollup of the data key bucket was accepted")
	}
	if v, err := keys.Get(ctx, "owner-1"); err != nil || string(v) != "a data key" {
		t.Fatalf("the key after a refused purge and rollup: %q %v", v, err)
	}
	if err := keys.Destroy(ctx, "owner-1"); err != nil {
		t.Fatalf("destroying one key: %v", err)
	}
}
