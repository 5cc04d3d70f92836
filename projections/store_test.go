package projections_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata")

// readEvents loads a recorded event file: one JSON event per line, with its
// sequence in "seq".
func readEvents(t testing.TB, name string) []posture.Event {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []posture.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var rec struct {
			posture.Event
			Seq uint64 `json:"seq"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		rec.Event.Seq = rec.Seq
		out = append(out, rec.Event)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func openMem(t testing.TB, fs vfs.FS) *projections.Store {
	t.Helper()
	s, err := projections.Open(projections.Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dump(t testing.TB, s *projections.Store) string {
	t.Helper()
	var b bytes.Buffer
	if err := s.Dump(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// replay applies events in batches of the given size and returns the dump.
func replay(t testing.TB, s *projections.Store, events []posture.Event, batch int) {
	t.Helper()
	for i := 0; i < len(events); i += batch {
		end := min(i+batch, len(events))
		if err := s.Apply(events[i:end]); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplayDeterminism(t *testing.T) {
	events := readEvents(t, "foundation.events.jsonl")

	a := openMem(t, vfs.NewMem())
	defer a.Close()
	replay(t, a, events, 1)

	b := openMem(t, vfs.NewMem())
	defer b.Close()
	replay(t, b, events, 7)

	// Stopped halfway, closed, reopened, resumed: applying everything again
	// skips what is at or below the cursor.
	fs := vfs.NewMem()
	c := openMem(t, fs)
	replay(t, c, events[:len(events)/2], 3)
	c.Close()
	c = openMem(t, fs)
	defer c.Close()
	if got, want := c.Cursor(), events[len(events)/2-1].Seq; got != want {
		t.Fatalf("cursor after reopen %d, want %d", got, want)
	}
	replay(t, c, events, 5)

	// Without a write-ahead log (a replay's store), closed and reopened:
	// Close kept everything.
	fs = vfs.NewMem()
	d, err := projections.Open(projections.Options{Dir: "db", FS: fs, NoWAL: true})
	if err != nil {
		t.Fatal(err)
	}
	replay(t, d, events, 11)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d = openMem(t, fs)
	defer d.Close()

	da, db, dc := dump(t, a), dump(t, b), dump(t, c)
	if diff := cmp.Diff(da, dump(t, d)); diff != "" {
		t.Fatalf("a store without a write-ahead log lost writes (-with +without):\n%s", diff)
	}
	if !strings.Contains(da, `"e/identities/ident00005"`) || strings.Contains(da, `"e/identities/ident00004"`) {
		t.Fatalf("the dump does not hold the scenario's state:\n%s", da)
	}
	// The scenario exercises evaluation: posture, MFA, a denied request, a
	// session created and one removed when the MFA deadline passed.
	for _, want := range []string{`"p/i/ident00002"`, `"e/mfa/ident00002"`, `"p/f/ident00003/`, `passing -> failing`,
		`Dial session sess000001 for service crm removed`, `\"pol0000001\":false`} {
		if !strings.Contains(da, want) {
			t.Errorf("the dump lacks %s: the scenario no longer exercises evaluation", want)
		}
	}
	if strings.Contains(da, `"e/sessions/sess000001"`) {
		t.Error("the Dial session outlived the MFA deadline")
	}
	if diff := cmp.Diff(da, db); diff != "" {
		t.Fatalf("batching changed the projection (-one +seven):\n%s", diff)
	}
	if diff := cmp.Diff(da, dc); diff != "" {
		t.Fatalf("resume changed the projection (-full +resumed):\n%s", diff)
	}
	golden := filepath.Join("testdata", "foundation.dump")
	if *rewrite {
		if err := os.WriteFile(golden, []byte(da), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), da); diff != "" {
		t.Fatalf("projection differs from %s (-want +got):\n%s", golden, diff)
	}
}

func TestEveryEventTypeHasAHandler(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	for i, typ := range posture.EventTypes() {
		// A body that decodes to the zero payload: the handler must exist and
		// accept it (most are no-ops on missing entities).
		e := posture.Event{ID: typ, Type: typ, Subject: "x", Seq: uint64(i + 1), At: time.Unix(0, 0).UTC(), Data: []byte(`{}`)}
		if err := s.Apply([]posture.Event{e}); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

func TestUnknownEventStopsTheStore(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	err := s.Apply([]posture.Event{{ID: "x", Type: "no.such.type", Seq: 1, Data: []byte(`{}`)}})
	if err == nil {
		t.Fatal("unknown event type applied")
	}
	if s.Cursor() != 0 {
		t.Fatalf("cursor moved to %d", s.Cursor())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.WaitFor(ctx, 1); err == nil || ctx.Err() != nil {
		t.Fatalf("WaitFor must return the apply error at once, got %v", err)
	}
}

func TestWaitForIsABarrier(t *testing.T) {
	events := readEvents(t, "foundation.events.jsonl")
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	done := make(chan error, 1)
	go func() { done <- s.WaitFor(context.Background(), 3) }()
	replay(t, s, events[:2], 1)
	select {
	case err := <-done:
		t.Fatalf("WaitFor(3) returned at cursor 2: %v", err)
	default:
	}
	replay(t, s, events[:3], 1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := s.WaitFor(ctx, 1000); err == nil {
		t.Fatal("WaitFor past the end returned without ctx ending")
	}
}

// A projection written with an older layout (one without a layout version)
// is discarded on open, so that the log rebuilds it in the current one.
func TestOlderLayoutIsRebuilt(t *testing.T) {
	events := readEvents(t, "foundation.events.jsonl")
	fs := vfs.NewMem()
	s := openMem(t, fs)
	replay(t, s, events, 4)
	want := dump(t, s)
	s.Close()

	// Layout 1 had no version key.
	db, err := pebble.Open("db", &pebble.Options{FS: fs, Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete([]byte("v"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s = openMem(t, fs)
	if got := s.Cursor(); got != 0 {
		t.Fatalf("cursor %d after opening an older layout, want 0 (rebuild)", got)
	}
	// Only the current layout's version is left.
	if got := dump(t, s); !strings.HasPrefix(got, "\"v\" ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("an older layout was kept:\n%s", got)
	}
	replay(t, s, events, 4)
	if diff := cmp.Diff(want, dump(t, s)); diff != "" {
		t.Fatalf("rebuilt projection differs (-before +rebuilt):\n%s", diff)
	}

	// The current layout is kept as it is.
	s.Close()
	s = openMem(t, fs)
	defer s.Close()
	if got := s.Cursor(); got != events[len(events)-1].Seq {
		t.Fatalf("cursor %d after reopening the current layout, want %d", got, events[len(events)-1].Seq)
	}
}

type quiet struct{}

func (quiet) Infof(string, ...any)           {}
func (quiet) Errorf(string, ...any)          {}
func (quiet) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// TestChangeIndicatorAlwaysMoves: two changes to an identity's access in the
// same millisecond still move its change indicator, at the millisecond
// resolution clients compare.
func TestChangeIndicatorAlwaysMoves(t *testing.T) {
	s := &scenario{t: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	id := posture.Identity{ID: "ident00001", Name: "laptop-1", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}, CreatedAt: s.t, UpdatedAt: s.t}
	s.add(posture.Created[posture.Identity]{Entity: id}, 0)
	s.add(posture.Created[posture.Service]{Entity: posture.Service{ID: "svc0000001", Name: "crm", RoleAttributes: []string{"apps"}, CreatedAt: s.t, UpdatedAt: s.t}}, 0)
	s.add(posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: "pol0000001", Name: "p", Type: "Dial", Semantic: "AnyOf",
		IdentityRoles: []string{"#laptops"}, ServiceRoles: []string{"#apps"}, CreatedAt: s.t, UpdatedAt: s.t}}, 0)
	s.add(posture.APISessionCreated{APISession: posture.APISession{ID: "apis000001", IdentityID: id.ID, CreatedAt: s.t, LastActivityAt: s.t}}, time.Second)

	st := openMem(t, vfs.NewMem())
	defer st.Close()
	replay(t, st, s.events, len(s.events))
	last := func() time.Time {
		t.Helper()
		at, err := st.LastChange(id.ID)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	prev := last()
	for i, roles := range [][]string{{}, {"laptops"}, {}} {
		id.RoleAttributes = roles
		s.add(posture.Updated[posture.Identity]{Entity: id}, time.Microsecond)
		replay(t, st, s.events[len(s.events)-1:], 1)
		now := last()
		if !now.Truncate(time.Millisecond).After(prev.Truncate(time.Millisecond)) {
			t.Fatalf("change %d: indicator %v after %v", i, now, prev)
		}
		prev = now
	}
}

// TestProcessesAreBounded: an identity that reports ever new process paths
// keeps the newest 256 of them, and of long paths as many as 64 KiB hold; a
// path reported again is fresh again.
func TestProcessesAreBounded(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	a := &applier{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
	identity := "i1"
	report := func(paths ...string) {
		t.Helper()
		var rs []posture.PostureResponse
		for _, p := range paths {
			rs = append(rs, posture.PostureResponse{ID: "proc", TypeID: "PROCESS", Path: p, IsRunning: true})
		}
		a.apply(t, posture.PostureRecorded{IdentityID: identity, APISessionID: "as1", Responses: rs})
	}
	path := func(i int) string { return fmt.Sprintf("/bin/p%03d", i) }
	for i := range 250 {
		report(path(i))
	}
	report(path(0)) // /bin/p000 is now the newest
	// Ten new paths in one response make 260: the four stalest go,
	// /bin/p001 to /bin/p004.
	var bulk []string
	for i := 250; i < 260; i++ {
		bulk = append(bulk, path(i))
	}
	report(bulk...)
	ip, _, err := s.PostureData("i1")
	if err != nil {
		t.Fatal(err)
	}
	if len(ip.Processes) != 256 {
		t.Fatalf("%d processes kept, want 256", len(ip.Processes))
	}
	kept := map[string]bool{}
	for _, p := range ip.Processes {
		kept[p.Path] = true
	}
	for i := range 260 {
		if want := i == 0 || i > 4; kept[path(i)] != want {
			t.Errorf("%s kept: %v, want %v", path(i), kept[path(i)], want)
		}
	}

	// Long paths: 64 KiB hold the newest 16 of 4,000 characters.
	identity = "i2"
	for i := range 20 {
		report(path(i) + strings.Repeat("/x", 1998))
	}
	if ip, _, err = s.PostureData("i2"); err != nil {
		t.Fatal(err)
	}
	if n := len(ip.Processes); n != 16 || !strings.HasPrefix(ip.Processes[0].Path, path(4)) {
		t.Fatalf("%d long processes kept, from %.10s; want the newest 16, from %s", n, ip.Processes[0].Path, path(4))
	}
}

// applier applies payloads one event at a time: the n-th with sequence n,
// at at plus n steps.
type applier struct {
	s    *projections.Store
	at   time.Time
	step time.Duration
	seq  uint64
}

func (a *applier) apply(t testing.TB, p posture.Payload) {
	t.Helper()
	a.seq++
	e := posture.MustEvent(p, a.at.Add(time.Duration(a.seq)*a.step))
	e.Seq = a.seq
	if err := a.s.Apply([]posture.Event{e}); err != nil {
		t.Fatal(err)
	}
}

// TestChangesPosture: a response changes an identity's posture when its
// values differ from those recorded (as recording compares them: MAC
// addresses and hashes whatever their case and separators), or when it
// signals a wake or unlock.
func TestChangesPosture(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	a := &applier{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
	os := posture.PostureResponse{ID: "os", TypeID: "OS", Type: "Windows", Version: "10.0.19045"}
	mac := posture.PostureResponse{ID: "mac", TypeID: "MAC", MACAddresses: []string{"AA:BB:CC:DD:EE:FF"}}
	proc := posture.PostureResponse{ID: "p", TypeID: "PROCESS", Path: "/bin/av", IsRunning: true, Hash: "ABCD"}
	a.apply(t, posture.PostureRecorded{IdentityID: "i1", APISessionID: "as1", Responses: []posture.PostureResponse{os, mac, proc}})
	// An identity with as many processes as it keeps: a new one drops the
	// stalest.
	var full []posture.PostureResponse
	for i := range 256 {
		full = append(full, posture.PostureResponse{ID: "p", TypeID: "PROCESS", Path: fmt.Sprintf("/p/%03d", i), IsRunning: true})
	}
	a.apply(t, posture.PostureRecorded{IdentityID: "full", APISessionID: "as2", Responses: full})
	with := func(f func(r *posture.PostureResponse), r posture.PostureResponse) []posture.PostureResponse {
		f(&r)
		return []posture.PostureResponse{r}
	}
	for name, c := range map[string]struct {
		identity  string
		responses []posture.PostureResponse
		want      bool
	}{
		"the same OS": {"i1", []posture.PostureResponse{os}, false},
		"the same values, written other": {"i1", append(with(func(r *posture.PostureResponse) { r.MACAddresses = []string{"aabb.ccdd.eeff"} }, mac),
			with(func(r *posture.PostureResponse) { r.Hash = "abcd" }, proc)...), false},
		"another OS version":             {"i1", with(func(r *posture.PostureResponse) { r.Version = "6.1.7601" }, os), true},
		"a process stopped":              {"i1", with(func(r *posture.PostureResponse) { r.IsRunning = false }, proc), true},
		"a new process":                  {"i1", with(func(r *posture.PostureResponse) { r.Path = "/bin/other" }, proc), true},
		"the process, for another check": {"i1", with(func(r *posture.PostureResponse) { r.ID = "other" }, proc), true},
		"a wake":                         {"i1", []posture.PostureResponse{{TypeID: posture.ResponseEndpointState, Woken: true}}, true},
		"an endpoint state without news": {"i1", []posture.PostureResponse{{TypeID: posture.ResponseEndpointState}}, false},
		"an identity's first report":     {"i2", []posture.PostureResponse{os}, true},
		"nothing":                        {"i1", nil, false},
		"a new process, the list full":   {"full", with(func(r *posture.PostureResponse) { r.Path = "/new" }, proc), true},
	} {
		if got, err := s.ChangesPosture(c.identity, c.responses); err != nil || got != c.want {
			t.Errorf("%s: %v %v, want %v", name, got, err, c.want)
		}
	}
}

// TestHistoryTail: the newest entries of a window, as History's entries of
// the window end with, whatever the window and the limit.
func TestHistoryTail(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := &applier{s: s, at: t0, step: time.Second}
	for i := range 300 {
		id := []string{"i1", "i2", "i1"}[i%3]
		a.apply(t, posture.PostureRecorded{IdentityID: id, APISessionID: "as", Responses: []posture.PostureResponse{
			{ID: "os", TypeID: "OS", Type: "Linux", Version: fmt.Sprintf("6.%d.0", i)}}})
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, c := range []struct {
		since, until time.Time
		limit        int
	}{
		{time.Time{}, time.Time{}, 10}, {time.Time{}, time.Time{}, 1000}, {time.Time{}, at(150), 7}, {at(100), at(150), 1000},
		{at(100), at(150), 5}, {time.Time{}, at(0), 10}, {at(400), time.Time{}, 10}, {time.Time{}, at(299), 3}, {at(30), time.Time{}, 500},
	} {
		all, err := s.History("i1", c.since, c.until)
		if err != nil {
			t.Fatal(err)
		}
		want := all[max(0, len(all)-c.limit):]
		got, more, err := s.HistoryTail("i1", c.since, c.until, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(got, want, cmpopts.EquateEmpty()) || more != (len(all) > c.limit) {
			t.Errorf("since %s until %s limit %d: %d entries (more %v), want the last %d of %d", c.since, c.until, c.limit, len(got), more, len(want), len(all))
		}
	}

	// A page of the window, as History's entries of the window hold it.
	for _, c := range []struct {
		since, until  time.Time
		offset, limit int
	}{
		{time.Time{}, time.Time{}, 0, 10}, {time.Time{}, time.Time{}, 190, 50}, {at(100), at(150), 3, 5}, {time.Time{}, at(0), 0, 10},
		{at(400), time.Time{}, 0, 10}, {time.Time{}, at(299), 500, 10}, {at(30), time.Time{}, 0, 500},
	} {
		all, err := s.History("i1", c.since, c.until)
		if err != nil {
			t.Fatal(err)
		}
		start := min(c.offset, len(all))
		want := all[start:min(start+c.limit, len(all))]
		got, total, err := s.HistoryPage("i1", c.since, c.until, c.offset, c.limit)
		if err != nil || total != len(all) || !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
			t.Errorf("page since %s until %s from %d, %d: %d entries of %d (%v), want %d of %d", c.since, c.until, c.offset, c.limit, len(got), total, err, len(want), len(all))
		}
	}

	// Entries out of time order by less than the nodes' clocks may be (a
	// node whose clock is ahead appended the second).
	for i, d := range []int{400, 410, 402} {
		e := posture.MustEvent(posture.PostureRecorded{IdentityID: "i3", APISessionID: "as", Responses: []posture.PostureResponse{
			{ID: "os", TypeID: "OS", Type: "Linux", Version: fmt.Sprintf("7.%d.0", i)}}}, at(d))
		a.seq++
		e.Seq = a.seq
		if err := s.Apply([]posture.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := s.History("i3", time.Time{}, at(405))
	if got, _, err := s.HistoryTail("i3", time.Time{}, at(405), 10); err != nil || len(all) != 2 || !cmp.Equal(got, all) {
		t.Errorf("out of order: %d entries (%v), want History's %d", len(got), err, len(all))
	}
	if got, total, err := s.HistoryPage("i3", time.Time{}, at(405), 0, 10); err != nil || total != 2 || !cmp.Equal(got, all) {
		t.Errorf("a page out of order: %d entries of %d (%v), want History's %d", len(got), total, err, len(all))
	}
}

// TestPostureHistoryOneEntryPerFact: a posture event's history holds one
// entry per fact it set: the last response of each type (and process
// path and check), and one for its wake and unlock together.
func TestPostureHistoryOneEntryPerFact(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	a := &applier{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
	os := func(v string) posture.PostureResponse {
		return posture.PostureResponse{ID: "os", TypeID: "OS", Type: "Linux", Version: v}
	}
	procFor := func(check, path string) posture.PostureResponse {
		return posture.PostureResponse{ID: check, TypeID: "PROCESS", Path: path, IsRunning: true}
	}
	proc := func(path string) posture.PostureResponse { return procFor("p", path) }
	wake := posture.PostureResponse{TypeID: posture.ResponseEndpointState, Woken: true}
	unlock := posture.PostureResponse{TypeID: posture.ResponseEndpointState, Unlocked: true}
	responses := []posture.PostureResponse{os("6.1"), wake, proc("/a"), os("6.2"), proc("/b"), procFor("q", "/a"), proc("/a"), wake, unlock, os("6.3")}
	for range 100 {
		responses = append(responses, wake)
	}
	a.apply(t, posture.PostureRecorded{IdentityID: "i1", APISessionID: "as1", Responses: responses})
	h, err := s.History("i1", time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range h {
		got = append(got, e.Summary)
	}
	// A process of each path and check: /a answered two checks.
	want := []string{"process /b running for check p", "process /a running for check q", "process /a running for check p",
		"OS Linux 6.3", "endpoint woken and unlocked"}
	if !slices.Equal(got, want) {
		t.Fatalf("history %q, want %q", got, want)
	}
	var r posture.PostureResponse
	if err := json.Unmarshal(h[4].Detail, &r); err != nil || !r.Woken || !r.Unlocked {
		t.Fatalf("the endpoint entry's detail: %s", h[3].Detail)
	}
}

// TestAccessBefore: each policy's newest change of state before a time, as
// History's access entries before it say, for every identity and every
// time in its history; and no further back than the limit.
func TestAccessBefore(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	replay(t, s, readEvents(t, "foundation.events.jsonl"), 5)
	ids, err := s.Identities()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, id := range ids {
		all, err := s.History(id.ID, time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range all {
			var want []posture.HistoryEntry
			latest := map[string]int{}
			for _, e := range all {
				var tr struct {
					PolicyID string `json:"policyId"`
				}
				if e.Kind != posture.HistoryAccess || !e.At.Before(h.At) || json.Unmarshal(e.Detail, &tr) != nil {
					continue
				}
				if i, ok := latest[tr.PolicyID]; ok {
					want = slices.Delete(want, i, i+1)
					for p, j := range latest {
						if j > i {
							latest[p] = j - 1
						}
					}
				}
				latest[tr.PolicyID] = len(want)
				want = append(want, e)
			}
			got, err := s.AccessBefore(id.ID, h.At, 1000)
			if err != nil || !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
				t.Fatalf("%s before %s: %v (%v), want %v", id.ID, h.At, got, err, want)
			}
			checked += len(want)
		}
		if got, err := s.AccessBefore(id.ID, time.Now(), 0); err != nil || len(got) != 0 {
			t.Fatalf("%s with no entries to read: %v %v", id.ID, got, err)
		}
	}
	if checked == 0 {
		t.Fatal("the scenario has no policy changes before another entry")
	}
}

// TestOpenMakesAPrivateDirectory: the projection holds what the log does;
// its directory is its owner's alone, as the data directory is, whether
// Open makes it or an earlier version made it readable by others.
func TestOpenMakesAPrivateDirectory(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "projections")
	earlier := filepath.Join(t.TempDir(), "projections")
	if err := os.Mkdir(earlier, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fresh, earlier} {
		s, err := projections.Open(projections.Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm != 0o700 {
			t.Errorf("%s: projection directory mode %v, want 0700", dir, perm)
		}
	}
}

// TestInterrupt: a store with an interrupt stops a change that
// re-evaluates identities with its error, before committing anything; a
// store without one applies it.
func TestInterrupt(t *testing.T) {
	stop := errors.New("stopped")
	for _, interrupted := range []bool{false, true} {
		s := openMem(t, vfs.NewMem())
		a := &applier{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Second}
		at := a.at
		a.apply(t, posture.Created[posture.Identity]{Entity: posture.Identity{ID: "i1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}}})
		a.apply(t, posture.APISessionCreated{APISession: posture.APISession{ID: "as1", TokenHash: "h-as1", IdentityID: "i1",
			AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
		if interrupted {
			s.SetInterrupt(func() error { return stop })
		}
		policy := posture.ServicePolicy{ID: "p1", Name: "p1", Type: posture.Dial, Semantic: posture.AllOf, IdentityRoles: []string{"#laptops"}}
		e := posture.MustEvent(posture.Created[posture.ServicePolicy]{Entity: policy}, at.Add(time.Hour))
		e.Seq = a.seq + 1
		err := s.Apply([]posture.Event{e})
		if interrupted != errors.Is(err, stop) || interrupted == (s.Cursor() == e.Seq) {
			t.Fatalf("interrupted %t: %v, cursor %d", interrupted, err, s.Cursor())
		}
		s.Close()
	}
}
