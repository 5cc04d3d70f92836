package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
)

// TestFleetFailedRequests: the fleet-wide index of failed service requests
// holds the newest MaxFleetFailedRequests across identities, newest first,
// beside each identity's own ring of MaxFailedRequests; deleting an
// identity drops its entries from both; a replay in other batch sizes
// rebuilds the same index.
func TestFleetFailedRequests(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var events []posture.Event
	add := func(p posture.Payload) {
		e := posture.MustEvent(p, at.Add(time.Duration(len(events))*time.Second))
		e.ID = fmt.Sprintf("ev-%06d", len(events)+1)
		e.Seq = uint64(len(events) + 1)
		events = append(events, e)
	}
	ids := []string{"ident-a", "ident-b", "ident-c"}
	for _, id := range ids {
		add(posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}})
	}
	// More failures than the fleet keeps: identity i%3, service s<i>.
	total := posture.MaxFleetFailedRequests + 40
	for i := range total {
		add(posture.SessionDenied{IdentityID: ids[i%3], APISessionID: "apis-" + ids[i%3], ServiceID: fmt.Sprintf("s%04d", i),
			ServiceName: "crm", Type: posture.Dial, PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol1", PolicyName: "crm-dial", Checks: []posture.CheckFailure{}}}})
	}

	s := openMem(t, vfs.NewMem())
	defer s.Close()
	replay(t, s, events, 64)

	all, err := s.FleetFailedRequests(0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != posture.MaxFleetFailedRequests {
		t.Fatalf("%d kept, want %d", len(all), posture.MaxFleetFailedRequests)
	}
	for n, f := range all {
		i := total - 1 - n // newest first
		if want := fmt.Sprintf("s%04d", i); f.ServiceID != want || f.IdentityID != ids[i%3] || f.APISessionID != "apis-"+ids[i%3] {
			t.Fatalf("entry %d: %s of %s, want %s of %s", n, f.ServiceID, f.IdentityID, want, ids[i%3])
		}
		if !f.When.Equal(at.Add(time.Duration(len(ids)+i) * time.Second)) {
			t.Fatalf("entry %d: when %s", n, f.When)
		}
	}
	three, err := s.FleetFailedRequests(3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(all[:3], three); diff != "" {
		t.Fatalf("a limit of 3 (-want +got):\n%s", diff)
	}
	own, err := s.FailedRequests("ident-b")
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != posture.MaxFailedRequests {
		t.Fatalf("ident-b keeps %d of its own, want %d", len(own), posture.MaxFailedRequests)
	}

	// A replay in other batches builds the same store, byte for byte.
	other := openMem(t, vfs.NewMem())
	defer other.Close()
	replay(t, other, events, 1)
	if diff := cmp.Diff(dump(t, s), dump(t, other)); diff != "" {
		t.Fatalf("replays in batches of 64 and of 1 differ:\n%s", diff)
	}

	// Deleting ident-b drops its entries from the fleet's index and its ring.
	add(posture.Deleted[posture.Identity]{ID: "ident-b"})
	replay(t, s, events[len(events)-1:], 1)
	after, err := s.FleetFailedRequests(0)
	if err != nil {
		t.Fatal(err)
	}
	var want []posture.FleetFailedRequest
	for _, f := range all {
		if f.IdentityID != "ident-b" {
			want = append(want, f)
		}
	}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Fatalf("after deleting ident-b (-want +got):\n%s", diff)
	}
	if own, err := s.FailedRequests("ident-b"); err != nil || len(own) != 0 {
		t.Fatalf("ident-b's ring after its deletion: %d %v", len(own), err)
	}
}

// BenchmarkSessionDenied applies denials to a store whose fleet-wide index
// is full: each adds to two rings and trims both.
func BenchmarkSessionDenied(b *testing.B) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	s := openMem(b, vfs.NewMem())
	defer s.Close()
	seq := uint64(0)
	deny := func(i int) posture.Event {
		seq++
		e := posture.MustEvent(posture.SessionDenied{IdentityID: fmt.Sprintf("ident-%03d", i%100), APISessionID: "apis", ServiceID: "svc", ServiceName: "crm",
			Type: posture.Dial, PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol1", PolicyName: "crm-dial", Checks: []posture.CheckFailure{}}}}, at)
		e.ID, e.Seq = fmt.Sprintf("ev-%09d", seq), seq
		return e
	}
	for i := range posture.MaxFleetFailedRequests {
		if err := s.Apply([]posture.Event{deny(i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if err := s.Apply([]posture.Event{deny(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
