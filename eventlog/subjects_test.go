package eventlog_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// TestReadSubjects reads the events of a few subjects out of a log where
// two identities' posture interleaves with model changes: only those, in
// order, up to the bound, with their sequences.
func TestReadSubjects(t *testing.T) {
	ctx := t.Context()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(t.TempDir(), "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []uint64
	for i := range 1200 {
		var p posture.Payload = posture.PostureRecorded{IdentityID: []string{"alice", "bob"}[i%2], APISessionID: "as"}
		if i%100 == 0 {
			p = posture.Created[posture.Service]{Entity: posture.Service{ID: "s" + string(rune('a'+i/100)), Name: "s"}}
		}
		seq, err := l.Append(ctx, posture.MustEvent(p, at.Add(time.Duration(i)*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if (i%2 == 0 || i%100 == 0) && seq >= 5 && seq <= 1101 {
			want = append(want, seq)
		}
	}
	read := func(from, to uint64, subjects ...string) []uint64 {
		var got []uint64
		if err := l.ReadSubjects(ctx, from, to, subjects, func(b []posture.Event) error {
			for _, e := range b {
				got = append(got, e.Seq)
				if e.Subject != posture.SubjectModel && e.Subject != "posture.alice" {
					t.Fatalf("event %d on %s", e.Seq, e.Subject)
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if diff := cmp.Diff(want, read(5, 1101, "model", "posture.alice")); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := read(1, 0, "posture.carol"); len(got) != 0 {
		t.Fatalf("no such subject: %v", got)
	}
	if got := read(1150, 0, "model", "posture.alice"); len(got) != 25 || got[24] != 1199 {
		t.Fatalf("to the end: %d events, last %v", len(got), got)
	}
}
