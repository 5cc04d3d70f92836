package eventlog

import (
	"context"
	"testing"
	"time"
)

// TestSyncModeReachesTheServer: --sync always makes the embedded JetStream
// fsync before every acknowledgement; the default leaves it to the
// server's interval.
func TestSyncModeReachesTheServer(t *testing.T) {
	for _, always := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := Open(ctx, Options{Dir: t.TempDir(), SyncAlways: always})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := l.ns.JetStreamConfig().SyncAlways; got != always {
			t.Errorf("SyncAlways %v: the server has %v", always, got)
		}
		l.Close()
	}
}
