package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/expiry"
	"github.com/seed-0809debe/posture/projections"
	"github.com/seed-0809debe/posture/projections/backtest"
)

// scenarioDataDir is a stopped node's data directory whose log holds the
// recorded ops scenario (testdata/ops): one laptop, a crm service behind an
// OS check and a vault service behind an MFA check that prompts on wake;
// a refusal, two sessions, a wake whose grace ends, then an old Windows
// and a refusal.
func scenarioDataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	scenarioLog(t, filepath.Join(dir, "nats")).Close()
	return dir
}

// backtestCLI runs postured backtest on the data directory and returns the
// exit code, stdout and stderr.
func backtestCLI(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := mainCode(context.Background(), append([]string{"backtest", "--data-dir", dir}, args...), streams{out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// scenarioFrom is a moment of the scenario after the laptop logged in and
// before its first session request: the candidate applies there.
const scenarioFrom = "2026-11-22T13:10:34.819Z"

// TestBacktestGolden backtests a tighter OS check (Windows 11) and the
// vault policy deleted over the recorded scenario: the report, as JSON and
// as the table, equals the golden files (-rewrite regenerates them).
func TestBacktestGolden(t *testing.T) {
	dir := scenarioDataDir(t)
	for _, c := range []struct{ name, candidate string }{
		{"tighten", "tighten.json"},
		{"loosen", "loosen.json"},
		{"mfa-timeout", "mfa-timeout.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			candidate := filepath.Join("testdata/backtest", c.candidate)
			code, out, errOut := backtestCLI(t, dir, "--candidate", candidate, "--from", scenarioFrom, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, filepath.Join("testdata/backtest", c.name+".golden.json"), out)
			code, out, errOut = backtestCLI(t, dir, "--candidate", candidate, "--from", scenarioFrom)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden(t, filepath.Join("testdata/backtest", c.name+".golden.txt"), out)
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *rewriteSpecs {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Fatalf("%s differs (-want +got):\n%s", path, diff)
	}
}

// TestBacktestCandidateDeadline: an MFA check that times out after a
// second instead of prompting on wake reaches a deadline the log never
// recorded; the backtest applies it as a node's timer would have, and the
// vault policy fails then, for the timeout, on the candidate's side only.
func TestBacktestCandidateDeadline(t *testing.T) {
	dir := scenarioDataDir(t)
	code, out, errOut := backtestCLI(t, dir, "--candidate", "testdata/backtest/mfa-timeout.json", "--from", scenarioFrom, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep backtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	var timedOut *backtest.Change
	for i, c := range rep.Changes {
		if c.Kind == "mfa-timed-out" {
			timedOut = &rep.Changes[i]
		}
	}
	if timedOut == nil || timedOut.Candidate != backtest.Happened || timedOut.Recorded != backtest.NotHappened {
		t.Fatalf("no candidate-only MFA timeout in %s", out)
	}
	// Timed as a node's timer times it: a second after the MFA pass (seq
	// 17), and expiry.Delay.
	l := scenarioLog(t, filepath.Join(t.TempDir(), "nats"))
	defer l.Close()
	passed, err := l.Get(t.Context(), 17)
	if err != nil || passed.Type != posture.TypeMFAPassed {
		t.Fatalf("seq 17: %+v %v", passed, err)
	}
	if want := passed.At.Add(time.Second + expiry.Delay); !timedOut.At.Equal(want) {
		t.Fatalf("timed out at %s, want %s (a second after the MFA pass)", timedOut.At, want)
	}
}

// TestBacktestTightenFindings reads the tighter candidate's report for
// what it must say, beyond the golden file's bytes: the crm session the
// laptop got is newly denied for its Windows 10 build, the vault session
// too (no policy grants it any more), and the laptop loses access at the
// first of them.
func TestBacktestTightenFindings(t *testing.T) {
	dir := scenarioDataDir(t)
	code, out, errOut := backtestCLI(t, dir, "--candidate", "testdata/backtest/tighten.json", "--from", scenarioFrom, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep backtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Changed || rep.Totals.Decisions != 4 || rep.Totals.NewlyDenied != 2 || rep.Totals.NewlyAllowed != 0 {
		t.Fatalf("totals: %+v", rep.Totals)
	}
	services := map[string]int{}
	for _, s := range rep.Services {
		services[s.Name] = s.NewlyDeniedRequests
	}
	if services["crm"] != 1 || services["vault"] != 1 {
		t.Fatalf("services: %+v", rep.Services)
	}
	if len(rep.FailingValues) != 1 || rep.FailingValues[0].Value != "Windows 10.0.19045" || rep.FailingValues[0].Identities != 1 {
		t.Fatalf("failing values: %+v", rep.FailingValues)
	}
	if len(rep.LostAccess) != 1 || rep.LostAccess[0].IdentityName != "laptop-7" || rep.LostAccess[0].ServiceName != "crm" {
		t.Fatalf("lost access: %+v", rep.LostAccess)
	}
	if rep.LostAccess[0].Seq != 16 {
		t.Fatalf("lost access at seq %d, want 16 (the first crm session)", rep.LostAccess[0].Seq)
	}
}

// TestBacktestReportOnlyCandidate: the tighter OS check in report mode,
// enforced later, refuses nothing in the window (the requests the check
// refused are newly allowed), but the granted request it would refuse
// once enforced is a change: counted, listed with its report-only failure,
// named with the check's enforceAt, and --fail-on-change fails.
func TestBacktestReportOnlyCandidate(t *testing.T) {
	dir := scenarioDataDir(t)
	args := []string{"--candidate", "testdata/backtest/report-only.json", "--from", scenarioFrom}
	code, out, errOut := backtestCLI(t, dir, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep backtest.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Changed || rep.Totals.NewlyDenied != 0 || rep.Totals.NewlyWouldDeny != 1 || rep.Totals.IdentitiesNewlyWouldDeny != 1 {
		t.Fatalf("totals: %+v", rep.Totals)
	}
	if len(rep.Enforcements) != 1 || rep.Enforcements[0].CheckName != "windows-10" || rep.Enforcements[0].EnforceAt == nil ||
		rep.Enforcements[0].EnforceAt.Year() != 2027 {
		t.Fatalf("enforcements: %+v", rep.Enforcements)
	}
	var change *backtest.Change
	for i, c := range rep.Changes {
		if c.Kind == "session-request" && c.Recorded == backtest.Granted {
			change = &rep.Changes[i]
		}
	}
	if change == nil || change.ServiceName != "crm" || change.Recorded != backtest.Granted || change.Candidate != backtest.WouldDeny ||
		len(change.Failures) == 0 || len(change.Failures[0].Checks) == 0 || !change.Failures[0].Checks[0].ReportOnly {
		t.Fatalf("changes: %+v", rep.Changes)
	}
	if len(rep.Checks) != 1 || rep.Checks[0].Name != "windows-10" || rep.Checks[0].NewlyWouldDenyRequests != 1 || rep.Checks[0].NewlyDeniedRequests != 0 {
		t.Fatalf("checks: %+v", rep.Checks)
	}
	code, out, errOut = backtestCLI(t, dir, append(args, "--fail-on-change")...)
	if code != exitChanged || !strings.Contains(out, "would be denied once those checks are enforced") ||
		!strings.Contains(out, "Check windows-10 only reports: it refuses nothing in the window, and is enforced at 2027-06-01T00:00:00.000Z") {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitChanged, out, errOut)
	}
}

// TestBacktestNoChange: a candidate that puts a check back as it is
// changes nothing, from the start of the log or from a moment in it, and
// --fail-on-change exits 0.
func TestBacktestNoChange(t *testing.T) {
	dir := scenarioDataDir(t)
	for _, from := range []string{"", scenarioFrom} {
		args := []string{"--candidate", "testdata/backtest/same.json", "--json", "--fail-on-change"}
		if from != "" {
			args = append(args, "--from", from)
		}
		code, out, errOut := backtestCLI(t, dir, args...)
		if code != 0 {
			t.Fatalf("from %q: exit %d: %s", from, code, errOut)
		}
		var rep backtest.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Changed || len(rep.Changes) != 0 || rep.Totals.NewlyDenied+rep.Totals.NewlyAllowed != 0 {
			t.Fatalf("from %q: a candidate that changes nothing reports changes: %s", from, out)
		}
		if rep.Totals.Decisions != 4 || rep.Totals.Transitions == 0 || rep.Totals.Transitions != rep.Totals.TransitionsUnchanged {
			t.Fatalf("from %q: totals %+v: every decision and transition should be compared and the same", from, rep.Totals)
		}
	}
}

// TestBacktestExitCodes: 0 without change, 1 with a change and
// --fail-on-change (0 without the flag), 2 for a wrong command line, a
// candidate that does not validate (the message names the field) or one
// that names an unknown id.
func TestBacktestExitCodes(t *testing.T) {
	dir := scenarioDataDir(t)
	unknown := filepath.Join(t.TempDir(), "unknown.json")
	if err := os.WriteFile(unknown, []byte(`{"servicePolicies": {"delete": ["nope"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	typo := filepath.Join(t.TempDir(), "typo.json")
	if err := os.WriteFile(typo, []byte(`{"postureCheck": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	notJSON := filepath.Join(t.TempDir(), "not.json")
	if err := os.WriteFile(notJSON, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	twice := filepath.Join(t.TempDir(), "twice.json")
	if err := os.WriteFile(twice, []byte(`{"postureChecks":{"create":[{"typeId":"OS","name":"x","name":"y"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tooMany := filepath.Join(t.TempDir(), "too-many.json")
	if err := os.WriteFile(tooMany, []byte(`{"servicePolicies": {"delete": [`+strings.Repeat(`"x",`, 1000)+`"x"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"no change", []string{"--candidate", "testdata/backtest/same.json", "--fail-on-change"}, 0, ""},
		{"too many changes", []string{"--candidate", tooMany}, exitBacktestFailed, "candidate: a candidate makes at most 1000 changes"},
		{"change without the flag", []string{"--candidate", "testdata/backtest/tighten.json"}, 0, ""},
		{"change", []string{"--candidate", "testdata/backtest/tighten.json", "--fail-on-change"}, exitChanged, ""},
		{"invalid body", []string{"--candidate", "testdata/backtest/bad.json"}, exitBacktestFailed, "postureChecks.create[0].operatingSystems"},
		{"unknown id", []string{"--candidate", unknown}, exitBacktestFailed, `servicePolicies.delete[0]: service policy "nope" was not found`},
		{"unknown key", []string{"--candidate", typo}, exitBacktestFailed, `unknown field "postureCheck"`},
		{"not JSON", []string{"--candidate", notJSON}, exitBacktestFailed, "it is not JSON: invalid character 'o' in literal null"},
		{"a key twice", []string{"--candidate", twice}, exitBacktestFailed, `the candidate is not valid: an object has the key "name" twice, in postureChecks.create[0]`},
		{"a window in the future", []string{"--candidate", "testdata/backtest/tighten.json", "--from", "720h", "--fail-on-change"}, exitUsage, `--from "720h" is in the future`},
		{"no candidate", []string{}, exitUsage, "--candidate"},
		{"bad time", []string{"--candidate", "testdata/backtest/same.json", "--from", "yesterday"}, exitUsage, "--from"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := backtestCLI(t, dir, c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.code, out, errOut)
			}
			if !strings.Contains(errOut, c.stderr) {
				t.Fatalf("stderr %q does not say %q", errOut, c.stderr)
			}
		})
	}
}

// TestBacktestOverTheAPI: an admin posts a candidate that requires Windows
// 11 on a node where three laptops asked for the crm service; the answer is
// 202 with a job, whose report (read with wait=, which answers when the
// job ends) says that the two Windows 10 laptops would newly be denied,
// with their builds, and the one already refused changes nothing.
// Malformed candidates are 400 with the field's path, unknown ids 404.
func TestBacktestOverTheAPI(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	check := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "windows-10",
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.19041"}}}})
	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + check}})
	for _, l := range []struct {
		name, version string
		status        int
	}{{"alice", "10.0.19045", http.StatusCreated}, {"bobby", "10.0.19044", http.StatusCreated}, {"carol", "6.1.7601", http.StatusConflict}} {
		ep := n.endpoint(t, admin, l.name, "laptops")
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token,
			map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": l.version}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm}); r.Status != l.status {
			t.Fatalf("%s's session: %d %s", l.name, r.Status, r.Body)
		}
	}
	candidate := map[string]any{"postureChecks": map[string]any{"update": map[string]any{check: map[string]any{
		"typeId": "OS", "name": "windows-10", "operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.22000"}}}}}}}

	started := startJob(t, n, admin, candidate)
	r := n.do(t, http.MethodGet, mgmt+"/backtests/"+started.ID+"?wait=60", admin, nil)
	data, _ := r.envelope(t)
	var job backtest.JobView
	if err := json.Unmarshal(data, &job); err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusOK || job.Status != backtest.StatusDone || job.Report == nil {
		t.Fatalf("job: %d %s", r.Status, r.Body)
	}
	rep := job.Report
	if rep.Totals.Decisions != 3 || rep.Totals.NewlyDenied != 2 || rep.Totals.IdentitiesNewlyDenied != 2 || rep.Totals.NewlyAllowed != 0 {
		t.Fatalf("totals: %+v", rep.Totals)
	}
	values := map[string]int{}
	for _, v := range rep.FailingValues {
		values[v.Value] = v.Identities
	}
	if !cmp.Equal(values, map[string]int{"Windows 10.0.19045": 1, "Windows 10.0.19044": 1}) {
		t.Fatalf("failing values: %+v", rep.FailingValues)
	}
	if job.Progress.Seq == 0 || job.Progress.Seq != job.Progress.LastSeq {
		t.Fatalf("progress: %+v", job.Progress)
	}

	for _, c := range []struct {
		name   string
		body   any
		status int
		code   string
		field  string
		says   string
	}{
		{"no type", map[string]any{"postureChecks": map[string]any{"create": []any{map[string]any{"name": "x"}}}},
			http.StatusBadRequest, posture.CodeCouldNotValidate, "postureChecks.create[0].typeId", ""},
		{"bad type", map[string]any{"servicePolicies": map[string]any{"create": []any{map[string]any{"name": "p", "type": "Sideways"}}}},
			http.StatusBadRequest, posture.CodeCouldNotValidate, "servicePolicies.create[0].type", ""},
		{"unknown update", map[string]any{"postureChecks": map[string]any{"update": map[string]any{"nope": map[string]any{"typeId": "OS", "name": "n"}}}},
			http.StatusNotFound, posture.CodeNotFound, "", "postureChecks.update.nope"},
		{"unknown delete", map[string]any{"servicePolicies": map[string]any{"delete": []string{"nope"}}},
			http.StatusNotFound, posture.CodeNotFound, "", "servicePolicies.delete[0]"},
		{"unknown key", map[string]any{"postureCheck": map[string]any{}},
			http.StatusBadRequest, posture.CodeCouldNotParseBody, "", "postureCheck"},
		{"an array for updates", map[string]any{"postureChecks": map[string]any{"update": []any{}}},
			http.StatusBadRequest, posture.CodeCouldNotParseBody, "", "postureChecks.update: expected an object, got a JSON array"},
		{"bad from", map[string]any{"from": "yesterday"},
			http.StatusBadRequest, posture.CodeCouldNotValidate, "from", ""},
		{"until year 1", map[string]any{"until": "0001-01-01T00:00:00Z"},
			http.StatusBadRequest, posture.CodeCouldNotValidate, "until", "1970 or later"},
		// A candidate is never empty by mistake.
		{"null", "null", http.StatusBadRequest, posture.CodeCouldNotParseBody, "", "must be a JSON object with postureChecks and servicePolicies (each with create, update, delete); it is JSON, but not an object"},
		{"not JSON", "not json", http.StatusBadRequest, posture.CodeCouldNotParseBody, "", "not valid JSON: invalid character 'o' in literal null"},
		{"more after the object", "{}]", http.StatusBadRequest, posture.CodeCouldNotParseBody, "", "more after the value"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := n.do(t, http.MethodPost, mgmt+"/backtests", admin, c.body)
			expectError(t, r, c.status, c.code, c.field)
			if !strings.Contains(string(r.Body), c.says) {
				t.Fatalf("%s does not say %q", r.Body, c.says)
			}
		})
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/backtests/nope", admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	for _, wait := range []string{"NaN", "-1", "abc", "61", "1e300"} {
		expectError(t, n.do(t, http.MethodGet, mgmt+"/backtests/"+started.ID+"?wait="+wait, admin, nil), http.StatusBadRequest, posture.CodeCouldNotValidate, "wait")
	}
}

// snapshotScenario takes a snapshot of the scenario's projection after
// every event, into the data directory's snapshots/ as a node keeps them.
func snapshotScenario(t *testing.T, dir string) {
	t.Helper()
	ctx := t.Context()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	live, snaps := openLiveAndSnapshots(t, filepath.Join(dir, "snapshots"), 1000)
	defer live.Close()
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= last; seq++ {
		if _, err := live.ReplayTo(ctx, l, projections.Moment{Seq: seq}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := snaps.Take(ctx, live, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(snaps.List()); n != int(last) {
		t.Fatalf("%d snapshots, want one per event (%d)", n, last)
	}
}

// TestBacktestGoldenFromSnapshots: with the node's snapshots in the data
// directory, the command starts the window from the nearest one; the
// reports are the golden files of the replay from the start
// (TestBacktestGolden), and --no-snapshots gives them too.
func TestBacktestGoldenFromSnapshots(t *testing.T) {
	dir := scenarioDataDir(t)
	snapshotScenario(t, dir)
	for _, name := range []string{"tighten", "loosen", "mfa-timeout"} {
		for _, extra := range [][]string{nil, {"--no-snapshots"}} {
			args := append([]string{"--candidate", filepath.Join("testdata/backtest", name+".json"), "--from", scenarioFrom, "--json"}, extra...)
			code, out, errOut := backtestCLI(t, dir, args...)
			if code != 0 {
				t.Fatalf("%s %v: exit %d: %s", name, extra, code, errOut)
			}
			want, err := os.ReadFile(filepath.Join("testdata/backtest", name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), out); diff != "" {
				t.Fatalf("%s %v: the report differs from the golden one (-want +got):\n%s", name, extra, diff)
			}
		}
	}
}

// TestBacktestFromSnapshotsEqualsReplay runs backtests of the scenario
// with the window starting at every event's time (and a nanosecond
// before), from the nearest snapshot and from a replay of the log from its
// start: the reports are equal. Most of them start from a snapshot after
// the first event. (TestBacktestGoldenFromSnapshots covers mfa-timeout.)
func TestBacktestFromSnapshotsEqualsReplay(t *testing.T) {
	dir := scenarioDataDir(t)
	snapshotScenario(t, dir)
	ctx := t.Context()
	l, err := logFlags{DataDir: dir}.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.snapshots == nil {
		t.Fatal("the data directory's snapshots were not opened")
	}
	var events []posture.Event
	if err := l.Read(ctx, 1, 0, func(b []posture.Event) error { events = append(events, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	candidates := map[string][]byte{}
	// Not mfa-timeout: where a deadline only the candidate reaches falls
	// near the window's start, its report depends on where the log's read
	// batches happen to end (the engine looks for such deadlines at the
	// end of each batch), from a replay as from a snapshot.
	for _, name := range []string{"tighten", "loosen"} {
		body, err := os.ReadFile(filepath.Join("testdata/backtest", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		candidates[name] = body
	}
	fromSnapshot := 0
	for _, e := range events {
		for _, from := range []time.Time{e.At, e.At.Add(-1)} {
			if s, ok := l.snapshots.Nearest(projections.Moment{At: from}); ok && s.Seq > 1 {
				fromSnapshot++
			}
			for name, body := range candidates {
				changes, err := parseCandidate(ctx, l.Log, body, from)
				if err != nil {
					t.Fatal(err)
				}
				run := func(snaps *projections.Snapshots) string {
					rep, err := backtest.Run(ctx, backtest.Options{Log: l.Log, Open: backtestState(l.Log, snaps, ""), Changes: changes, From: from})
					if err != nil {
						t.Fatalf("%s from %s: %v", name, from, err)
					}
					out, err := json.MarshalIndent(rep, "", "  ")
					if err != nil {
						t.Fatal(err)
					}
					return string(out)
				}
				if diff := cmp.Diff(run(nil), run(l.snapshots)); diff != "" {
					t.Fatalf("%s from %s: the report from a snapshot differs from the replay's (-replay +snapshot):\n%s", name, from, diff)
				}
			}
		}
	}
	if fromSnapshot < len(events) {
		t.Fatalf("only %d of %d windows started from a snapshot after the first event", fromSnapshot, 2*len(events))
	}
}
