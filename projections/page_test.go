package projections_test

import (
	"slices"
	"testing"
)

// TestIdentityPage pages through the identities: each once, in id order,
// a short last page, and a page after an id that is gone or never was.
func TestIdentityPage(t *testing.T) {
	s, ids := loadModel(t, 250, 1, 1)
	defer s.Close()
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		page, err := s.IdentityPage(after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range page {
			got = append(got, id.ID)
		}
		if len(page) < 100 {
			if pages != 2 || len(page) != 50 {
				t.Fatalf("page %d has %d identities", pages, len(page))
			}
			break
		}
		after = page[len(page)-1].ID
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("paged %d identities, want the %d in order", len(got), len(ids))
	}
	// After an id between two others: the next one.
	page, err := s.IdentityPage(ids[10]+"x", 1)
	if err != nil || len(page) != 1 || page[0].ID != ids[11] {
		t.Fatalf("page after a missing id: %v %v", page, err)
	}
}

// BenchmarkIdentityPage reads a page of 50 from the middle of 100k
// identities (the console's fleet page).
func BenchmarkIdentityPage(b *testing.B) {
	s, ids := loadModel(b, 100_000, 1, 1)
	defer s.Close()
	after := ids[len(ids)/2]
	for b.Loop() {
		page, err := s.IdentityPage(after, 50)
		if err != nil || len(page) != 50 {
			b.Fatal(len(page), err)
		}
	}
}
