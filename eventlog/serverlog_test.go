package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
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
// logger at Info, tagged as the server's.
func TestEmbeddedServerLogsThroughSlog(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l, err := eventlog.Open(context.Background(), eventlog.Options{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	found := false
	for _, r := range buf.records(t) {
		if r["component"] != "nats-server" {
			continue
		}
		if r["level"] == "DEBUG" {
			t.Errorf("debug record at info level: %v", r)
		}
		if r["level"] == "INFO" && strings.Contains(r["msg"].(string), "Server is ready") {
			found = true
		}
	}
	if !found {
		t.Errorf("no nats-server record \"Server is ready\" at INFO in:\n%s", buf.b.String())
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
