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

// A time the console reads as the end of a window stands for the whole of
// its minute, second or last digit, as the API reads it; a duration before
// now is exact.
func TestEndOf(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]string{
		"2026-11-24T06:45":         "2026-11-24T06:45:59.999999999Z",
		"2026-11-24T06:45:43":      "2026-11-24T06:45:43.999999999Z",
		"2026-11-24T06:45:43.464Z": "2026-11-24T06:45:43.464999999Z",
		"2026-11-24T06:45:43,464Z": "2026-11-24T06:45:43.464999999Z",
		"-2h":                      "2026-11-24T10:00:00Z",
	} {
		at, err := parseTime(v, now)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if got := endOf(v, at).Format(time.RFC3339Nano); got != want {
			t.Errorf("endOf(%s) = %s, want %s", v, got, want)
		}
	}
}
