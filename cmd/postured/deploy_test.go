package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
)

// TestDeployNATSConfig reads deploy/nats/nats-{1,2,3}.conf as nats-server
// does, with what `postured nats init` made: every server requires TLS,
// knows only the postured and auditor users with eventlog's permissions,
// and routes with a password over verified TLS. Then it runs nats-1 (alone,
// on free ports) and checks the roles for real.
func TestDeployNATSConfig(t *testing.T) {
	deploy, err := filepath.Abs("../../deploy/nats")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	t.Chdir(root) // the configurations name ./data/... from the working directory
	out, err := command(t, "nats", "init", "--dir", "data/cluster/nats", "--pki-dir", "data/cluster/pki",
		"--route", "127.0.0.1:6222,127.0.0.1:6223,127.0.0.1:6224")
	if err != nil || !strings.HasPrefix(out, "a new CA was made in data/cluster/pki") {
		t.Fatalf("nats init: %v\n%s", err, out)
	}
	for _, f := range []string{"postured.nk", "auditor.nk", "server.key", "route-password", "nats.env"} {
		fi, err := os.Stat(filepath.Join("data/cluster/nats", f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v, want mode 0600", f, fi.Mode(), err)
		}
	}
	env := readEnv(t, "data/cluster/nats/nats.env")
	for k, v := range env {
		t.Setenv(k, v)
	}
	// A second run keeps everything, the CA too.
	if again, err := command(t, "nats", "init", "--dir", "data/cluster/nats", "--pki-dir", "data/cluster/pki",
		"--route", "127.0.0.1:6222,127.0.0.1:6223,127.0.0.1:6224"); err != nil || strings.Contains(again, "a new CA") {
		t.Fatalf("nats init again: %v\n%s", err, again)
	}
	if diff := cmp.Diff(env, readEnv(t, "data/cluster/nats/nats.env")); diff != "" {
		t.Errorf("nats init again changed nats.env:\n%s", diff)
	}
	t.Log(out)

	want := map[string]string{env["NATS_POSTURED_NKEY"]: eventlog.RolePostured, env["NATS_AUDITOR_NKEY"]: eventlog.RoleAuditor}
	var first *server.Options
	for i := 1; i <= 3; i++ {
		opts, err := server.ProcessConfigFile(filepath.Join(deploy, fmt.Sprintf("nats-%d.conf", i)))
		if err != nil {
			t.Fatalf("nats-%d.conf: %v", i, err)
		}
		if opts.TLSConfig == nil || opts.Cluster.TLSConfig == nil || opts.Cluster.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
			t.Errorf("nats-%d: TLS on clients %v, on routes %v ", i, opts.TLSConfig != nil, opts.Cluster.TLSConfig)
		}
		// Clients and routes: TLS 1.2 at least, ECDHE with AEAD only, the
		// suites of HTTPS.
		for what, c := range map[string]*tls.Config{"clients": opts.TLSConfig, "routes": opts.Cluster.TLSConfig} {
			if c == nil {
				continue
			}
			if c.MinVersion != pki.MinTLSVersion || !slices.Equal(c.CipherSuites, pki.CipherSuites()) {
				t.Errorf("nats-%d: TLS on %s: min version %s, suites %v; want %s and %v", i, what,
					tls.VersionName(c.MinVersion), suiteNames(c.CipherSuites), tls.VersionName(pki.MinTLSVersion), pki.CipherSuiteNames())
			}
		}
		if opts.Cluster.Username != "route" || opts.Cluster.Password != env["NATS_ROUTE_PASSWORD"] || len(opts.Routes) != 3 {
			t.Errorf("nats-%d: routes %v authenticated as %q", i, opts.Routes, opts.Cluster.Username)
		}
		if len(opts.Users) != 0 || len(opts.Nkeys) != 2 || opts.NoAuthUser != "" {
			t.Fatalf("nats-%d: %d users, %d nkeys, no-auth user %q: want exactly the two roles", i, len(opts.Users), len(opts.Nkeys), opts.NoAuthUser)
		}
		for _, u := range opts.Nkeys {
			role, ok := want[u.Nkey]
			if !ok {
				t.Fatalf("nats-%d: unknown user %s", i, u.Nkey)
			}
			perms, _ := eventlog.Permissions(role, "POSTURED")
			if diff := cmp.Diff(perms, u.Permissions); diff != "" {
				t.Errorf("nats-%d: the %s permissions differ from eventlog.Permissions (-go +conf):\n%s", i, role, diff)
			}
			if u.Account == nil || u.Account.Name != "POSTURED" {
				t.Errorf("nats-%d: %s not in the POSTURED account", i, role)
			}
		}
		if i == 1 {
			first = opts
		}
	}

	// nats-1 alone, on free ports and its own store.
	first.Port, first.HTTPPort, first.Cluster.Port, first.Routes = -1, 0, 0, nil
	first.Cluster.Name, first.StoreDir = "", t.TempDir()
	first.NoSigs = true
	ns, err := server.NewServer(first)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-1 not ready")
	}
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	ca := filepath.Join(root, "data/cluster/pki/ca.pem")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := eventlog.Open(ctx, eventlog.Options{URLs: []string{url},
		Auth: eventlog.ClientAuth{TLSCA: ca, NkeyFile: filepath.Join(root, "data/cluster/nats/postured.nk")}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Append(ctx, posture.Event{ID: posture.NewID(), Type: "deploy.tested", Schema: 1, Subject: "deploy",
		At: time.Now().UTC(), Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := command(t, "events", "tail", "--nats-url", url, "--nats-tls-ca", ca); err == nil ||
		!strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("events tail without credentials: %v", err)
	}
	following := follow(t, "--nats-url", url, "--nats-tls-ca", ca, "--nats-nkey", filepath.Join(root, "data/cluster/nats/auditor.nk"), "--from", "1")
	if out := following(`"seq":1`); !strings.Contains(out, "deploy.tested") {
		t.Errorf("events tail as the auditor: %s", out)
	}
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	return env
}

func suiteNames(ids []uint16) []string {
	var names []string
	for _, id := range ids {
		names = append(names, tls.CipherSuiteName(id))
	}
	return names
}
