package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

func TestZZFootprint(t *testing.T) {
	dir := t.TempDir()
	n := startTestNode(t, defaultTestConfig(dir))
	for range 600 {
		n.adminToken(t)
	}
	t.Logf("last seq %d", n.lastSeq(t))
	for _, sub := range []string{"nats", "projections"} {
		out, _ := exec.Command("du", "-sh", "--apparent-size", filepath.Join(dir, sub)).Output()
		out2, _ := exec.Command("du", "-sh", filepath.Join(dir, sub)).Output()
		t.Logf("%s / %s", out, out2)
	}
	out, _ := exec.Command("ls", "-la", filepath.Join(dir, "projections")).Output()
	t.Logf("%s", out)
}
