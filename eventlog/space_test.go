package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// TestExternalServerOutOfSpace: an external server whose JetStream store is
// full answers "insufficient resources"; an append must fail within a few
// seconds with 503 out of space, not retry until its context ends.
func TestExternalServerOutOfSpace(t *testing.T) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "full", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(),
		JetStreamMaxStore: 256 << 10, JetStreamMaxMemory: 1 << 20, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{URLs: []string{ns.ClientURL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; ; i++ {
		if i == 1000 {
			t.Fatal("1,000 appends of 4 KB into a 256 KB store, none refused")
		}
		e := event("a", i)
		e.Data = []byte(fmt.Sprintf(`{"s":%q}`, strings.Repeat("x", 4096)))
		actx, cancel := context.WithTimeout(ctx, time.Minute)
		start := time.Now()
		_, err := l.Append(actx, e)
		cancel()
		if err == nil {
			continue
		}
		took := time.Since(start)
		if posture.CodeOf(err) != posture.CodeUnavailable || !errors.Is(err, posture.ErrOutOfSpace) {
			t.Fatalf("append %d into a full store: %v, want SERVICE_UNAVAILABLE out of space", i, err)
		}
		if took > 10*time.Second {
			t.Fatalf("the refusal took %v", took)
		}
		t.Logf("append %d refused after %v: %v", i, took.Round(time.Millisecond), err)
		return
	}
}
