package projections_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// fleet is a generated fleet applied to a store.
type fleet struct {
	s     *projections.Store
	seq   uint64
	now   time.Time
	start time.Time
	batch []posture.Event
}

func (f *fleet) add(tb testing.TB, p posture.Payload, after time.Duration) {
	f.now = f.now.Add(after)
	f.seq++
	e := posture.MustEvent(p, f.now)
	e.ID = fmt.Sprintf("ev-%09d", f.seq)
	e.Seq = f.seq
	f.batch = append(f.batch, e)
	if len(f.batch) == 512 {
		f.flush(tb)
	}
}

func (f *fleet) flush(tb testing.TB) {
	if len(f.batch) == 0 {
		return
	}
	if err := f.s.Apply(f.batch); err != nil {
		tb.Fatal(err)
	}
	f.batch = f.batch[:0]
}

// Fleet checks and policies.
const (
	fleetOS, fleetMFA                 = "c-os", "c-mfa"
	fleetPolicyOS, fleetPolicyMFA     = "p-os", "p-mfa"
	fleetPolicyBoth, fleetMaxAgeHours = "p-both", 1
)

// loadFleet applies n identities, each with an API session and an OS
// report (bad for i%5 == 1), an MFA pass for i%10 == 0 and a wake after it
// for i%50 == 0, under three policies: OS (maxAgeSeconds one hour, deny),
// MFA (one-hour timeout, prompt on wake) for #all, and both for #even.
func loadFleet(tb testing.TB, n int) *fleet {
	tb.Helper()
	start := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	f := &fleet{s: openMem(tb, vfs.NewMem()), now: start, start: start}
	f.add(tb, posture.ConfigChanged{MFAGraceSeconds: 300, APISessionTimeoutSeconds: 86400}, 0)
	f.add(tb, posture.Created[posture.Check]{Entity: posture.Check{ID: fleetOS, Name: "os", TypeID: posture.CheckOS, RoleAttributes: []string{"os"},
		OperatingSystems: []posture.OperatingSystem{{Type: posture.OSLinux, Versions: []string{">=5.0.0"}}}, MaxAgeSeconds: fleetMaxAgeHours * 3600, OnStale: posture.OnStaleDeny}}, 0)
	f.add(tb, posture.Created[posture.Check]{Entity: posture.Check{ID: fleetMFA, Name: "mfa", TypeID: posture.CheckMFA, RoleAttributes: []string{"mfa"},
		TimeoutSeconds: 3600, PromptOnWake: true}}, 0)
	for _, p := range []posture.ServicePolicy{
		{ID: fleetPolicyOS, Name: "os", IdentityRoles: []string{"#all"}, PostureCheckRoles: []string{"@" + fleetOS}},
		{ID: fleetPolicyMFA, Name: "mfa", IdentityRoles: []string{"#all"}, PostureCheckRoles: []string{"@" + fleetMFA}},
		{ID: fleetPolicyBoth, Name: "both", IdentityRoles: []string{"#even"}, PostureCheckRoles: []string{"@" + fleetOS, "@" + fleetMFA}},
	} {
		p.Type, p.Semantic, p.ServiceRoles = posture.Dial, posture.AllOf, []string{"#all"}
		f.add(tb, posture.Created[posture.ServicePolicy]{Entity: p}, 0)
	}
	for i := range n {
		id, sid := fmt.Sprintf("i%07d", i), fmt.Sprintf("a%07d", i)
		attrs := []string{"odd"}
		if i%2 == 0 {
			attrs = []string{"even"}
		}
		f.add(tb, posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice, RoleAttributes: attrs}}, time.Millisecond)
		f.add(tb, posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: sid, IdentityID: id, CreatedAt: f.now, LastActivityAt: f.now}}, 0)
		version := "6.1.0"
		if i%5 == 1 {
			version = "4.0.0"
		}
		f.add(tb, posture.PostureRecorded{IdentityID: id, APISessionID: sid, Responses: []posture.PostureResponse{{ID: fleetOS, TypeID: "OS", Type: "Linux", Version: version}}}, 0)
		if i%10 == 0 {
			f.add(tb, posture.MFAPassed{IdentityID: id, APISessionID: sid}, 0)
		}
		if i%50 == 0 {
			f.add(tb, posture.PostureRecorded{IdentityID: id, APISessionID: sid, Responses: []posture.PostureResponse{{ID: "0", TypeID: posture.ResponseEndpointState, Woken: true}}}, 0)
		}
	}
	f.flush(tb)
	return f
}

func count(n int, pred func(i int) bool) int64 {
	c := int64(0)
	for i := range n {
		if pred(i) {
			c++
		}
	}
	return c
}

func fleetCounts(t testing.TB, s *projections.Store) map[string]posture.FleetCount {
	t.Helper()
	counts, err := s.FleetCounts()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]posture.FleetCount{}
	for _, c := range counts {
		out[c.ID] = c
	}
	return out
}

// TestFleetSummary checks the counters and indexes against what the
// generated fleet must give, then after every deadline of the next two
// hours is reached (the OS evidence has gone stale, the MFA timed out),
// and after every API session ended.
func TestFleetSummary(t *testing.T) {
	const n = 1000
	f := loadFleet(t, n)
	defer f.s.Close()
	s := f.s
	got := fleetCounts(t, s)
	want := map[string]posture.FleetCount{
		fleetPolicyOS:   {Pass: count(n, func(i int) bool { return i%5 != 1 }), Fail: count(n, func(i int) bool { return i%5 == 1 })},
		fleetPolicyMFA:  {Pass: count(n, func(i int) bool { return i%10 == 0 }), Fail: count(n, func(i int) bool { return i%10 != 0 })},
		fleetPolicyBoth: {Pass: count(n, func(i int) bool { return i%10 == 0 }), Fail: count(n, func(i int) bool { return i%2 == 0 && i%10 != 0 })},
		fleetOS:         {Pass: count(n, func(i int) bool { return i%5 != 1 }), Fail: count(n, func(i int) bool { return i%5 == 1 })},
		fleetMFA:        {Pass: count(n, func(i int) bool { return i%10 == 0 }), Fail: count(n, func(i int) bool { return i%10 != 0 })},
	}
	for id, w := range want {
		g := got[id]
		if g.Pass != w.Pass || g.Fail != w.Fail || g.Stale != w.Stale {
			t.Errorf("%s: %+v, want %+v", id, g, w)
		}
	}

	// Woken sessions are in their 5-minute grace; they lose access within
	// 15 minutes unless a TOTP comes; every passing verdict has a deadline
	// within two hours.
	now := f.now
	grace, nGrace, err := s.InGrace(now, 5)
	if err != nil {
		t.Fatal(err)
	}
	if w := int(count(n, func(i int) bool { return i%50 == 0 })); nGrace != w || len(grace) != 5 || grace[0].IdentityID != "i0000000" || !grace[0].At.Equal(f.start.Add(time.Millisecond).Add(5*time.Minute)) {
		t.Fatalf("in grace: %d %+v, want %d from i0000000", nGrace, grace, w)
	}
	_, nLosing, err := s.LosingAccess(now, now.Add(15*time.Minute), 10)
	if err != nil {
		t.Fatal(err)
	}
	if w := int(count(n, func(i int) bool { return i%50 == 0 })); nLosing != w {
		t.Fatalf("losing access within 15 minutes: %d, want %d", nLosing, w)
	}
	_, nLosing, err = s.LosingAccess(now, now.Add(2*time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if w := int(count(n, func(i int) bool { return i%5 != 1 || i%10 == 0 })); nLosing != w {
		t.Fatalf("losing access within two hours: %d, want %d", nLosing, w)
	}
	oldest, err := s.OldestEvidence(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(oldest) != 3 || oldest[0].IdentityID != "i0000000" || oldest[1].IdentityID != "i0000001" {
		t.Fatalf("oldest evidence: %+v", oldest)
	}

	// Two hours later, every deadline reached: the evidence is stale, the
	// MFA timed out, no grace runs.
	until := f.start.Add(2 * time.Hour)
	for {
		due, err := s.DueDeadlines(until, 512)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		for _, d := range due {
			f.now = d.Deadline.Add(time.Millisecond)
			f.add(t, d, 0)
		}
		f.flush(t)
	}
	got = fleetCounts(t, s)
	// Evidence that passed went stale (a deadline); evidence that failed
	// has no deadline and keeps failing for its values.
	if g, w := got[fleetPolicyOS], count(n, func(i int) bool { return i%5 != 1 }); g.Pass != 0 || g.Stale != w || g.Fail != n-w {
		t.Errorf("OS policy after two hours: %+v, want %d stale, %d failing", g, w, n-w)
	}
	if g := got[fleetPolicyMFA]; g.Pass != 0 || g.Fail != n {
		t.Errorf("MFA policy after two hours: %+v, want %d failing", g, n)
	}
	if _, nGrace, _ := s.InGrace(until, 1); nGrace != 0 {
		t.Errorf("in grace after two hours: %d", nGrace)
	}

	// Every session ends: no standing is left.
	for i := range n {
		f.add(t, posture.APISessionDeleted{ID: fmt.Sprintf("a%07d", i), IdentityID: fmt.Sprintf("i%07d", i), Reason: posture.EndLogout}, 0)
	}
	f.flush(t)
	if got := fleetCounts(t, s); len(got) != 0 {
		t.Errorf("counts after every session ended: %+v", got)
	}
}

var (
	bigFleetOnce sync.Once
	bigFleet     *fleet
)

// BenchmarkPostureSummary reads the whole fleet view (counters of every
// policy and check, the grace windows, what is lost within 15 minutes, the
// 10 oldest pieces of evidence) on a generated fleet of 100,000 identities
// with an API session each, and reports the median and 99th percentile.
func BenchmarkPostureSummary(b *testing.B) {
	bigFleetOnce.Do(func() {
		start := time.Now()
		bigFleet = loadFleet(b, 100_000)
		b.Logf("fleet of 100,000 identities applied in %s (%d events)", time.Since(start).Round(time.Millisecond), bigFleet.seq)
	})
	s, now := bigFleet.s, bigFleet.now
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := s.FleetCounts(); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.InGrace(now, 100); err != nil {
			b.Fatal(err)
		}
		if _, _, err := s.LosingAccess(now, now.Add(15*time.Minute), 100); err != nil {
			b.Fatal(err)
		}
		if _, err := s.OldestEvidence(10); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// TestOldestEvidenceOfAProcessPath: an identity's process evidence is its
// path's newest report, whichever check it answered, so that a report for
// a check it no longer answers does not keep it among the oldest for good.
func TestOldestEvidenceOfAProcessPath(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	a := &applier{s: s, at: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), step: time.Minute}
	report := func(identity, check string) {
		a.apply(t, posture.PostureRecorded{IdentityID: identity, APISessionID: "as-" + identity,
			Responses: []posture.PostureResponse{{ID: check, TypeID: "PROCESS", Path: "/bin/edr", IsRunning: true}}})
	}
	report("i1", "retired") // minute 1
	report("i2", "edr")     // minute 2
	report("i1", "edr")     // minute 3
	oldest, err := s.OldestEvidence(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(oldest) != 2 || oldest[0].IdentityID != "i2" || !oldest[0].At.Equal(a.at.Add(2*time.Minute)) ||
		oldest[1].IdentityID != "i1" || !oldest[1].At.Equal(a.at.Add(3*time.Minute)) {
		t.Fatalf("oldest evidence %+v, want i2 at minute 2, then i1 at minute 3", oldest)
	}
}
