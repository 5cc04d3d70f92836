package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
	"github.com/seed-0809debe/posture/projections/backtest"
)

// fleetStart is when the generated fleet's 30 days begin.
var fleetStart = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

// fleetVersions are the Windows builds the generated fleet reports, by
// share of identities (in twentieths): the OS check (>=10.0.19041) refuses
// Windows 7, and the candidate (>=10.0.19045) the 19044 builds too.
var fleetVersions = []struct {
	version string
	share   int
}{{"10.0.19045", 12}, {"10.0.22631", 4}, {"10.0.19044", 3}, {"6.1.7601", 1}}

func fleetVersion(i int) string {
	k := i % 20
	for _, v := range fleetVersions {
		if k < v.share {
			return v.version
		}
		k -= v.share
	}
	panic("shares do not add up to 20")
}

// fleetLog generates the log of a fleet: an OS check, 50 services with a
// Dial policy each that requires it (identities in ten teams, five services
// per team), and the identities, each with an API session, created the day
// before the window. Then, for 30 days, each identity reports its Windows
// build once a week and asks for a session to one of its team's services
// after each report: granted or denied (with the failing check, as the
// client API records it) by the check. With 100,000 identities that is
// 200,000 events before the window and about 860,000 in it.
func fleetLog(b *testing.B, identities int) *eventlog.Log {
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(b.TempDir(), "nats")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	// Published asynchronously on the log's one connection, which keeps
	// their order, with the body an append writes (the event's JSON): a
	// million appends one by one would take most of an hour on a loaded
	// machine.
	js := l.JetStream()
	published := 0
	appendAt := func(p posture.Payload, at time.Time) {
		published++
		e := posture.MustEvent(p, at)
		body, err := json.Marshal(e)
		if err != nil {
			b.Fatal(err)
		}
		msg := &nats.Msg{Subject: "postured." + e.Subject, Data: body, Header: nats.Header{}}
		msg.Header.Set(nats.MsgIdHdr, e.ID)
		if _, err := js.PublishMsgAsync(msg); err != nil {
			// Too many unacknowledged: let them drain, then again.
			<-js.PublishAsyncComplete()
			if _, err := js.PublishMsgAsync(msg); err != nil {
				b.Fatal(err)
			}
		}
	}
	defer func() {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(10 * time.Minute):
			b.Fatal("the generated fleet's events were not all acknowledged")
		}
		last, err := l.LastSeq(ctx)
		if err != nil || int(last) != published {
			b.Fatalf("the log holds %d events, %d published (%v)", last, published, err)
		}
	}()
	before := fleetStart.Add(-24 * time.Hour)
	os := posture.Check{ID: "os", Name: "windows-10", TypeID: posture.CheckOS, RoleAttributes: []string{"os"},
		OperatingSystems: []posture.OperatingSystem{{Type: posture.OSWindows, Versions: []string{">=10.0.19041"}}}}
	appendAt(posture.Created[posture.Check]{Entity: os}, before)
	for i := range 50 {
		id := fmt.Sprintf("svc%02d", i)
		appendAt(posture.Created[posture.Service]{Entity: posture.Service{ID: id, Name: id}}, before)
		appendAt(posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: "p" + id, Name: "p" + id, Type: posture.Dial,
			Semantic: posture.AllOf, IdentityRoles: []string{fmt.Sprintf("#team-%d", i%10)}, ServiceRoles: []string{"@" + id},
			PostureCheckRoles: []string{"#os"}}}, before)
	}
	for i := range identities {
		id := fmt.Sprintf("id%06d", i)
		appendAt(posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice,
			RoleAttributes: []string{fmt.Sprintf("team-%d", i%10)}}}, before)
		appendAt(posture.APISessionCreated{APISession: posture.APISession{ID: "as" + id, TokenHash: "h" + id, IdentityID: id,
			CreatedAt: before, LastActivityAt: before}}, before)
	}
	const days, perWeek = 30, 7 * 24 * time.Hour
	rounds := int((days*24*time.Hour + perWeek - 1) / perWeek) // 5 reports, the last in the 30th day
	window := time.Duration(days) * 24 * time.Hour
	total := rounds * identities
	expected, _ := json.Marshal(os.OperatingSystems)
	for k := range total {
		round, i := k/identities, k%identities
		at := fleetStart.Add(time.Duration(round)*perWeek + time.Duration(i)*perWeek/time.Duration(identities))
		if at.After(fleetStart.Add(window)) {
			break
		}
		id := fmt.Sprintf("id%06d", i)
		version := fleetVersion(i)
		appendAt(posture.PostureRecorded{IdentityID: id, APISessionID: "as" + id, Responses: []posture.PostureResponse{
			{ID: "os", TypeID: "OS", Type: "Windows", Version: version}}}, at)
		svc := fmt.Sprintf("svc%02d", i%10+10*(round%5))
		at = at.Add(time.Second)
		if version != "6.1.7601" {
			appendAt(posture.SessionCreated{Session: posture.Session{ID: fmt.Sprintf("s%d-%d", round, i), IdentityID: id, APISessionID: "as" + id,
				ServiceID: svc, Type: posture.Dial, CreatedAt: at}, Policies: []string{"p" + svc}}, at)
			continue
		}
		actual, _ := json.Marshal(map[string]string{"type": "Windows", "version": version, "build": ""})
		appendAt(posture.SessionDenied{IdentityID: id, APISessionID: "as" + id, ServiceID: svc, ServiceName: svc, Type: posture.Dial,
			PolicyFailures: []posture.PolicyFailure{{PolicyID: "p" + svc, PolicyName: "p" + svc, Checks: []posture.CheckFailure{{
				PostureCheckID: "os", PostureCheckName: "windows-10", PostureCheckType: posture.CheckOS,
				ActualValue: actual, ExpectedValue: expected}}}}}, at)
	}
	return l
}

// BenchmarkBacktest backtests a stricter OS check (>=10.0.19045) over the
// 30 days of a generated fleet, as postured backtest --from does: the
// candidate validated against the model read from the log, both
// projections at the window's start, then the window. The projections
// start from a replay of the log from its start (start=replay, as on a
// data directory without snapshots) or from a snapshot of the projection
// taken at the window's start (start=snapshot, as on a node's, which keeps
// them; taking it is not timed). It reports the window's events per second
// and CPU time beside wall time, and checks the findings: the 19044 builds
// (three identities in twenty) are newly denied, nothing else.
//
//	task bench-backtest   # the 100,000-identity fleet
//	go test -run '^$' -bench 'Backtest/identities=30000$' -benchtime 1x ./cmd/postured/
func BenchmarkBacktest(b *testing.B) {
	for _, n := range []int{10_000, 30_000, 100_000} {
		b.Run(fmt.Sprintf("identities=%d", n), func(b *testing.B) {
			start := time.Now()
			l := fleetLog(b, n)
			last, err := l.LastSeq(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("log of %d events generated in %s", last, time.Since(start).Round(time.Second))
			b.Run("start=replay", func(b *testing.B) { benchBacktest(b, l, n, nil) })
			b.Run("start=snapshot", func(b *testing.B) {
				ctx := context.Background()
				dir := b.TempDir()
				live, err := projections.Open(projections.Options{Dir: filepath.Join(dir, "projections"), NoWAL: true})
				if err != nil {
					b.Fatal(err)
				}
				defer live.Close()
				if _, err := live.ReplayTo(ctx, l, projections.Moment{At: fleetStart}, nil); err != nil {
					b.Fatal(err)
				}
				snaps, err := projections.OpenSnapshots(projections.SnapshotOptions{Dir: filepath.Join(dir, "snapshots")})
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := snaps.Take(ctx, live, l); err != nil {
					b.Fatal(err)
				}
				benchBacktest(b, l, n, snaps)
			})
		})
	}
}

func benchBacktest(b *testing.B, l *eventlog.Log, n int, snaps *projections.Snapshots) {
	last, err := l.LastSeq(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	candidate := []byte(`{"postureChecks": {"update": {"os": {"typeId": "OS", "name": "windows-10", "roleAttributes": ["os"],
		"operatingSystems": [{"type": "Windows", "versions": [">=10.0.19045"]}]}}}}`)
	b.ResetTimer()
	cpu := cpuTime()
	var rep *backtest.Report
	for range b.N {
		ctx := context.Background()
		changes, err := parseCandidate(ctx, l, candidate, fleetStart)
		if err != nil {
			b.Fatal(err)
		}
		restore := batchGC()
		rep, err = backtest.Run(ctx, backtest.Options{Log: l, Open: backtestState(l, snaps, b.TempDir()), Changes: changes, From: fleetStart})
		restore()
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.Logf("heap obtained from the OS: %d MiB", ms.HeapSys>>20)
	b.Logf("%d window events, %d decisions, %d newly denied (%d identities)", rep.Window.Events, rep.Totals.Decisions,
		rep.Totals.NewlyDenied, rep.Totals.IdentitiesNewlyDenied)
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec, "s/backtest")
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/backtest")
	b.ReportMetric(float64(rep.Window.Events)/sec, "window-events/s")
	b.ReportMetric(float64(last), "log-events")
	wantDenied := n * 3 / 20
	if rep.Totals.IdentitiesNewlyDenied != wantDenied || rep.Totals.NewlyAllowed != 0 {
		b.Fatalf("newly denied identities %d (want %d), newly allowed %d", rep.Totals.IdentitiesNewlyDenied, wantDenied, rep.Totals.NewlyAllowed)
	}
	if len(rep.FailingValues) != 1 || rep.FailingValues[0].Value != "Windows 10.0.19044" {
		b.Fatalf("failing values: %+v", rep.FailingValues)
	}
}
