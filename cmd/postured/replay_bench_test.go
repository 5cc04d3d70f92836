package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// replayLog fills a fresh log with a history: a model of 1,000 identities,
// 50 services, two checks and 50 policies; an API session per identity;
// then, per ten events, eight posture submissions (OS and MAC; in each round
// over the identities a different twentieth of them reports an OS version
// that fails the check, so one submission in ten changes a verdict), one
// activity record and one session.
func replayLog(b testing.TB, total int) *eventlog.Log { return replayLogIn(b, total, 1) }

// replayLogIn is replayLog with the posture submissions, activity records
// and sessions in batches of up to batch events (a batch of group commit,
// written as it writes them), and the model's events alone.
func replayLogIn(b testing.TB, total, batch int) *eventlog.Log {
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(b.TempDir(), "nats")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []posture.Payload
	os := posture.Check{ID: "os", Name: "os", TypeID: posture.CheckOS, RoleAttributes: []string{"os"},
		OperatingSystems: []posture.OperatingSystem{{Type: posture.OSWindows, Versions: []string{">=10.0.19041"}}}}
	mac := posture.Check{ID: "mac", Name: "mac", TypeID: posture.CheckMAC, RoleAttributes: []string{"os"}, MACAddresses: []string{"aa:bb:cc:dd:ee:ff"}}
	events = append(events, posture.Created[posture.Check]{Entity: os}, posture.Created[posture.Check]{Entity: mac})
	for i := range 50 {
		id := fmt.Sprintf("svc%02d", i)
		events = append(events, posture.Created[posture.Service]{Entity: posture.Service{ID: id, Name: id, RoleAttributes: []string{fmt.Sprintf("team-%d", i%10)}}})
		events = append(events, posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: "p" + id, Name: "p" + id, Type: posture.Dial, Semantic: posture.AllOf,
			IdentityRoles: []string{fmt.Sprintf("#team-%d", i%10)}, ServiceRoles: []string{"@" + id}, PostureCheckRoles: []string{"#os"}}})
	}
	const identities = 1000
	for i := range identities {
		id := fmt.Sprintf("id%04d", i)
		events = append(events, posture.Created[posture.Identity]{Entity: posture.Identity{ID: id, Name: id, Type: posture.IdentityDevice, RoleAttributes: []string{fmt.Sprintf("team-%d", i%10)}}})
		events = append(events, posture.APISessionCreated{APISession: posture.APISession{ID: "as" + id, TokenHash: "h" + id, IdentityID: id, CreatedAt: at, LastActivityAt: at}})
	}
	for i := 0; len(events) < total; i++ {
		id := fmt.Sprintf("id%04d", i%identities)
		switch i % 10 {
		case 7:
			events = append(events, posture.APISessionTouched{ID: "as" + id, IdentityID: id, At: at.Add(time.Duration(i) * time.Millisecond)})
		case 8:
			events = append(events, posture.SessionCreated{Session: posture.Session{ID: fmt.Sprintf("s%d", i), IdentityID: id, APISessionID: "as" + id,
				ServiceID: fmt.Sprintf("svc%02d", i%50), Type: posture.Dial, CreatedAt: at}, Policies: []string{fmt.Sprintf("psvc%02d", i%50)}})
		default:
			version := "10.0.19045"
			if (i/identities+i%identities)%20 == 0 {
				version = "6.1.7601"
			}
			events = append(events, posture.PostureRecorded{IdentityID: id, APISessionID: "as" + id, Responses: []posture.PostureResponse{
				{ID: "os", TypeID: "OS", Type: "Windows", Version: version}, {ID: "mac", TypeID: "MAC", MACAddresses: []string{"AA:BB:CC:DD:EE:FF"}}}})
		}
	}
	events = events[:total]
	// Appended in order (sequences are the history).
	var group []posture.Event // a batch's events
	flush := func() {
		if len(group) == 1 {
			if _, err := l.Append(ctx, group[0]); err != nil {
				b.Fatal(err)
			}
		} else if len(group) > 1 {
			data, err := json.Marshal(group)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.JetStream().Publish(ctx, "postured.batch", data); err != nil {
				b.Fatal(err)
			}
		}
		group = group[:0]
	}
	for i, p := range events {
		e := posture.MustEvent(p, at.Add(time.Duration(i)*time.Millisecond))
		switch p.(type) {
		case posture.PostureRecorded, posture.SessionCreated, posture.APISessionTouched: // batched
			if group = append(group, e); len(group) >= batch {
				flush()
			}
		default: // alone
			flush()
			group = append(group, e)
			flush()
		}
	}
	flush()
	return l
}

// BenchmarkReplay rebuilds a projection from a log of 100,000 events into a
// fresh Pebble directory and reports events per second ("rebuild"). Its two
// halves are measured alone: "read", the log read and decoded with nothing
// applied, and "apply", the decoded events applied from memory.
// BenchmarkReplayBatched is the same on a log written by group commit
// (the facts in batches of 16).
//
//	go test -run '^$' -bench Replay -benchtime 3x ./cmd/postured/
func BenchmarkReplay(b *testing.B) { benchmarkReplay(b, 1) }

func BenchmarkReplayBatched(b *testing.B) { benchmarkReplay(b, 16) }

func benchmarkReplay(b *testing.B, batch int) {
	const total = 100_000
	l := replayLogIn(b, total, batch)
	ctx := context.Background()
	b.Run("read", func(b *testing.B) {
		var rate, cores float64
		for range b.N {
			start, cpu := time.Now(), cpuTime()
			n := 0
			err := l.Read(ctx, 1, 0, func(batch []posture.Event) error {
				for _, e := range batch {
					if _, err := e.Decode(); err != nil {
						return err
					}
				}
				n += len(batch)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			wall := time.Since(start).Seconds()
			rate, cores = float64(n)/wall, (cpuTime()-cpu).Seconds()/wall
		}
		b.ReportMetric(rate, "events/s")
		b.ReportMetric(cores, "cores")
		b.ReportMetric(cores*1e6/rate, "cpu-µs/event")
	})
	// apply is the projection's share: the events already in memory,
	// decoded, applied in batches of the consumer's size.
	b.Run("apply", func(b *testing.B) {
		var events []posture.Event
		if err := l.Read(ctx, 1, 0, func(batch []posture.Event) error {
			events = append(events, batch...)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		intoFreshStore(b, func(store *projections.Store) (uint64, error) {
			defer batchGC()()
			for from := 0; from < len(events); from += eventlog.MaxBatch {
				if err := store.Apply(events[from:min(from+eventlog.MaxBatch, len(events))]); err != nil {
					return 0, err
				}
			}
			return uint64(len(events)), nil
		})
	})
	b.Run("rebuild", func(b *testing.B) {
		intoFreshStore(b, func(store *projections.Store) (uint64, error) {
			return rebuild(ctx, l, store, cutoff{}, nil)
		})
	})
}

// intoFreshStore times fill, b.N times, each time on a new projection
// directory, and reports the events it applied per second.
func intoFreshStore(b *testing.B, fill func(*projections.Store) (uint64, error)) {
	var rate, perEvent float64
	for i := range b.N {
		store, err := openRebuilt(filepath.Join(b.TempDir(), fmt.Sprint(i)))
		if err != nil {
			b.Fatal(err)
		}
		start, cpu := time.Now(), cpuTime()
		n, err := fill(store)
		if err != nil {
			b.Fatal(err)
		}
		rate = float64(n) / time.Since(start).Seconds()
		perEvent = float64((cpuTime() - cpu).Microseconds()) / float64(n)
		store.Close()
	}
	b.ReportMetric(rate, "events/s")
	b.ReportMetric(perEvent, "cpu-µs/event")
}

// cpuTime is the CPU time the process has used so far (user and system),
// for the cores a phase keeps busy and its CPU time per event: on a busy
// machine, steadier than its wall-clock rate.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
