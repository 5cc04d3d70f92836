package api_test

import (
	"testing"

	"github.com/seed-0809debe/posture/api"
)

// TestHidden: what may not be in a new name, and what may.
func TestHidden(t *testing.T) {
	for r, want := range map[rune]bool{
		0: true, '\n': true, 0x1b: true, 0x85: true, 0x2028: true, 0x2029: true, 0x202e: true, 0x2066: true, 0x200b: true, 0xfeff: true,
		0x034f: true, 0x115f: true, 0x3164: true, 0xffa0: true, 0xe0001: true, 0xfe0f: false,
		'a': false, 'é': false, ' ': false, 0x200c: false, 0x200d: false, '👩': false,
	} {
		if api.Hidden(r) != want {
			t.Errorf("hidden(%U) = %v, want %v", r, !want, want)
		}
	}
}
