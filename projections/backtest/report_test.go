package backtest

import (
	"encoding/json"
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
	a := newAccumulator(10)
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
