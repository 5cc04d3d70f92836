package eventlog_test

import (
	"context"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
)

// TestAppendTooLarge: an event larger than the server's message limit is
// refused as REQUEST_ENTITY_TOO_LARGE with its size and the limit, and the
// log keeps working; one just under the limit is stored.
func TestAppendTooLarge(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, t.TempDir())
	defer l.Close()
	limit := int(l.Conn().MaxPayload())

	e := event("a", 1)
	e.Data = []byte(`{"s":"` + strings.Repeat("x", limit) + `"}`)
	_, err := l.Append(ctx, e)
	if posture.CodeOf(err) != posture.CodeRequestEntityTooLarge || !strings.Contains(err.Error(), "bytes the event log accepts") {
		t.Fatalf("append of a %d-byte event: %v, want REQUEST_ENTITY_TOO_LARGE", len(e.Data), err)
	}
	e = event("a", 2)
	e.Data = []byte(`{"s":"` + strings.Repeat("x", limit-1024) + `"}`)
	if seq, err := l.Append(ctx, e); err != nil || seq != 1 {
		t.Fatalf("append just under the limit: %d %v", seq, err)
	}
}
