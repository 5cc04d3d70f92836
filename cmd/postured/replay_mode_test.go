package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestReplayOutMode: the rebuilt projection holds what the node's data
// directory does, so its directory is 0700 whatever the umask: made so,
// or made so when it exists (empty) with a wider mode.
func TestReplayOutMode(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	n.create(t, n.adminToken(t), "services", map[string]any{"name": "crm"})
	n.srv.Close()
	n.Close()
	defer syscall.Umask(syscall.Umask(0o022))

	parent := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(parent, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{filepath.Join(parent, "new"), existing} {
		if _, err := command(t, "replay", "--data-dir="+cfg.DataDir, "--out", out); err != nil {
			t.Fatalf("replay --out %s: %v", out, err)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o700 {
			t.Errorf("replay --out %s: mode %04o, want 0700", out, mode)
		}
	}
}
