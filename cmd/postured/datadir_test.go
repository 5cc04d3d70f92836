package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOneNodePerDataDirectory runs a node and then, on its data directory,
// a second `postured serve` (the real binary), which must exit at once
// naming the directory and the running process, and the offline commands,
// which must refuse the live store and say how to ask the node instead.
func TestOneNodePerDataDirectory(t *testing.T) {
	dir := t.TempDir()
	first := startBinary(t, dir, "POSTURED_ADMIN_PASSWORD="+testAdminPassword)
	abs, _ := filepath.Abs(dir)
	inUse := fmt.Sprintf("data directory %s is in use by process %d", abs, first.cmd.Process.Pid)

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// The same directory with the same port, as a second serve with the
	// defaults is: the directory is named, not only the busy port.
	out, err := exec.CommandContext(ctx, binary(t), "serve", "--data-dir", dir, "--listen", strings.TrimPrefix(first.base, "https://")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), inUse) || !strings.Contains(string(out), "address already in use") {
		t.Fatalf("second serve on a live data directory and its port: %v, want exit with %q and the busy port:\n%s", err, inUse, out)
	}
	start := time.Now()
	out, err = exec.CommandContext(ctx, binary(t), "serve", "--data-dir", dir, "--listen", "127.0.0.1:0").CombinedOutput()
	took := time.Since(start)
	if err == nil || !strings.Contains(string(out), inUse) {
		t.Fatalf("second serve on a live data directory: %v, want exit with %q:\n%s", err, inUse, out)
	}
	if strings.Contains(string(out), "listening") {
		t.Fatalf("the second serve listened before it failed:\n%s", out)
	}
	t.Logf("second serve exited after %v: %s", took.Round(time.Millisecond), strings.TrimSpace(string(out)))
	if took > 5*time.Second {
		t.Errorf("the second serve took %v to fail", took)
	}

	data := "--data-dir=" + dir
	for _, args := range [][]string{
		{"audit", "identity", "someone", data},
		{"explain", "--identity", "someone", "--service", "something", data},
		{"replay", data, "--out", filepath.Join(t.TempDir(), "replay")},
		{"events", "tail", data},
	} {
		_, err := command(t, args...)
		if err == nil || !strings.Contains(err.Error(), inUse) || !strings.Contains(err.Error(), "--nats-url") {
			t.Errorf("%s on a live data directory: %v, want %q and how to ask the node", args[0], err, inUse)
		}
	}

	// Once the node stopped, the directory is free again for both.
	first.stop(t)
	if _, err := command(t, "audit", "identity", "nosuch", data); err == nil || strings.Contains(err.Error(), "in use") {
		t.Fatalf("audit on a stopped node's directory: %v, want a not found", err)
	}
	second := startBinary(t, dir, "POSTURED_ADMIN_PASSWORD="+testAdminPassword)
	second.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "LOCK")); err != nil {
		t.Fatal(err)
	}
}

// TestBusyPortsMakeNothing: a start whose --listen, --metrics-listen or
// --nats-listen port is taken, or whose NATS client file is missing, names
// the flag and makes nothing in a new data directory (no CA, no log), so
// that the next start is a first start.
func TestBusyPortsMakeNothing(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, flag := range []string{"--listen", "--metrics-listen", "--nats-listen"} {
		dir := filepath.Join(t.TempDir(), "data")
		args := []string{"serve", "--data-dir", dir, "--listen", "127.0.0.1:0", flag, busy.Addr().String()}
		out, err := exec.Command(binary(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), flag+": listen tcp "+busy.Addr().String()) {
			t.Fatalf("%s on a busy port: %v\n%s", flag, err, out)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "LOCK" {
				t.Errorf("%s on a busy port made %s in the data directory", flag, e.Name())
			}
		}
	}
	// A NATS client file that is not there is a wrong command line.
	dir := filepath.Join(t.TempDir(), "data")
	cmd := exec.Command(binary(t), "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--nats-url", "tls://127.0.0.1:1",
		"--nats-nkey", filepath.Join(dir, "nope.nk"))
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(string(out), "--nats-nkey: open ") {
		t.Fatalf("a missing --nats-nkey: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing --nats-nkey made the data directory: %v", err)
	}
}
