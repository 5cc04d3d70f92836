package projections_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// Events that share a message of the log (a batch of group commit: one
// sequence, parts 0, 1, ...) leave what the same events one message each
// leave: no history entry, failed request or would-deny of one hides
// another of the same message, and the cursor is the message's sequence.
func TestBatchedEvents(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	var payloads []posture.Payload
	ids := []string{"ident-a", "ident-b"}
	for _, id := range ids {
		payloads = append(payloads, posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}})
	}
	for i := range 12 {
		id := ids[i%2]
		switch i % 3 {
		case 0:
			payloads = append(payloads, posture.PostureRecorded{IdentityID: id, APISessionID: "apis-" + id,
				Responses: []posture.PostureResponse{{ID: "os", TypeID: "OS", Type: "Windows", Version: fmt.Sprintf("10.0.%d", i)}}})
		default:
			payloads = append(payloads, posture.SessionDenied{IdentityID: id, APISessionID: "apis-" + id, ServiceID: fmt.Sprintf("s%02d", i),
				ServiceName: "crm", Type: posture.Dial, PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol1", PolicyName: "crm-dial", Checks: []posture.CheckFailure{}}}})
		}
	}
	// single: a message each; batched: the identities one message each,
	// then the facts in messages of 4 (same identity twice in each).
	var single, batched []posture.Event
	for i, p := range payloads {
		e := posture.MustEvent(p, at.Add(time.Duration(i)*time.Second))
		e.ID = fmt.Sprintf("ev-%03d", i)
		e.Seq = uint64(i + 1)
		single = append(single, e)
		if i >= len(ids) {
			k := i - len(ids)
			e.Seq, e.Part = uint64(len(ids)+1+k/4), k%4
		}
		batched = append(batched, e)
	}

	// answers applies events, messages at a time per Apply (a message's
	// events are applied together, as the log delivers them).
	answers := func(events []posture.Event, messages int) (any, uint64) {
		s := openMem(t, vfs.NewMem())
		defer s.Close()
		for len(events) > 0 {
			n, seen := 0, 0
			for n < len(events) && (seen < messages || events[n].Part > 0) {
				if events[n].Part == 0 {
					seen++
				}
				n++
			}
			if err := s.Apply(events[:n]); err != nil {
				t.Fatal(err)
			}
			events = events[n:]
		}
		type view struct {
			Failed  [][]posture.FailedServiceRequest
			History [][]posture.HistoryEntry
			Fleet   []posture.FleetFailedRequest
		}
		var v view
		for _, id := range ids {
			f, err := s.FailedRequests(id)
			if err != nil {
				t.Fatal(err)
			}
			h, err := s.History(id, time.Time{}, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range h {
				h[i].Seq, h[i].Part = 0, 0 // the positions differ, by construction
			}
			v.Failed, v.History = append(v.Failed, f), append(v.History, h)
		}
		fleet, err := s.FleetFailedRequests(0)
		if err != nil {
			t.Fatal(err)
		}
		v.Fleet = fleet
		return v, s.Cursor()
	}
	want, _ := answers(single, 1)
	for _, messages := range []int{1, 2, 64} {
		got, cursor := answers(batched, messages)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Apply of %d messages at a time: batched events answer otherwise (-single +batched):\n%s", messages, diff)
		}
		if last := batched[len(batched)-1].Seq; cursor != last {
			t.Fatalf("cursor %d, want %d", cursor, last)
		}
	}
}

// messageLog is a log whose messages may be batches: it delivers whole
// messages with from <= Seq <= to, one message per call.
type messageLog []posture.Event

func (l messageLog) Read(ctx context.Context, from, to uint64, fn func([]posture.Event) error) error {
	for i := 0; i < len(l); {
		j := i + 1
		for j < len(l) && l[j].Seq == l[i].Seq {
			j++
		}
		if s := l[i].Seq; s >= from && (to == 0 || s <= to) {
			if err := fn(l[i:j]); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// A replay to a moment that falls between the events of a batch takes the
// batch whole, so that reading on from its cursor (a backtest's window
// after its start, a replayed directory served) misses none of it.
func TestReplayToAMomentInsideABatch(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	mk := func(p posture.Payload, seq uint64, part int, d time.Duration) posture.Event {
		e := posture.MustEvent(p, at.Add(d))
		e.ID, e.Seq, e.Part = fmt.Sprintf("ev-%d-%d", seq, part), seq, part
		return e
	}
	denied := func(svc string) posture.Payload {
		return posture.SessionDenied{IdentityID: "ident-a", APISessionID: "apis-a", ServiceID: svc, ServiceName: svc, Type: posture.Dial,
			PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol1", PolicyName: "p", Checks: []posture.CheckFailure{}}}}
	}
	log := messageLog{
		mk(posture.Created[posture.Identity]{Entity: posture.Identity{ID: "ident-a", Name: "a", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}}, 1, 0, 0),
		mk(denied("s1"), 2, 0, time.Second),
		mk(denied("s2"), 2, 1, 3*time.Second),
		mk(denied("s3"), 3, 0, 4*time.Second),
	}
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	if _, err := s.ReplayTo(context.Background(), log, projections.Moment{At: at.Add(2 * time.Second)}, nil); err != nil {
		t.Fatal(err)
	}
	if c := s.Cursor(); c != 2 {
		t.Fatalf("cursor after the moment: %d, want 2 (the batch whole)", c)
	}
	if err := log.Read(context.Background(), s.Cursor()+1, 0, s.Apply); err != nil {
		t.Fatal(err)
	}
	f, err := s.FailedRequests("ident-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(f) != 3 {
		t.Fatalf("%d failed requests after reading on, want 3: %+v", len(f), f)
	}
}
