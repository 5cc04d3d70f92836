package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/eventlog"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(s.b.String()), "\n") {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestEmbeddedServerLogsThroughSlog: the embedded server's notices reach the
// logger tagged as the server's: those of its start (the banner, up to
// "Server is ready") at Debug, later ones at Info.
func TestEmbeddedServerLogsThroughSlog(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l, err := eventlog.Open(context.Background(), eventlog.Options{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	levels := map[string]string{}
	for _, r := range buf.records(t) {
		if r["component"] != "nats-server" {
			continue
		}
		for _, msg := range []string{"Starting nats-server", "Server is ready", "Server Exiting"} {
			if strings.Contains(r["msg"].(string), msg) {
				levels[msg] = r["level"].(string)
			}
		}
	}
	want := map[string]string{"Starting nats-server": "DEBUG", "Server is ready": "DEBUG", "Server Exiting": "INFO"}
	if !maps.Equal(levels, want) {
		t.Errorf("levels %v, want %v, in:\n%s", levels, want, buf.b.String())
	}
}

// TestEmbeddedServerFatalIsReported: when JetStream cannot start on its
// store (here its directory is a regular file), Open fails at once with the
// server's own reason, which is also logged at ERROR.
func TestEmbeddedServerFatalIsReported(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "jetstream"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	start := time.Now()
	_, err := eventlog.Open(context.Background(), eventlog.Options{Dir: dir, Logger: log})
	if err == nil {
		t.Fatal("opened a store whose jetstream directory is a file")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("failed after %s", took)
	}
	if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "JetStream") {
		t.Errorf("error %q names neither the store nor JetStream", err)
	}
	logged := false
	for _, r := range buf.records(t) {
		if r["component"] == "nats-server" && r["level"] == "ERROR" {
			logged = true
		}
	}
	if !logged {
		t.Errorf("no ERROR record from the server in:\n%s", buf.b.String())
	}
	t.Logf("%v", err)
}
