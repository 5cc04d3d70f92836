package projections

import (
	"testing"
	"time"
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
