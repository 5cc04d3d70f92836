package backtest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// TestReportCountsRefusingChecks: a newly denied request counts against
// the checks that refuse it, once each however many policies it fails in;
// a report-only check that also fails is in the request's failures but is
// not blamed, in the per-check impact or in the failing values.
func TestReportCountsRefusingChecks(t *testing.T) {
	store, err := projections.Open(projections.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	strict := posture.CheckFailure{PostureCheckID: "chk-strict", PostureCheckName: "windows-20h1", PostureCheckType: posture.CheckOS,
		ActualValue: json.RawMessage(`{"type":"Windows","version":"10.0.19045"}`)}
	reporting := posture.CheckFailure{PostureCheckID: "chk-report", PostureCheckName: "windows-11", PostureCheckType: posture.CheckOS,
		ActualValue: json.RawMessage(`{"type":"Windows","version":"10.0.19045"}`), ReportOnly: true}
	failures := []posture.PolicyFailure{
		{PolicyID: "pol-1", Checks: []posture.CheckFailure{strict, reporting}},
		{PolicyID: "pol-2", Checks: []posture.CheckFailure{strict}},
	}
	a := newAccumulator(10, 1<<20)
	n := names{store}
	at := time.Date(2026, 11, 24, 10, 32, 0, 0, time.UTC)
	a.decision(decision{seq: 7, at: at, identityID: "id-1", serviceID: "svc", typ: posture.Dial,
		recorded: true, candidate: false, failures: failures}, n)
	// The other way: granted by the candidate, refused as recorded.
	a.decision(decision{seq: 8, at: at, identityID: "id-2", serviceID: "svc", typ: posture.Dial,
		recorded: false, candidate: true, recordedFailures: failures}, n)
	rep := (&run{acc: a}).report()

	if len(rep.Checks) != 1 {
		t.Fatalf("checks %+v, want only the refusing one", rep.Checks)
	}
	if c := rep.Checks[0]; c.ID != "chk-strict" || c.NewlyDeniedRequests != 1 || c.NewlyDeniedIdentities != 1 ||
		c.NewlyAllowedRequests != 1 || c.NewlyAllowedIdentities != 1 {
		t.Errorf("impact of the refusing check %+v, want one request each way", c)
	}
	if len(rep.FailingValues) != 1 || rep.FailingValues[0].CheckID != "chk-strict" || rep.FailingValues[0].Requests != 1 ||
		rep.FailingValues[0].Value != "Windows 10.0.19045" {
		t.Errorf("failing values %+v, want the refusing check's, once", rep.FailingValues)
	}
	// The evidence keeps the report-only failure, marked.
	if len(rep.Changes) != 2 || len(rep.Changes[0].Failures) != 2 || !rep.Changes[0].Failures[0].Checks[1].ReportOnly {
		t.Errorf("changes %+v, want the request's failures as evaluated", rep.Changes)
	}
}

// TestReportIsBounded: a change lists at most maxListedChecks failing
// checks and counts the rest; the changes listed stop at the byte budget,
// the rest counted; the impact still counts every check.
func TestReportIsBounded(t *testing.T) {
	store, err := projections.Open(projections.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var failures []posture.PolicyFailure
	for p := range 40 {
		f := posture.PolicyFailure{PolicyID: fmt.Sprintf("pol-%d", p)}
		for c := range 40 {
			f.Checks = append(f.Checks, posture.CheckFailure{PostureCheckID: fmt.Sprintf("chk-%d", c), PostureCheckType: posture.CheckOS,
				ActualValue: json.RawMessage(`{"type":"Windows","version":"10.0.19045"}`)})
		}
		failures = append(failures, f)
	}
	a := newAccumulator(1000, 64<<10)
	at := time.Date(2026, 11, 24, 10, 32, 0, 0, time.UTC)
	for i := range 100 {
		a.decision(decision{seq: uint64(i + 1), at: at, identityID: fmt.Sprintf("id-%d", i), serviceID: "svc", typ: posture.Dial,
			recorded: true, candidate: false, failures: failures}, names{store})
	}
	rep := (&run{acc: a}).report()
	listed := 0
	for _, f := range rep.Changes[0].Failures {
		listed += len(f.Checks)
	}
	if listed != maxListedChecks || rep.Changes[0].ChecksOmitted != 40*40-maxListedChecks {
		t.Fatalf("a change lists %d checks and omits %d", listed, rep.Changes[0].ChecksOmitted)
	}
	data, err := json.Marshal(rep.Changes)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Changes) == 0 || len(rep.Changes)+rep.ChangesOmitted != 100 || len(data) > 64<<10 || rep.ChangesOmitted == 0 {
		t.Fatalf("%d changes listed (%d bytes), %d omitted", len(rep.Changes), len(data), rep.ChangesOmitted)
	}
	if rep.Totals.NewlyDenied != 100 || len(rep.Checks) != 40 || rep.Checks[0].NewlyDeniedRequests != 100 {
		t.Fatalf("totals %+v, %d checks", rep.Totals, len(rep.Checks))
	}
}

// TestReportWouldDeny: a request granted as recorded that the candidate
// grants only because a failing check reports is a change, blamed on that
// check; one already granted that way as recorded is not.
func TestReportWouldDeny(t *testing.T) {
	store, err := projections.Open(projections.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	reporting := posture.CheckFailure{PostureCheckID: "chk-report", PostureCheckName: "windows-11", PostureCheckType: posture.CheckOS, ReportOnly: true}
	failures := []posture.PolicyFailure{{PolicyID: "pol-1", Checks: []posture.CheckFailure{reporting}}}
	a := newAccumulator(10, 1<<20)
	at := time.Date(2026, 11, 24, 10, 32, 0, 0, time.UTC)
	a.decision(decision{seq: 1, at: at, identityID: "id-1", serviceID: "svc", typ: posture.Dial,
		recorded: true, candidate: true, wouldDeny: true, failures: failures}, names{store})
	a.decision(decision{seq: 2, at: at, identityID: "id-2", serviceID: "svc", typ: posture.Dial,
		recorded: true, candidate: true, wouldDeny: true, recordedWouldDeny: true, failures: failures}, names{store})
	rep := (&run{acc: a}).report()
	if !rep.Changed || rep.Totals.NewlyWouldDeny != 1 || rep.Totals.IdentitiesNewlyWouldDeny != 1 || rep.Totals.NewlyDenied != 0 {
		t.Fatalf("totals %+v", rep.Totals)
	}
	if len(rep.Changes) != 1 || rep.Changes[0].IdentityID != "id-1" || rep.Changes[0].Candidate != WouldDeny {
		t.Fatalf("changes %+v", rep.Changes)
	}
	if len(rep.Checks) != 1 || rep.Checks[0].ID != "chk-report" || rep.Checks[0].NewlyWouldDenyRequests != 1 {
		t.Fatalf("checks %+v", rep.Checks)
	}
}
