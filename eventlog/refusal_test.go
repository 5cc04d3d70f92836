package eventlog_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestStreamLimitRefusesAppendsQuickly: a JetStream refusal other than out
// of space (here 10077 "maximum messages exceeded", a stream limit with the
// discard-new policy) fails an append within a few seconds with
// SERVICE_UNAVAILABLE and the server's reason, logged at ERROR, on an
// external server (retried for a grace first) and on the embedded one.
func TestStreamLimitRefusesAppendsQuickly(t *testing.T) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "limited", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	for _, c := range []struct {
		name string
		opts eventlog.Options
	}{
		{"external", eventlog.Options{URLs: []string{ns.ClientURL()}}},
		{"embedded", eventlog.Options{Dir: t.TempDir()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			c.opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			ctx := context.Background()
			l, err := eventlog.Open(ctx, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			s, err := l.JetStream().Stream(ctx, "POSTURED")
			if err != nil {
				t.Fatal(err)
			}
			cfg := s.CachedInfo().Config
			cfg.MaxMsgs, cfg.Discard = 3, jetstream.DiscardNew
			if _, err := l.JetStream().UpdateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := l.Append(ctx, event("a", i)); err != nil {
					t.Fatalf("append %d within the limit: %v", i, err)
				}
			}
			actx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			start := time.Now()
			_, err = l.Append(actx, event("a", 3))
			took := time.Since(start)
			if posture.CodeOf(err) != posture.CodeUnavailable || !errors.Is(err, eventlog.ErrRefused) ||
				!strings.Contains(err.Error(), "maximum messages exceeded") {
				t.Fatalf("append over the stream's limit: %v, want SERVICE_UNAVAILABLE maximum messages exceeded", err)
			}
			var pe *posture.Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, "maximum messages exceeded") {
				t.Fatalf("the caller's message does not say why: %+v", pe)
			}
			if took > 6*time.Second {
				t.Fatalf("the refusal took %v", took)
			}
			if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "maximum messages exceeded") {
				t.Fatalf("no ERROR line for the refusal:\n%s", out)
			}
			t.Logf("refused after %v: %s", took.Round(time.Millisecond), pe.Message)
		})
	}
}
