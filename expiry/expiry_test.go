package expiry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/expiry"
)

// memLog is an Appender that keeps what it is given, dropping an event
// whose ID it holds already, as the stream does.
type memLog struct {
	mu     sync.Mutex
	events []posture.Event
	ids    map[string]bool
	fail   error
	added  chan posture.Event
}

func newMemLog() *memLog {
	return &memLog{ids: map[string]bool{}, added: make(chan posture.Event, 16)}
}

func (l *memLog) Append(_ context.Context, e posture.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	if !l.ids[e.ID] {
		l.ids[e.ID] = true
		l.events = append(l.events, e)
		l.added <- e
	}
	return uint64(len(l.events)), nil
}

func (l *memLog) all() []posture.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]posture.Event(nil), l.events...)
}

// dueList is a DueLister over fixed deadlines.
type dueList struct {
	deadlines []posture.DeadlineReached
}

func (d dueList) DueDeadlines(until time.Time, limit int) ([]posture.DeadlineReached, error) {
	var out []posture.DeadlineReached
	for _, dl := range d.deadlines {
		if !dl.Deadline.After(until) && len(out) < limit {
			out = append(out, dl)
		}
	}
	return out, nil
}

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// TestDeadlineIsReachedOneMillisecondAfter: a verdict holds while now <=
// ValidUntil; the deadline's event is appended at the first tick at or
// after ValidUntil + 1ms, timed exactly then, and only once.
func TestDeadlineIsReachedOneMillisecondAfter(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	log := newMemLog()
	dl := posture.DeadlineReached{IdentityID: "ident1", APISessionID: "apis1", Deadline: t0.Add(2 * time.Second)}
	d := &expiry.Deadlines{Log: log, Due: dueList{deadlines: []posture.DeadlineReached{dl}}, Clock: clk}

	for _, step := range []struct {
		to   time.Duration
		want int
	}{
		{0, 0},
		{time.Second, 0},
		{2 * time.Second, 0}, // at the deadline: still valid
		{2*time.Second + time.Millisecond - 1, 0},     // a nanosecond before it is reached
		{2*time.Second + time.Millisecond, 1},         // reached
		{2*time.Second + 2*time.Millisecond, 1},       // appended already: not again
		{2*time.Second + 2*time.Millisecond + 6e9, 1}, // sent again: the log drops the copy
	} {
		clk.Advance(t0.Add(step.to).Sub(clk.Now()))
		if _, err := d.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := len(log.all()); got != step.want {
			t.Fatalf("at +%s: %d events, want %d", step.to, got, step.want)
		}
	}
	events := log.all()
	if len(events) != 1 {
		t.Fatalf("%d deadline events, want 1", len(events))
	}
	e := events[0]
	if e.Type != posture.TypeDeadlineReached || !e.At.Equal(t0.Add(2*time.Second+time.Millisecond)) {
		t.Fatalf("event %s at %s, want %s at %s", e.Type, e.At, posture.TypeDeadlineReached, t0.Add(2*time.Second+time.Millisecond))
	}
	if e.ID != expiry.Event(dl).ID {
		t.Fatalf("event id %s is not derived from the deadline (%s)", e.ID, expiry.Event(dl).ID)
	}
}

// TestDeadlinesRunOnTheClocksTicker: Run's ticker is the clock's, so moving
// a fake clock past a deadline appends it without any wall-clock wait.
func TestDeadlinesRunOnTheClocksTicker(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	log := newMemLog()
	dl := posture.DeadlineReached{IdentityID: "ident1", APISessionID: "apis1", Deadline: t0.Add(30 * time.Second)}
	d := &expiry.Deadlines{Log: log, Due: dueList{deadlines: []posture.DeadlineReached{dl}}, Clock: clk, Interval: time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if err := clk.BlockUntilContext(t.Context(), 1); err != nil { // the ticker exists
		t.Fatal(err)
	}
	clk.Advance(31 * time.Second)
	select {
	case e := <-log.added:
		if !e.At.Equal(dl.Deadline.Add(expiry.Delay)) {
			t.Fatalf("deadline event at %s, want %s", e.At, dl.Deadline.Add(expiry.Delay))
		}
	case <-t.Context().Done():
		t.Fatal("no deadline event")
	}
}

// TestFailedDeadlineAppendIsRetried: a deadline whose append failed is
// appended on the next tick.
func TestFailedDeadlineAppendIsRetried(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0.Add(time.Minute))
	log := newMemLog()
	log.fail = errors.New("no quorum")
	dl := posture.DeadlineReached{IdentityID: "ident1", APISessionID: "apis1", Deadline: t0}
	d := &expiry.Deadlines{Log: log, Due: dueList{deadlines: []posture.DeadlineReached{dl}}, Clock: clk}
	if n, err := d.Tick(t.Context()); err != nil || n != 0 {
		t.Fatalf("tick with a failing log: %d, %v", n, err)
	}
	log.mu.Lock()
	log.fail = nil
	log.mu.Unlock()
	clk.Advance(200 * time.Millisecond)
	if n, err := d.Tick(t.Context()); err != nil || n != 1 {
		t.Fatalf("tick after the log recovered: %d, %v; want 1", n, err)
	}
}

type idleList []posture.APISession

func (l idleList) IdleAPISessions(before time.Time) ([]posture.APISession, error) {
	var out []posture.APISession
	for _, s := range l {
		if s.LastActivityAt.Before(before) {
			out = append(out, s)
		}
	}
	return out, nil
}

// TestIdleSessionsExpireExactly: a session idle for exactly the timeout
// stays; a nanosecond more and it is expired, with a derived event id, at
// the clock's time, and forgotten by the API's cache.
func TestIdleSessionsExpireExactly(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0.Add(30 * time.Minute))
	log := newMemLog()
	var forgot []string
	idle := &expiry.Idle{Log: log, Clock: clk, Timeout: 30 * time.Minute, Interval: time.Minute,
		Sessions: idleList{{ID: "apis1", IdentityID: "ident1", LastActivityAt: t0}, {ID: "apis2", IdentityID: "ident2", LastActivityAt: t0.Add(time.Minute)}},
		Forget:   func(id string) { forgot = append(forgot, id) }}
	if n, err := idle.Tick(t.Context()); err != nil || n != 0 {
		t.Fatalf("idle for exactly the timeout: %d expired, %v", n, err)
	}
	clk.Advance(time.Nanosecond)
	if n, err := idle.Tick(t.Context()); err != nil || n != 1 {
		t.Fatalf("idle a nanosecond past the timeout: %d expired, %v; want 1", n, err)
	}
	e := log.all()[0]
	pl, err := e.Decode()
	if err != nil {
		t.Fatal(err)
	}
	p, _ := pl.(posture.APISessionDeleted)
	if p.ID != "apis1" || p.Reason != posture.EndExpired || !e.At.Equal(clk.Now()) ||
		e.ID != posture.DerivedID(posture.TypeAPISessionDeleted, "apis1", posture.EndExpired) {
		t.Fatalf("expiry event %+v %+v", e, p)
	}
	if len(forgot) != 1 || forgot[0] != "apis1" {
		t.Fatalf("forgotten: %v", forgot)
	}
}

// dueChecks is an EnforcementLister over fixed report-only checks.
type dueChecks []posture.CheckEnforced

func (d dueChecks) DueEnforcements(until time.Time, limit int) ([]posture.CheckEnforced, error) {
	var out []posture.CheckEnforced
	for _, c := range d {
		if !c.EnforceAt.After(until) && len(out) < limit {
			out = append(out, c)
		}
	}
	return out, nil
}

// TestEnforcementIsReachedAtEnforceAt: a report-only check reports while
// now < enforceAt; its check.enforced event is appended at the first tick
// at or after enforceAt, timed at enforceAt, once, with an ID derived from
// the check and the instant (two nodes append the same event).
func TestEnforcementIsReachedAtEnforceAt(t *testing.T) {
	clk := clockwork.NewFakeClockAt(t0)
	log := newMemLog()
	due := posture.CheckEnforced{CheckID: "chk1", EnforceAt: t0.Add(time.Minute)}
	d := &expiry.Deadlines{Log: log, Due: dueList{}, Enforce: dueChecks{due}, Clock: clk}
	other := &expiry.Deadlines{Log: log, Due: dueList{}, Enforce: dueChecks{due}, Clock: clk}
	for _, step := range []struct {
		to   time.Duration
		want int
	}{
		{0, 0},
		{time.Minute - 1, 0},
		{time.Minute, 1},
		{time.Minute + time.Second, 1},
	} {
		clk.Advance(t0.Add(step.to).Sub(clk.Now()))
		for _, n := range []*expiry.Deadlines{d, other} {
			if _, err := n.Tick(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if got := len(log.all()); got != step.want {
			t.Fatalf("at +%s: %d events, want %d", step.to, got, step.want)
		}
	}
	e := log.all()[0]
	if e.Type != posture.TypeCheckEnforced || !e.At.Equal(due.EnforceAt) || e.Subject != posture.SubjectModel || e.ID != expiry.EnforcedEvent(due).ID {
		t.Fatalf("event %+v", e)
	}
	p, err := e.Decode()
	if err != nil || p.(posture.CheckEnforced) != due {
		t.Fatalf("payload %+v, %v", p, err)
	}
}
