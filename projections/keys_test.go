package projections

import (
	"bytes"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

// TestTimeKeysSortInTimeOrder: time index keys sort as their times do,
// also past what an int64 of nanoseconds holds (a deadline in the year 9999
// must sort last, never be due at once).
func TestTimeKeysSortInTimeOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Unix(0, 0),
		time.Date(2026, 11, 24, 1, 2, 3, 4, time.UTC),
		time.Date(2026, 11, 24, 1, 2, 3, 5, time.UTC),
		time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
	}
	for i := 1; i < len(times); i++ {
		if a, b := timeKey(times[i-1]), timeKey(times[i]); a > b {
			t.Errorf("timeKey(%s) = %s sorts after timeKey(%s) = %s", times[i-1], a, times[i], b)
		}
	}
	if got := string(dueKey(times[5], "s1")); got <= string(dueKey(times[3], "s1")) {
		t.Errorf("a deadline in 9999 sorts before one in 2026: %s", got)
	}
}

// Keys of a message's transitions and of its events sort in the log's
// order, past 9,999 transitions and across the parts of a batch.
func TestPositionKeysSortInLogOrder(t *testing.T) {
	tk := [][]byte{transitionKey(7, 0), transitionKey(7, 9999), transitionKey(7, 10000), transitionKey(7, 123456789), transitionKey(8, 0)}
	for i := 1; i < len(tk); i++ {
		if bytes.Compare(tk[i-1], tk[i]) >= 0 {
			t.Fatalf("%s sorts at or after %s", tk[i-1], tk[i])
		}
	}
	pos := func(seq uint64, part int) []byte {
		return appendPosition([]byte("h/x/"), posture.Event{Seq: seq, Part: part})
	}
	pk := [][]byte{pos(9, 0), pos(9, 1), pos(9, 10), pos(9, 255), pos(10, 0), pos(100, 0)}
	for i := 1; i < len(pk); i++ {
		if bytes.Compare(pk[i-1], pk[i]) >= 0 {
			t.Fatalf("%s sorts at or after %s", pk[i-1], pk[i])
		}
	}
	if string(pos(9, 0)) != "h/x/00000000000000000009" {
		t.Fatalf("an unbatched event's key changed: %s", pos(9, 0))
	}
}
