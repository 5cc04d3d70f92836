package projections_test

import (
	"testing"
)

// TestIdentitiesByNamePrefix reads identities by a name prefix from the
// name index: those whose name starts with it, in name order, at most the
// limit; an exact name finds its identity; a prefix no name has, none.
func TestIdentitiesByNamePrefix(t *testing.T) {
	s, ids := loadModel(t, 250, 1, 1) // named i0000000 to i0000249
	defer s.Close()
	names := func(prefix string, limit int) string {
		t.Helper()
		got, err := s.IdentitiesByNamePrefix(prefix, limit)
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, id := range got {
			if out != "" {
				out += " "
			}
			out += id.Name
		}
		return out
	}
	if got := names("i000012", 50); got != "i0000120 i0000121 i0000122 i0000123 i0000124 i0000125 i0000126 i0000127 i0000128 i0000129" {
		t.Errorf("prefix i000012: %s", got)
	}
	if got := names("i00001", 3); got != "i0000100 i0000101 i0000102" {
		t.Errorf("prefix i00001, at most 3: %s", got)
	}
	if got := names(ids[42], 50); got != ids[42] {
		t.Errorf("an exact name: %s", got)
	}
	if got := names("j", 50); got != "" {
		t.Errorf("a prefix no name has: %s", got)
	}
	if got := names("", 2); got != "i0000000 i0000001" {
		t.Errorf("no prefix: %s", got)
	}
	if got := names("i", 0); got != "" {
		t.Errorf("limit 0: %s", got)
	}
}
