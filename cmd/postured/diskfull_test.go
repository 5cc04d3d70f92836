package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
)

// mountTmpfs mounts a tmpfs of size bytes on dir (created), for the length
// of the test. It skips the test where that is not possible (not root, no
// mount(8)).
func mountTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a full file system needs a tmpfs mount, which needs root")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("mount -t tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// ballast takes the space of dir's file system down to free bytes free,
// and returns a function that gives it back.
func ballast(t *testing.T, dir string, free int64) (remove func()) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	avail := int64(st.Bavail) * int64(st.Bsize)
	if avail <= free {
		t.Fatalf("%s has %d bytes free, less than %d", dir, avail, free)
	}
	path := filepath.Join(dir, "ballast")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fallocate(int(f.Fd()), 0, 0, avail-free); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// bulkPosture is a posture-response-bulk body of about 200 KB: 800
// processes, each a fact of its own in the history (which keeps one entry
// per fact a request sets).
func bulkPosture(i int) []map[string]any {
	var bulk []map[string]any
	for j := range 800 {
		bulk = append(bulk, map[string]any{"id": "proc", "typeId": "PROCESS", "path": fmt.Sprintf("/%d/%d/%s", i, j, strings.Repeat("x", 200)), "isRunning": true})
	}
	return bulk
}

// TestFullDisk fills, for real, the file system under the event log and
// then under the projection (tmpfs mounts of a few MiB), with a reserve and
// without one (the store then meets ENOSPC). Each time: a write fails at
// once with 503 SERVICE_UNAVAILABLE saying what is out of space, an ERROR
// line is logged, /readyz is 503 with the reason and the metric is 1; once
// the space is given back, writes resume without a restart and every write
// answered 2xx is in the log exactly once and applied.
func TestFullDisk(t *testing.T) {
	cases := []struct {
		name    string
		part    string // the directory under the data directory that fills
		reserve int64  // --disk-reserve-mib
		leave   int64  // bytes the ballast leaves free
		want    string // in the 503's message
		early   bool   // the disk is nearly full when the node starts
	}{
		{"log reserve", "nats", 4, 6 << 20, "the event log is out of disk space", false},
		// nats-server's default store limit is 75% of the space free at
		// start: a limit that freeing space did not lift.
		{"log nearly full at start", "nats", 0, 8 << 20, "the event log is out of disk space", true},
		{"log ENOSPC", "nats", 0, 3 << 20, "the event log is out of disk space", false},
		{"projection reserve", "projections", 16, 10 << 20, "the projection is out of disk space", false},
		{"projection ENOSPC", "projections", 0, 3 << 20, "the projection is out of disk space", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := defaultTestConfig(t.TempDir())
			cfg.DiskReserveMiB = c.reserve
			mnt := filepath.Join(cfg.DataDir, c.part)
			mountTmpfs(t, mnt, 96<<20)
			var giveBack func()
			if c.early {
				giveBack = ballast(t, mnt, c.leave)
			}
			var logs lockedBuffer
			n := startTestNodeLog(t, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			admin := n.adminToken(t)
			ep := n.endpoint(t, admin, "laptop-1", "laptops")
			if !c.early {
				giveBack = ballast(t, mnt, c.leave)
			}

			var results []postResult
			var refused response
			for i := 0; ; i++ {
				if i == 200 {
					t.Fatalf("200 writes of 200 KB on a full disk, none refused")
				}
				start := time.Now()
				r := n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", ep.token, bulkPosture(i))
				took := time.Since(start)
				results = append(results, postResult{status: r.Status, requestID: r.Header.Get("X-Request-Id")})
				if r.Status == http.StatusCreated {
					continue
				}
				_, e := r.envelope(t)
				if r.Status != http.StatusServiceUnavailable || e.Code != posture.CodeUnavailable || !strings.Contains(e.Message, c.want) {
					t.Fatalf("write %d on a full disk: %d %s, want 503 %q", i, r.Status, r.Body, c.want)
				}
				if took > 5*time.Second {
					t.Fatalf("the refusal took %v", took)
				}
				t.Logf("write %d refused after %v: %s", i, took.Round(time.Millisecond), e.Message)
				refused = r
				break
			}
			_ = refused
			if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "out of disk space") {
				t.Fatalf("no ERROR line about the disk in the log:\n%s", logs.String())
			}
			status, body := n.get(t, "/readyz")
			if status != http.StatusServiceUnavailable || !strings.Contains(body, "out of disk space") {
				t.Fatalf("readyz on a full disk: %d %s", status, body)
			}
			t.Logf("readyz: %d %s", status, body)
			part := map[string]string{"nats": "log", "projections": "projection"}[c.part]
			if _, metrics := n.get(t, "/metrics"); !strings.Contains(metrics, fmt.Sprintf(`postured_out_of_space{part=%q} 1`, part)) {
				t.Fatalf("metrics on a full disk:\n%s", grepLines(metrics, "out_of_space"))
			}
			// Still refused a moment later: nothing came back by itself.
			if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": "x", "typeId": "DOMAIN", "domain": "corp"}); r.Status != http.StatusServiceUnavailable {
				t.Fatalf("write on a full disk: %d %s", r.Status, r.Body)
			}

			giveBack()
			start := time.Now()
			for {
				r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": "x", "typeId": "DOMAIN", "domain": "corp"})
				results = append(results, postResult{status: r.Status, requestID: r.Header.Get("X-Request-Id")})
				if r.Status == http.StatusCreated {
					break
				}
				if time.Since(start) > 20*time.Second {
					t.Fatalf("writes did not resume within 20s of freeing space: %d %s\n%s", r.Status, r.Body, logs.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			t.Logf("writes resumed %v after the space was freed", time.Since(start).Round(time.Millisecond))
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				if status, _ := n.get(t, "/readyz"); status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("not ready 10s after the space was freed: %s", logs.String())
				}
			}
			ok, failed := checkExactlyOnce(t, results, postureByRequest(t, n))
			if err := n.store.WaitFor(t.Context(), n.lastSeq(t)); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d writes answered 2xx, all in the log once and applied; %d refused", ok, failed)
			if _, metrics := n.get(t, "/metrics"); !strings.Contains(metrics, fmt.Sprintf(`postured_out_of_space{part=%q} 0`, part)) {
				t.Fatalf("metrics after freeing space:\n%s", grepLines(metrics, "out_of_space"))
			}
			// The node registry (a bucket in memory, lost when JetStream
			// restarts) lists the node again.
			for deadline := time.Now().Add(3 * eventlog.NodeTTL); ; time.Sleep(200 * time.Millisecond) {
				r := n.do(t, http.MethodGet, api.ManagementBase+"/controllers", admin, nil)
				if data, _ := r.envelope(t); r.Status == http.StatusOK && strings.Contains(string(data), `"isOnline":true`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the node is not in GET /controllers after the space was freed: %d %s", r.Status, r.Body)
				}
			}
		})
	}
}

func (n *testNode) get(t *testing.T, path string) (int, string) {
	t.Helper()
	r := n.do(t, http.MethodGet, path, "", nil)
	if strings.HasPrefix(path, "/readyz") {
		var env struct {
			Data api.ReadyView `json:"data"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil {
			t.Fatalf("readyz: %v: %s", err, r.Body)
		}
	}
	return r.Status, string(r.Body)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestFullProjectionStopAndRestart runs the binary with its projection on a
// tmpfs that fills (no reserve: Pebble's writes are held on ENOSPC), stops
// it with SIGTERM while its writes are held (it must exit, not wait for the
// disk), gives the space back and starts it again: it catches up with the
// log and takes writes.
func TestFullProjectionStopAndRestart(t *testing.T) {
	dir := t.TempDir()
	mnt := filepath.Join(dir, "projections")
	mountTmpfs(t, mnt, 96<<20)
	// No posture budget: one identity fills the disk with 200 KB bulks,
	// more than the default budget lets through.
	env := []string{"POSTURED_ADMIN_PASSWORD=" + testAdminPassword, "POSTURED_DISK_RESERVE_MIB=0", "POSTURED_WRITE_BUDGET_KIB=0"}
	p := startBinary(t, dir, env...)
	tok, err := p.login("admin", testAdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	giveBack := ballast(t, mnt, 3<<20)
	for i := 0; ; i++ {
		if i == 200 {
			t.Fatal("200 writes of 200 KB on a full disk, none refused")
		}
		status, _, body, err := p.request(http.MethodPost, clientAPI+"/posture-response-bulk", tok, bulkPosture(i))
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusCreated {
			continue
		}
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), "the projection is out of disk space") {
			t.Fatalf("write %d on a full disk: %d %s", i, status, body)
		}
		t.Logf("write %d refused: %s", i, body)
		break
	}
	start := time.Now()
	p.stop(t)
	t.Logf("stopped with SIGTERM in %v while the disk was full", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(p.log(), "out of disk space") {
		t.Fatalf("nothing about the disk on stderr:\n%s", p.log())
	}

	giveBack()
	p = startBinary(t, dir, env...) // ready: the projection caught up with the log
	if status, _, body, err := p.request(http.MethodPost, clientAPI+"/posture-response", tok,
		map[string]any{"id": "x", "typeId": "DOMAIN", "domain": "corp"}); err != nil || status != http.StatusCreated {
		t.Fatalf("write after the restart: %d %s %v", status, body, err)
	}
	p.stop(t)
}
