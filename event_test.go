package posture_test

import (
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

// The end of a range stands for the whole of its last written digit: a
// whole second, a millisecond as the API writes times, a time in
// nanoseconds for itself; a comma marks the fraction as a point does.
func TestEndOf(t *testing.T) {
	for s, want := range map[string]string{
		"2026-11-24T06:45:43Z":           "2026-11-24T06:45:43.999999999Z",
		"2026-11-24T07:45:43+01:00":      "2026-11-24T07:45:43.999999999+01:00",
		"2026-11-24T06:45:43.5Z":         "2026-11-24T06:45:43.599999999Z",
		"2026-11-24T06:45:43.464Z":       "2026-11-24T06:45:43.464999999Z",
		"2026-11-24T06:45:43.000Z":       "2026-11-24T06:45:43.000999999Z",
		"2026-11-24T06:45:43.123456789Z": "2026-11-24T06:45:43.123456789Z",
		"2026-11-24T06:45:43,464Z":       "2026-11-24T06:45:43.464999999Z",
	} {
		in, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		if got := posture.EndOf(s, in).Format(time.RFC3339Nano); got != want {
			t.Errorf("EndOf(%s) = %s, want %s", s, got, want)
		}
	}
}
