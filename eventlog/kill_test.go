package eventlog_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// natsServerBinary builds the nats-server of go.mod into the test's
// temporary directory (the build cache makes it a link step after the
// first time).
func natsServerBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the nats-server binary")
	}
	bin := filepath.Join(t.TempDir(), "nats-server")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2").CombinedOutput()
	if err != nil {
		t.Fatalf("go build nats-server: %v\n%s", err, out)
	}
	return bin
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
	}
	return ports
}

// TestConsumeSurvivesKilledServer runs three nats-server processes with an
// R3 stream and SIGKILLs the one the client is connected to, in the middle
// of appends. A killed server does not tell the cluster it leaves, so for a
// few seconds the cluster still places consumers on it; the consumer must
// still deliver every event, in order, within a bound.
func TestConsumeSurvivesKilledServer(t *testing.T) {
	bin := natsServerBinary(t)
	ports := freePorts(t, 6)
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+i]))
	}
	procs := map[string]*exec.Cmd{}
	var urls []string
	for i := range 3 {
		dir := t.TempDir()
		name := fmt.Sprintf("nats-%d", i+1)
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\ncluster { name: kill-test, listen: 127.0.0.1:%d, routes: [%s] }\n",
			name, ports[i], filepath.Join(dir, "js"), ports[3+i], strings.Join(routes, ", "))
		path := filepath.Join(dir, "nats.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(dir, "nats.log")
		logFile, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", path)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			logFile.Close()
			if t.Failed() { // what the server said, to tell a harness fault from a product fault
				out, _ := os.ReadFile(logPath)
				t.Logf("%s log:\n%s", name, lastLines(string(out), 40))
			}
		})
		procs[name] = cmd
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{URLs: urls, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	const before, after = 50, 50
	for i := range before {
		if _, err := l.Append(ctx, event("kill", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan uint64, before+after)
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- l.Consume(cctx, 1, func(b []posture.Event) error {
			for _, e := range b {
				got <- e.Seq
			}
			return nil
		})
	}()
	for want := uint64(1); want <= before; want++ {
		if seq := <-got; seq != want {
			t.Fatalf("got %d, want %d", seq, want)
		}
	}

	victim := l.Conn().ConnectedServerName()
	if procs[victim] == nil {
		t.Fatalf("connected to %q", victim)
	}
	if err := procs[victim].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for i := range after {
		if _, err := l.Append(ctx, event("kill", before+i)); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("appends done %s after the kill", time.Since(killed).Round(time.Millisecond))
	bound := time.NewTimer(30 * time.Second)
	defer bound.Stop()
	for want := uint64(before + 1); want <= before+after; want++ {
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("got %d, want %d", seq, want)
			}
		case err := <-done:
			t.Fatalf("consume ended: %v", err)
		case <-bound.C:
			t.Fatalf("after SIGKILL of %s, event %d was not delivered within 30s", victim, want)
		}
	}
	t.Logf("SIGKILLed %s; every event delivered %s later", victim, time.Since(killed).Round(time.Millisecond))
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
