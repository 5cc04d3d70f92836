package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

var rewriteScenario = flag.Bool("rewrite-scenario", false, "run the ops scenario live and record it in testdata/ops")

const (
	scenarioEvents      = "testdata/ops/scenario.events.jsonl"
	scenarioCheckpoints = "testdata/ops/checkpoints.json"
	scenarioGrace       = time.Second
)

// checkpoint is what the live system showed at a moment of the scenario.
type checkpoint struct {
	Name     string                         `json:"name"`
	At       time.Time                      `json:"at"`
	Seq      uint64                         `json:"seq"`
	Identity posture.IdentityPosture        `json:"identityPosture"`
	Sessions []posture.SessionPosture       `json:"sessionPosture"`
	Failures []posture.FailedServiceRequest `json:"failures"`
}

type scenarioIDs struct {
	Identity string    `json:"identity"`
	CRM      string    `json:"crm"`
	Vault    string    `json:"vault"`
	WakeAt   time.Time `json:"wakeAt"`
}

type scenarioRecord struct {
	IDs         scenarioIDs  `json:"ids"`
	Checkpoints []checkpoint `json:"checkpoints"`
}

// TestRecordScenario runs the ops scenario on a live node and records its
// events and what the live system showed at each checkpoint. Run it with
// -rewrite-scenario, then review the diff.
func TestRecordScenario(t *testing.T) {
	if !*rewriteScenario {
		t.Skip("run with -rewrite-scenario to record testdata/ops")
	}
	cfg := defaultTestConfig(t.TempDir())
	cfg.MFAGrace = scenarioGrace
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	var rec scenarioRecord
	mark := func(name string) {
		seq := n.lastSeq(t)
		if err := n.store.WaitFor(t.Context(), seq); err != nil {
			t.Fatal(err)
		}
		e, err := n.elog.Get(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		ip, sessions, err := n.store.PostureData(rec.IDs.Identity)
		if err != nil {
			t.Fatal(err)
		}
		failures, err := n.store.FailedRequests(rec.IDs.Identity)
		if err != nil {
			t.Fatal(err)
		}
		rec.Checkpoints = append(rec.Checkpoints, checkpoint{Name: name, At: e.At, Seq: seq, Identity: ip, Sessions: sessions, Failures: failures})
	}
	rec.IDs.CRM = n.create(t, admin, "services", map[string]any{"name": "crm"})
	rec.IDs.Vault = n.create(t, admin, "services", map[string]any{"name": "vault"})
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "windows-10",
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.19041"}}}})
	mfa := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-on-wake", "promptOnWake": true})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-crm", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + rec.IDs.CRM}, "postureCheckRoles": []string{"@" + osCheck}})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-vault", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + rec.IDs.Vault}, "postureCheckRoles": []string{"@" + mfa}})
	ep := n.endpoint(t, admin, "laptop-7", "laptops")
	rec.IDs.Identity = ep.id
	mark("logged in")

	session := func(svc string, want int) {
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != want {
			t.Fatalf("session for %s: %d %s", svc, r.Status, r.Body)
		}
	}
	respond := func(body map[string]any) {
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, body); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	session(rec.IDs.CRM, http.StatusConflict)
	respond(map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "10.0.19045"})
	session(rec.IDs.CRM, http.StatusCreated)
	mark("good posture")

	if _, err := n.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	session(rec.IDs.Vault, http.StatusCreated)
	from := n.lastSeq(t) + 1
	respond(map[string]any{"id": "0", "typeId": "ENDPOINT_STATE", "woken": true})
	wake, err := n.elog.Get(t.Context(), from)
	if err != nil {
		t.Fatal(err)
	}
	rec.IDs.WakeAt = wake.At
	n.waitForEvent(t, from, posture.TypeDeadlineReached, 15*time.Second)
	mark("grace over")

	respond(map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "6.1.7601"})
	session(rec.IDs.CRM, http.StatusConflict)
	mark("bad posture")

	// Record the log.
	f, err := os.Create(scenarioEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := n.elog.Read(t.Context(), 1, 0, func(batch []posture.Event) error {
		for _, e := range batch {
			line, err := json.Marshal(tailLine{Event: e, Seq: e.Seq})
			if err != nil {
				return err
			}
			if _, err := f.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	data, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(scenarioCheckpoints, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// loadScenario appends the recorded events to a fresh embedded log, with
// their ids and times.
func loadScenario(t *testing.T) (*eventlog.Log, scenarioRecord) {
	t.Helper()
	var rec scenarioRecord
	data, err := os.ReadFile(scenarioCheckpoints)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	l := scenarioLog(t, filepath.Join(t.TempDir(), "nats"))
	t.Cleanup(func() { l.Close() })
	return l, rec
}

// scenarioLog opens a fresh embedded log in dir and appends the recorded
// scenario's events to it, with their ids and times. The caller closes it.
func scenarioLog(t *testing.T, dir string) *eventlog.Log {
	t.Helper()
	l, err := eventlog.Open(t.Context(), eventlog.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(scenarioEvents)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line tailLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		seq, err := l.Append(t.Context(), line.Event)
		if err != nil {
			t.Fatal(err)
		}
		if seq != line.Seq {
			t.Fatalf("event %s appended at %d, recorded at %d", line.ID, seq, line.Seq)
		}
	}
	return l
}

// TestReplayUntilMatchesTheLiveSystem replays the recorded scenario up to
// each checkpoint's time: posture data and the failure ring are what the
// live system showed then.
func TestReplayUntilMatchesTheLiveSystem(t *testing.T) {
	l, rec := loadScenario(t)
	for _, cp := range rec.Checkpoints {
		store, err := replayInMemory(t.Context(), l, cutoff{until: cp.At})
		if err != nil {
			t.Fatal(err)
		}
		ip, sessions, err := store.PostureData(rec.IDs.Identity)
		if err != nil {
			t.Fatal(err)
		}
		failures, err := store.FailedRequests(rec.IDs.Identity)
		if err != nil {
			t.Fatal(err)
		}
		got := checkpoint{Name: cp.Name, At: cp.At, Seq: store.Cursor(), Identity: ip, Sessions: sessions, Failures: failures}
		if diff := cmp.Diff(asJSON(t, cp), asJSON(t, got)); diff != "" {
			t.Errorf("%s: replay until %s differs from the live system (-live +replay):\n%s", cp.Name, cp.At, diff)
		}
		store.Close()
	}
	// A full replay by sequence ends where the log ends.
	store, err := replayInMemory(t.Context(), l, cutoff{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	last, _ := l.LastSeq(t.Context())
	if store.Cursor() != last {
		t.Fatalf("full replay cursor %d, log ends at %d", store.Cursor(), last)
	}
	partial, err := replayInMemory(t.Context(), l, cutoff{toSeq: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer partial.Close()
	if partial.Cursor() != 5 {
		t.Fatalf("replay --to-seq 5 stopped at %d", partial.Cursor())
	}
}

func asJSON(t *testing.T, v any) string {
	data, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestExplainAroundTheGrace explains the vault decision inside the wake
// grace (passing) and one second after it (failing), naming the wake event
// and the deadline.
func TestExplainAroundTheGrace(t *testing.T) {
	l, rec := loadScenario(t)
	explain := func(at time.Time) posture.Explanation {
		x, err := explainAt(t.Context(), l, nil, rec.IDs.Identity, rec.IDs.Vault, posture.Dial, at)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	deadline := rec.IDs.WakeAt.Add(scenarioGrace)
	inside := explain(deadline.Add(-500 * time.Millisecond))
	after := explain(deadline.Add(time.Second))
	if inside.Decision != posture.DecisionGranted {
		t.Fatalf("inside the grace: %s", asJSON(t, inside))
	}
	if after.Decision != posture.DecisionDenied {
		t.Fatalf("after the grace: %s", asJSON(t, after))
	}
	for _, x := range []posture.Explanation{inside, after} {
		s := x.APISessions[0]
		check := s.Policies[0].Checks[0]
		if check.WakeGraceEnds == nil || !check.WakeGraceEnds.Equal(deadline) {
			t.Fatalf("the deadline is not named: %s", asJSON(t, check))
		}
		woke := false
		for _, r := range s.Related {
			woke = woke || (r.Kind == posture.HistoryEndpoint && r.At.Equal(rec.IDs.WakeAt))
		}
		if !woke {
			t.Fatalf("the wake event is not named: %s", asJSON(t, s.Related))
		}
	}
	if s := after.APISessions[0]; s.LastChange == nil || s.LastChange.Event != posture.TypeDeadlineReached {
		t.Fatalf("the last change after the grace is not the deadline: %s", asJSON(t, after.APISessions[0].LastChange))
	}
	var b bytes.Buffer
	if err := writeExplanation(&b, after); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "wake grace ends") || !strings.Contains(b.String(), "DENIED") {
		t.Fatalf("explanation text:\n%s", b.String())
	}
}

// TestAuditGolden prints the identity's timeline from the recorded scenario
// and compares it with the golden table (-rewrite regenerates it).
func TestAuditGolden(t *testing.T) {
	l, rec := loadScenario(t)
	store, err := replayInMemory(context.Background(), l, cutoff{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	entries, err := store.History(rec.IDs.Identity, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeHistory(&b, entries, false); err != nil {
		t.Fatal(err)
	}
	golden := "testdata/ops/audit.golden"
	if *rewriteSpecs {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), b.String()); diff != "" {
		t.Fatalf("audit differs from %s (-want +got):\n%s", golden, diff)
	}
}

// TestHeapAheadFollowsTheLiveHeap: during a batch job the memory limit
// stays above its floor and grows with what the job keeps live; afterwards
// the settings are back.
func TestHeapAheadFollowsTheLiveHeap(t *testing.T) {
	before := debug.SetMemoryLimit(-1) // a negative limit reads the setting
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	const floor = 1 << 20
	restore := heapAhead(-1, floor, 3)
	if limit := debug.SetMemoryLimit(-1); limit < floor {
		t.Fatalf("limit %d below the floor", limit)
	}
	kept := make([]byte, 32<<20)
	for deadline := time.Now().Add(10 * time.Second); debug.SetMemoryLimit(-1) < 3*int64(len(kept)); {
		if time.Now().After(deadline) {
			t.Fatalf("limit %d after keeping %d bytes live", debug.SetMemoryLimit(-1), len(kept))
		}
		runtime.GC()
		time.Sleep(heapCheck)
	}
	runtime.KeepAlive(kept)
	restore()
	if debug.SetMemoryLimit(-1) != before || debug.SetGCPercent(percent) != percent {
		t.Fatal("settings not restored")
	}
}

// TestServeGC: a node collects at GOGC=400 under a limit of at least
// serveHeap, and leaves the settings alone when GOGC or GOMEMLIMIT is set;
// afterwards the settings are back.
func TestServeGC(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	restore := serveGC()
	got := debug.SetGCPercent(servePercent)
	if got != servePercent {
		t.Errorf("GC percent %d while serving, want %d", got, servePercent)
	}
	if limit := debug.SetMemoryLimit(-1); limit < serveHeap {
		t.Errorf("memory limit %d while serving, below %d", limit, serveHeap)
	}
	restore()
	if debug.SetMemoryLimit(-1) != before || debug.SetGCPercent(percent) != percent {
		t.Fatal("settings not restored")
	}
	for _, env := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "200")
			restore := serveGC()
			if debug.SetMemoryLimit(-1) != before || debug.SetGCPercent(percent) != percent {
				t.Errorf("settings changed with %s set", env)
			}
			restore()
		})
	}
}

// TestAuditAndExplainOverTheAPI: the management API answers the timeline
// and the decision at a moment, now and in the past, and says NOT_FOUND
// for what did not exist then.
func TestAuditAndExplainOverTheAPI(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	before := time.Now().UTC()
	st := newStory(t, n)
	admin, ep, svc := n.adminToken(t), st.ep, st.svc
	denied := st.play(t)

	history := mgmt + "/identities/" + ep.id + "/posture-history"
	var all []posture.HistoryEntry
	n.getJSON(t, history, admin, &all)
	var kinds []string
	for _, e := range all {
		kinds = append(kinds, e.Kind+": "+e.Summary)
	}
	got := strings.Join(kinds, "\n")
	for _, want := range []string{"posture: OS Windows 6.1.7601", "session: Dial session for service crm denied: failing policies laptops-crm",
		"access: policy laptops-crm: failing -> passing", "created by policies laptops-crm"} {
		if !strings.Contains(got, want) {
			t.Fatalf("the timeline lacks %q:\n%s", want, got)
		}
	}
	var early []posture.HistoryEntry
	n.getJSON(t, history+"?until="+denied.Format(time.RFC3339Nano), admin, &early)
	if len(early) == 0 || len(early) >= len(all) || early[len(early)-1].At.After(denied) {
		t.Fatalf("until %s: %d of %d entries", denied, len(early), len(all))
	}

	advice := mgmt + "/identities/" + ep.id + "/policy-advice/" + svc
	var now, then posture.Explanation
	n.getJSON(t, advice, admin, &now)
	n.getJSON(t, advice+"?at="+denied.Format(time.RFC3339Nano), admin, &then)
	if now.Decision != posture.DecisionGranted || then.Decision != posture.DecisionDenied || then.ServiceName != "crm" {
		t.Fatalf("now %s, then %s", asJSON(t, now), asJSON(t, then))
	}
	// The report the failing OS check judged is among the facts behind the
	// denial (it left the policy failing: no last change).
	reported := false
	for _, s := range then.APISessions {
		for _, r := range s.Related {
			reported = reported || r.Kind == posture.HistoryPosture && r.Summary == "OS Windows 6.1.7601"
		}
	}
	if !reported {
		t.Fatalf("the old Windows report is not among the facts of the denial: %s", asJSON(t, then))
	}

	for path, want := range map[string]int{
		advice + "?at=" + before.Add(-time.Second).Format(time.RFC3339Nano): http.StatusNotFound, // before the identity existed
		mgmt + "/identities/" + ep.id + "/policy-advice/nosuch":             http.StatusNotFound,
		advice + "?type=Sideways":                                           http.StatusBadRequest,
		advice + "?at=yesterday":                                            http.StatusBadRequest,
		mgmt + "/identities/nosuch/posture-history":                         http.StatusNotFound,
		history + "?since=soon":                                             http.StatusBadRequest,
	} {
		if r := n.do(t, http.MethodGet, path, admin, nil); r.Status != want {
			t.Errorf("GET %s: %d %s, want %d", path, r.Status, r.Body, want)
		}
	}
	// A service named where its id belongs is not found, with its id to give.
	r := n.do(t, http.MethodGet, mgmt+"/identities/"+ep.id+"/policy-advice/crm?at="+denied.Format(time.RFC3339Nano), admin, nil)
	if r.Status != http.StatusNotFound || !strings.Contains(string(r.Body), `\"crm\" is the name of the service `+svc+`: give its id`) {
		t.Errorf("a service's name for its id: %d %s", r.Status, r.Body)
	}
}

// TestExplanationTextNamesReportOnlyAndStale: the text says why a failing
// check does not deny, or fails on old evidence, as the JSON does.
func TestExplanationTextNamesReportOnlyAndStale(t *testing.T) {
	check := func(c posture.CheckExplanation) string {
		var b bytes.Buffer
		e := posture.Explanation{Type: "Dial", Decision: "granted", APISessions: []posture.SessionExplanation{{
			Policies: []posture.PolicyExplanation{{PolicyName: "p", Passing: true, Checks: []posture.CheckExplanation{c}}}}}}
		if err := writeExplanation(&b, e); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if s := check(posture.CheckExplanation{PostureCheckName: "os", ReportOnly: true}); !strings.Contains(s, "os: failing (report only: does not deny)") {
		t.Errorf("report-only check:\n%s", s)
	}
	if s := check(posture.CheckExplanation{PostureCheckName: "os", Stale: true}); !strings.Contains(s, "os: failing (stale evidence)") {
		t.Errorf("stale check:\n%s", s)
	}
	if s := check(posture.CheckExplanation{PostureCheckName: "os", Passing: true}); !strings.Contains(s, "os: passing\n") {
		t.Errorf("a plain passing check has notes:\n%s", s)
	}
}

// TestCell: a history table's cell is printable and at most maxCell
// characters, so that one long report does not widen every line.
func TestCell(t *testing.T) {
	long := strings.Repeat("aa:bb:cc:dd:ee:ff ", 1000)
	if c := cell(long); utf8.RuneCountInString(c) != maxCell || !strings.HasSuffix(c, "…") || !strings.HasPrefix(c, "aa:bb") {
		t.Fatalf("a long cell: %d characters: %q", utf8.RuneCountInString(c), c)
	}
	if c := cell("MAC aa:bb\x1b[31m"); c != pr("MAC aa:bb\x1b[31m") || strings.ContainsRune(c, 0x1b) {
		t.Fatalf("a short cell with an escape: %q", c)
	}
}

// TestMissingMessagesAreReported: a message missing within the log (deleted,
// or dropped as damaged by the NATS server) leaves the node ready, and
// /readyz, the metrics and every answer rebuilt from the log past it say so.
func TestMissingMessagesAreReported(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := newStory(t, n)
	admin := n.adminToken(t)
	if _, v := n.readyz(t); v.MissingMessages != 0 || v.Warning != "" {
		t.Fatalf("readyz of a whole log: %+v", v)
	}
	first, err := n.elog.LastSeq(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	denied := st.play(t)
	stream, err := n.elog.JetStream().Stream(t.Context(), "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(t.Context(), first+1); err != nil { // the old OS's report
		t.Fatal(err)
	}

	status, v := n.readyz(t)
	if status != http.StatusOK || v.MissingMessages != 1 || !strings.Contains(v.Warning, "run postured audit verify") {
		t.Fatalf("readyz: %d %+v", status, v)
	}
	if r := n.do(t, http.MethodGet, "/metrics", "", nil); !strings.Contains(string(r.Body), "\npostured_log_missing_messages 1\n") {
		t.Fatal("the metrics do not count the missing message")
	}
	var then posture.Explanation
	n.getJSON(t, mgmt+"/identities/"+st.ep.id+"/policy-advice/"+st.svc+"?at="+denied.Format(time.RFC3339Nano), admin, &then)
	want := "(the first: sequence " + strconv.FormatUint(first+1, 10) + ")"
	if !strings.Contains(then.Warning, "1 message is missing from the log") || !strings.Contains(then.Warning, want) {
		t.Fatalf("an answer rebuilt past the missing message: %s", asJSON(t, then))
	}
	var now posture.Explanation
	n.getJSON(t, mgmt+"/identities/"+st.ep.id+"/policy-advice/"+st.svc, admin, &now)
	if now.Warning != "" {
		t.Fatalf("the live projection's answer: %s", asJSON(t, now))
	}

	// A log that lost its start misses those messages too.
	if err := stream.Purge(t.Context(), jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	if _, v := n.readyz(t); v.MissingMessages != 3 {
		t.Fatalf("readyz of a log without its first two messages and one more: %+v", v)
	}
}

func TestGapsThrough(t *testing.T) {
	g := eventlog.Gaps{Head: 2, Deleted: []uint64{5, 9}}
	for seq, want := range map[uint64][2]uint64{1: {1, 1}, 4: {2, 1}, 5: {3, 1}, 8: {3, 1}, 100: {4, 1}} {
		if n, first := g.Through(seq); uint64(n) != want[0] || first != want[1] {
			t.Errorf("through %d: %d from %d, want %d from %d", seq, n, first, want[0], want[1])
		}
	}
	g = eventlog.Gaps{Deleted: []uint64{5, 9}}
	if n, first := g.Through(4); n != 0 || first != 0 {
		t.Errorf("before the first gap: %d from %d", n, first)
	}
	if n, first := g.Through(9); n != 2 || first != 5 || g.Count() != 2 {
		t.Errorf("through 9: %d from %d (count %d)", n, first, g.Count())
	}
}

// TestExplainAfterARestartAsksThePast: a projection opened again does not
// know the time of its last event until it applies another; meanwhile a
// question about a past moment is answered from the log, not from the
// projection as it stands now.
func TestExplainAfterARestartAsksThePast(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	before := time.Now().UTC()
	time.Sleep(10 * time.Millisecond)
	st := newStory(t, n)
	st.play(t)
	dir := t.TempDir()
	store, err := openRebuilt(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rebuild(t.Context(), n.elog, store, cutoff{}, nil); err != nil {
		t.Fatal(err)
	}
	store.Close()
	if store, err = projections.Open(projections.Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if !store.AppliedAt().IsZero() {
		t.Fatalf("a projection opened again knows its last event's time: %s", store.AppliedAt())
	}
	x := explainer{log: n.elog, store: store}
	var pe *posture.Error
	if e, err := x.Explain(t.Context(), st.ep.id, st.svc, posture.Dial, before); !errors.As(err, &pe) || pe.Code != posture.CodeNotFound {
		t.Fatalf("before the identity existed: %v %s", err, asJSON(t, e))
	}
	if e, err := x.Explain(t.Context(), st.ep.id, st.svc, posture.Dial, time.Time{}); err != nil || e.Decision != posture.DecisionGranted {
		t.Fatalf("now: %v %s", err, asJSON(t, e))
	}
}

// TestRestartKnowsItsLastEventTime: a node started again on its data
// directory reads the time of the event at its projection's cursor from
// the log, so that it tells past moments from the present before it
// applies anything new.
func TestRestartKnowsItsLastEventTime(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	discard := slog.New(slog.DiscardHandler)
	n, err := openNode(t.Context(), &cfg, "127.0.0.1:1280", discard)
	if err != nil {
		t.Fatal(err)
	}
	n.Close() // appends the last checkpoint of what it applied
	if n, err = openNode(t.Context(), &cfg, "127.0.0.1:1280", discard); err != nil {
		t.Fatal(err)
	}
	last := n.store.AppliedAt()
	n.Close() // nothing left to cover: nothing appended
	if last.IsZero() {
		t.Fatal("the first starts applied nothing")
	}
	again := defaultTestConfig(cfg.DataDir)
	if n, err = openNode(t.Context(), &again, "127.0.0.1:1280", discard); err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if got := n.store.AppliedAt(); !got.Equal(last) {
		t.Fatalf("after a restart the last event's time is %s, want %s", got, last)
	}
}
