package console

import (
	"testing"
	"time"
)

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90*time.Second + 300*time.Millisecond:       "1m30s",
		47 * time.Hour:                              "47h0m0s",
		41*24*time.Hour + 3*time.Hour + time.Minute: "41d 3h",
		-(50 * time.Hour):                           "-2d 2h",
		10 * 365 * 24 * time.Hour:                   "3650d 0h",
	} {
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
}
