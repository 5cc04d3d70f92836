package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/eventlog/natstest"
)

// TestClusterOverTLSWithCredentials: two nodes on a NATS cluster that
// requires TLS and nkey credentials (configured as deploy/nats) work
// together with the postured role's credentials; events tail follows them
// with the auditor's; a node without credentials, or that does not trust the
// cluster's CA, fails to start at once and says why.
func TestClusterOverTLSWithCredentials(t *testing.T) {
	nc, sec := natstest.StartSecure(t, 3, natstest.SecureOptions{})
	pkiDir := t.TempDir()
	auth := natsFlags{NatsNkey: sec.PosturedSeed, NatsTLSCA: sec.CAFile}
	a := startClusterNodeWith(t, nc, pkiDir, "node-a", auth)
	b := startClusterNodeWith(t, nc, pkiDir, "node-b", auth)

	auditor := []string{"--nats-url", strings.Join(nc.URLs, ","), "--nats-nkey", sec.AuditorSeed, "--nats-tls-ca", sec.CAFile}
	following := follow(t, append(auditor, "--from", fmt.Sprint(a.lastSeq(t)+1), "--type", "identity.created")...)
	admin := a.adminToken(t)
	id := a.create(t, admin, "identities", map[string]any{"name": "over-tls", "type": "Device", "isAdmin": false})
	if err := b.store.WaitFor(t.Context(), a.store.Cursor()); err != nil {
		t.Fatal(err)
	}
	if r := b.do(t, http.MethodGet, mgmt+"/identities/"+id, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("node B, identity created through A: %d %s", r.Status, r.Body)
	}
	if out := following(id); !strings.Contains(out, `"identity.created"`) {
		t.Fatalf("events tail as the auditor: %s", out)
	}

	for _, c := range []struct {
		what  string
		flags natsFlags
		cause string
	}{
		{"no credentials", natsFlags{NatsTLSCA: sec.CAFile}, "authorization violation"},
		{"another CA", natsFlags{NatsNkey: sec.PosturedSeed, NatsTLSCA: sec.OtherCAFile}, "certificate signed by unknown authority"},
	} {
		cfg := defaultTestConfig(t.TempDir())
		cfg.NatsURL, cfg.StreamReplicas, cfg.natsFlags = nc.URLs, 3, c.flags
		start := time.Now()
		_, err := startNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
		if err == nil || !strings.Contains(strings.ToLower(err.Error()), c.cause) || !strings.Contains(err.Error(), nc.URLs[0]) {
			t.Errorf("%s: %v, want the URL and %q", c.what, err, c.cause)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: refused after %s", c.what, took)
		}
	}

	// An offline command given the auditor's seed as a credentials file
	// says where a seed goes.
	if _, err := (logFlags{NatsURL: nc.URLs, StreamReplicas: 3, natsFlags: natsFlags{NatsCreds: sec.AuditorSeed, NatsTLSCA: sec.CAFile}}).open(t.Context()); err == nil ||
		!strings.Contains(err.Error(), "goes to --nats-nkey") {
		t.Errorf("a seed given as --nats-creds: %v, want that it goes to --nats-nkey", err)
	}

	// The auditor's credentials may read but not write: serve says that
	// postured's are needed.
	cfg := defaultTestConfig(t.TempDir())
	cfg.NatsURL, cfg.StreamReplicas, cfg.natsFlags = nc.URLs, 3, natsFlags{NatsNkey: sec.AuditorSeed, NatsTLSCA: sec.CAFile}
	start := time.Now()
	n, err := startNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
	if err == nil {
		defer n.Close()
		err = n.ready(t.Context(), &cfg)
	}
	if err == nil || !strings.Contains(err.Error(), "may not write") || !strings.Contains(err.Error(), "postured's credentials") {
		t.Errorf("serve with the auditor's credentials: %v, want that postured's credentials are needed", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("serve with the auditor's credentials: refused after %s", took)
	}
	t.Logf("serve with the auditor's credentials: %v", err)
}

// TestStartupErrorsSayWhy: serve with an unreachable --nats-url, or a data
// directory that cannot be created, fails within ten seconds with the URL or
// the path and the cause.
func TestStartupErrorsSayWhy(t *testing.T) {
	url := "nats://" + natstest.ClosedAddr(t)
	start := time.Now()
	_, err := command(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--nats-url", url)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("unreachable NATS: failed after %s", took)
	}
	if err == nil || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("unreachable NATS: %v, want %s and connection refused", err, url)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(file, "data")
	start = time.Now()
	_, err = command(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", data)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("data directory under a file: failed after %s", took)
	}
	if err == nil || !strings.Contains(err.Error(), data) || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("data directory under a file: %v, want %s and not a directory", err, data)
	}

	t.Run("read-only data directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes into a read-only directory")
		}
		ro := filepath.Join(t.TempDir(), "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := command(t, "serve", "--listen", "127.0.0.1:0", "--data-dir", ro)
		if time.Since(start) > 10*time.Second || err == nil || !strings.Contains(err.Error(), ro) || !errors.Is(err, os.ErrPermission) && !strings.Contains(err.Error(), "permission denied") {
			t.Errorf("read-only data directory: %v, want %s and permission denied", err, ro)
		}
	})
}
