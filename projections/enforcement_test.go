package projections_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
)

// The foundation scenario ends with a report-only MAC check (seq 42) on a
// policy that alone grants the wiki (seq 44), a session granted only
// because the check reports (45) and the check's switch to enforce (46).
// Before the switch: both identities with an API session fail the check
// only as report, the session holds and is a would-deny, and the impact
// says both would lose the wiki. After it: they fail, and the session is
// gone.
func TestReportOnlyCheck(t *testing.T) {
	events := readEvents(t, "foundation.events.jsonl")
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	replay(t, s, events[:45], 5)

	enforceAt := time.Date(2026, 1, 2, 10, 5, 0, 0, time.UTC)
	due, err := s.DueEnforcements(enforceAt.Add(-time.Millisecond), 10)
	if err != nil || len(due) != 0 {
		t.Fatalf("due a millisecond before enforceAt: %v, %v; want none", due, err)
	}
	due, err = s.DueEnforcements(enforceAt, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]posture.CheckEnforced{{CheckID: "chk0000003", EnforceAt: enforceAt}}, due); diff != "" {
		t.Fatalf("due at enforceAt (-want +got):\n%s", diff)
	}

	counts := countsByKey(t, s)
	if got, want := counts["c/chk0000003"], (posture.FleetCount{Kind: "c", ID: "chk0000003", ReportOnlyFailing: 2}); got != want {
		t.Errorf("check counts %+v, want %+v", got, want)
	}
	if got, want := counts["p/pol0000003"], (posture.FleetCount{Kind: "p", ID: "pol0000003", ReportOnlyFailing: 2}); got != want {
		t.Errorf("policy counts %+v, want %+v", got, want)
	}

	if _, err := s.SessionFor("apis000002", posture.Dial, "svc0000002"); err != nil {
		t.Fatalf("the session granted while the check reports: %v", err)
	}
	wd, err := s.WouldDenies("ident00002")
	if err != nil {
		t.Fatal(err)
	}
	if len(wd) != 1 || wd[0].SessionID != "sess000003" || wd[0].ServiceName != "wiki" ||
		len(wd[0].PolicyFailures) != 1 || !wd[0].PolicyFailures[0].Checks[0].ReportOnly {
		t.Fatalf("would-denies %+v", wd)
	}

	impact, more, err := s.Impact("chk0000003", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	wiki := []posture.ServiceAccess{{ServiceID: "svc0000002", Type: posture.Dial}}
	want := []posture.CheckImpact{
		{IdentityID: "ident00002", Since: time.Date(2026, 1, 2, 10, 3, 2, 0, time.UTC), Loses: wiki, SessionsRemoved: 1},
		{IdentityID: "ident00003", Since: time.Date(2026, 1, 2, 10, 3, 2, 0, time.UTC), Loses: wiki},
	}
	if diff := cmp.Diff(want, impact); diff != "" || more {
		t.Fatalf("impact (-want +got), more %v:\n%s", more, diff)
	}
	page, more, err := s.Impact("chk0000003", "", 1)
	if err != nil || len(page) != 1 || !more {
		t.Fatalf("first page of one: %v, more %v, %v", page, more, err)
	}
	page, more, err = s.Impact("chk0000003", page[0].IdentityID, 1)
	if err != nil || len(page) != 1 || page[0].IdentityID != "ident00003" || more {
		t.Fatalf("second page: %v, more %v, %v", page, more, err)
	}

	replay(t, s, events[45:], 1)
	if _, err := s.SessionFor("apis000002", posture.Dial, "svc0000002"); err == nil {
		t.Fatal("the session outlived the switch to enforce")
	}
	counts = countsByKey(t, s)
	if got, want := counts["c/chk0000003"], (posture.FleetCount{Kind: "c", ID: "chk0000003", Fail: 2}); got != want {
		t.Errorf("check counts after the switch %+v, want %+v", got, want)
	}
	if impact, _, err := s.Impact("chk0000003", "", 10); err != nil || len(impact) != 0 {
		t.Fatalf("impact after the switch: %v, %v", impact, err)
	}
	if due, err := s.DueEnforcements(enforceAt.Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("still due after the switch: %v, %v", due, err)
	}
}

func countsByKey(t *testing.T, s interface {
	FleetCounts() ([]posture.FleetCount, error)
}) map[string]posture.FleetCount {
	t.Helper()
	list, err := s.FleetCounts()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]posture.FleetCount{}
	for _, fc := range list {
		out[fc.Kind+"/"+fc.ID] = fc
	}
	return out
}
