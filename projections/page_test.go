package projections_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/seed-0809debe/posture"
)

// TestIdentityPage pages through the identities: each once, in name order
// (the model's names are its ids), a short last page, and a page after a
// name that is gone or never was.
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
		after = page[len(page)-1].Name
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("paged %d identities, want the %d in order", len(got), len(ids))
	}
	// After a name between two others: the next one.
	page, err := s.IdentityPage(ids[10]+"x", 1)
	if err != nil || len(page) != 1 || page[0].ID != ids[11] {
		t.Fatalf("page after a missing name: %v %v", page, err)
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

// TestIdentityPageByName: the order is the names', not the ids'.
func TestIdentityPageByName(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []posture.Event
	for i, id := range [][2]string{{"z1", "carol"}, {"a2", "alice"}, {"m3", "bob"}} {
		e := posture.MustEvent(posture.Created[posture.Identity]{Entity: posture.Identity{ID: id[0], Name: id[1], Type: posture.IdentityDevice}}, now)
		e.Seq = uint64(i + 1)
		batch = append(batch, e)
	}
	if err := s.Apply(batch); err != nil {
		t.Fatal(err)
	}
	names := func(after string, limit int) []string {
		page, err := s.IdentityPage(after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, id := range page {
			out = append(out, id.Name)
		}
		return out
	}
	if got := names("", 10); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Fatalf("first page %v", got)
	}
	if got := names("alice", 1); !slices.Equal(got, []string{"bob"}) {
		t.Fatalf("after alice %v", got)
	}
}
