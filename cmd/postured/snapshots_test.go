package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// openLiveAndSnapshots opens a fresh projection, in a directory of its own,
// and the snapshots kept in snapDir (keep 0: the default number); the
// caller closes the projection.
func openLiveAndSnapshots(t *testing.T, snapDir string, keep int) (*projections.Store, *projections.Snapshots) {
	t.Helper()
	live, err := projections.Open(projections.Options{Dir: filepath.Join(t.TempDir(), "projections")})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: snapDir, Keep: keep})
	if err != nil {
		live.Close()
		t.Fatal(err)
	}
	return live, snaps
}

// TestPastMomentsFromSnapshotsEqualFullReplay rebuilds the recorded ops
// scenario (an OS check failing and passing, MFA, a wake and the deadline
// at the end of its grace) at many moments, from snapshots taken every
// three events and from a replay of the whole log: the explanations of
// both services and the identity's timeline are equal. The moments: every
// event's time and a nanosecond on either side, each snapshot's times,
// the wake grace's deadline and around it, and random times.
func TestPastMomentsFromSnapshotsEqualFullReplay(t *testing.T) {
	l, rec := loadScenario(t)
	ctx := t.Context()
	live, snaps := openLiveAndSnapshots(t, filepath.Join(t.TempDir(), "snapshots"), 8)
	defer live.Close()
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var events []posture.Event
	if err := l.Read(ctx, 1, 0, func(b []posture.Event) error { events = append(events, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	for seq := uint64(3); seq < last+3; seq += 3 {
		if _, err := live.ReplayTo(ctx, l, projections.Moment{Seq: min(seq, last)}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := snaps.Take(ctx, live, l); err != nil {
			t.Fatal(err)
		}
	}
	list := snaps.List()
	if len(list) != 8 || list[7].Seq != last {
		t.Fatalf("snapshots %+v: want 8, the newest at %d", list, last)
	}

	var moments []time.Time
	for _, e := range events {
		moments = append(moments, e.At, e.At.Add(-1), e.At.Add(1))
	}
	for _, s := range list {
		moments = append(moments, s.MaxAt, s.LastAt)
	}
	deadline := rec.IDs.WakeAt.Add(scenarioGrace)
	moments = append(moments, deadline, deadline.Add(-1), deadline.Add(1), deadline.Add(-time.Millisecond))
	rng := rand.New(rand.NewPCG(16, 4))
	first, end := events[0].At, events[len(events)-1].At.Add(time.Minute)
	for range 30 {
		moments = append(moments, first.Add(time.Duration(rng.Int64N(int64(end.Sub(first))))))
	}

	type answer struct {
		CRM, Vault posture.Explanation
		History    []posture.HistoryEntry
		Errors     []string // NOT_FOUND before the identity or a service existed
	}
	ask := func(snaps *projections.Snapshots, at time.Time) string {
		t.Helper()
		store, release, err := pastMoment(ctx, l, snaps, cutoff{until: at}, rec.IDs.Identity)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		var a answer
		for _, q := range []struct {
			service string
			x       *posture.Explanation
		}{{rec.IDs.CRM, &a.CRM}, {rec.IDs.Vault, &a.Vault}} {
			if *q.x, err = store.Explain(rec.IDs.Identity, q.service, posture.Dial, at); posture.CodeOf(err) == posture.CodeNotFound {
				a.Errors = append(a.Errors, err.Error())
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if a.History, err = store.History(rec.IDs.Identity, time.Time{}, at); err != nil {
			t.Fatal(err)
		}
		data, err := json.MarshalIndent(a, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	fromSnapshot, decisions := 0, map[string]bool{}
	for _, at := range moments {
		want, got := ask(nil, at), ask(snaps, at)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("at %s the snapshot's answer differs from a full replay (-full +snapshot):\n%s", at.Format(time.RFC3339Nano), diff)
		}
		if _, ok := snaps.Nearest(projections.Moment{At: at}); ok {
			fromSnapshot++
		}
		var a answer
		_ = json.Unmarshal([]byte(got), &a)
		decisions[a.CRM.Decision+"/"+a.Vault.Decision] = true
	}
	if fromSnapshot < 60 || len(decisions) < 4 {
		t.Fatalf("%d moments from a snapshot, decisions %v: the moments do not cover the scenario", fromSnapshot, decisions)
	}
}

// TestNarrowedPastMomentsEqualFullReplay asks about one identity of a
// fleet (replayLog's: 1,000 identities with posture, activity and sessions
// interleaved) at random moments and at the snapshots' boundaries: a copy
// of a snapshot with only the events of the model and of that identity
// applied after it answers as a full replay does.
//
// With the facts in batches of group commit, a moment often falls between
// the events of one message: the narrowed read takes it whole, as the full
// replay does.
func TestNarrowedPastMomentsEqualFullReplay(t *testing.T) {
	for _, batch := range []int{1, 7} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) { narrowedPastMoments(t, replayLogIn(t, 6000, batch)) })
	}
}

func narrowedPastMoments(t *testing.T, l *eventlog.Log) {
	ctx := t.Context()
	live, snaps := openLiveAndSnapshots(t, filepath.Join(t.TempDir(), "snapshots"), 0)
	defer live.Close()
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := last / 4; seq <= last; seq += last / 4 {
		if _, err := live.ReplayTo(ctx, l, projections.Moment{Seq: seq}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := snaps.Take(ctx, live, l); err != nil {
			t.Fatal(err)
		}
	}
	first, err := l.Get(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	var moments []time.Time
	for _, s := range snaps.List() {
		moments = append(moments, s.MaxAt, s.MaxAt.Add(-1), s.MaxAt.Add(400*time.Millisecond))
	}
	rng := rand.New(rand.NewPCG(16, 5))
	for range 8 {
		moments = append(moments, first.At.Add(time.Duration(rng.Int64N(int64(6100*time.Millisecond)))))
	}
	ask := func(snaps *projections.Snapshots, at time.Time, identity, service string) string {
		t.Helper()
		store, release, err := pastMoment(ctx, l, snaps, cutoff{until: at}, identity)
		if err != nil {
			t.Fatal(err)
		}
		defer release()
		x, err := store.Explain(identity, service, posture.Dial, at)
		if err != nil && posture.CodeOf(err) != posture.CodeNotFound {
			t.Fatal(err)
		}
		h, herr := store.History(identity, time.Time{}, at)
		if herr != nil {
			t.Fatal(herr)
		}
		data, _ := json.MarshalIndent(map[string]any{"explanation": x, "err": fmt.Sprint(err), "history": h}, "", " ")
		return string(data)
	}
	type question struct {
		at time.Time
		id int
	}
	var questions []question
	for _, at := range moments {
		questions = append(questions, question{at, rng.IntN(1000)})
	}
	// Between the events of a batch: just before an identity's own
	// posture submission that is not its message's first event.
	if err := l.Read(ctx, 1, 0, func(batch []posture.Event) error {
		for _, e := range batch {
			if e.Part > 0 && e.Type == posture.TypePostureRecorded && len(questions) < len(moments)+6 && rng.IntN(50) == 0 {
				var id int
				fmt.Sscanf(strings.TrimPrefix(e.Subject, "posture.id"), "%d", &id)
				questions = append(questions, question{e.At.Add(-time.Microsecond), id})
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	decisions := map[string]int{}
	for i, q := range questions {
		at, id := q.at, q.id
		identity, service := fmt.Sprintf("id%04d", id), fmt.Sprintf("svc%02d", id%10+10*rng.IntN(5))
		want, got := ask(nil, at, identity, service), ask(snaps, at, identity, service)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("moment %d (%s), %s: the narrowed snapshot's answer differs from a full replay (-full +snapshot):\n%s",
				i, at.Format(time.RFC3339Nano), identity, diff)
		}
		var a struct {
			Explanation posture.Explanation `json:"explanation"`
			History     []json.RawMessage   `json:"history"`
		}
		_ = json.Unmarshal([]byte(got), &a)
		decisions[a.Explanation.Decision]++
		decisions["history"] += len(a.History)
	}
	t.Logf("answers: %v", decisions)
	if decisions["granted"] == 0 || decisions["history"] < 20 {
		t.Fatalf("answers %v: the moments do not exercise the fleet", decisions)
	}
}

// TestExplainAtAnswers429BeyondTheLimit holds the only past moment a node
// allows and asks for another over the API: 429 with Retry-After, in the
// header and in the envelope's cause.
func TestExplainAtAnswers429BeyondTheLimit(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.PastMoments = 1
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	before := n.clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	_, release, err := n.snapshots.OpenAt(t.Context(), n.elog, projections.Moment{Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := n.do(t, "GET", api.ManagementBase+"/identities/none/policy-advice/none?at="+before, admin, nil)
	if r.Status != 429 || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("past moment beyond the limit: %d %q %s", r.Status, r.Header.Get("Retry-After"), r.Body)
	}
	var body struct {
		Error struct {
			Code  string `json:"code"`
			Cause struct {
				RetryAfterSeconds int `json:"retryAfterSeconds"`
			} `json:"cause"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil || body.Error.Code != posture.CodeTooManyRequests || body.Error.Cause.RetryAfterSeconds != 1 {
		t.Fatalf("envelope: %s (%v)", r.Body, err)
	}
	release()
	if r := n.do(t, "GET", api.ManagementBase+"/identities/none/policy-advice/none?at="+before, admin, nil); r.Status != 404 {
		t.Fatalf("after release: %d %s", r.Status, r.Body)
	}
	// Year 1 is no past moment of any log (nor "now", as a zero time would read).
	expectError(t, n.do(t, "GET", api.ManagementBase+"/identities/none/policy-advice/none?at=0001-01-01T00:00:00Z", admin, nil),
		400, posture.CodeCouldNotValidate, "at")
}

var _ projections.Reader = (*eventlog.Log)(nil)
