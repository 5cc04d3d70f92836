package expiry

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
)

// Appender appends an event to the log (eventlog.Log implements it).
type Appender interface {
	Append(ctx context.Context, e posture.Event) (uint64, error)
}

// DueLister lists the deadlines reached by a time (projections.Store
// implements it).
type DueLister interface {
	DueDeadlines(until time.Time, limit int) ([]posture.DeadlineReached, error)
}

// EnforcementLister lists the report-only checks whose enforceAt is
// reached by a time (projections.Store implements it).
type EnforcementLister interface {
	DueEnforcements(until time.Time, limit int) ([]posture.CheckEnforced, error)
}

// Deadlines turns passing deadlines into facts: when a posture verdict's
// ValidUntil has passed, it appends a deadline.reached event, timed just
// after the deadline (Event). The projection then re-evaluates and removes
// the sessions that lost access. With Enforce, it also appends the
// check.enforced event of each report-only check whose enforceAt has come
// (EnforcedEvent).
type Deadlines struct {
	Log      Appender
	Due      DueLister
	Enforce  EnforcementLister // optional
	Clock    clockwork.Clock
	Logger   *slog.Logger
	Interval time.Duration // how often to look (default 200ms)

	mu   sync.Mutex           // one Tick at a time
	sent map[string]time.Time // event id -> when appended
}

// Delay is how long after a deadline its event is timed: a verdict holds
// while now <= ValidUntil, so the deadline is reached Delay after it.
const Delay = time.Millisecond

// batch is how many due deadlines one tick appends at most.
const batch = 256

// resend is how long an appended deadline is not appended again while the
// projection has not applied it yet (the stream would drop the copy
// anyway); forget is when the loop forgets it appended one.
const (
	resend = 5 * time.Second
	forget = time.Minute
)

// Event is the event recording that a deadline was reached: timed Delay
// after it, with an ID derived from the identity, the API session and the
// deadline.
func Event(d posture.DeadlineReached) posture.Event {
	e := posture.MustEvent(d, d.Deadline.Add(Delay))
	e.ID = posture.DerivedID(posture.TypeDeadlineReached, d.IdentityID, d.APISessionID, d.Deadline.UTC().Format(time.RFC3339Nano))
	e.Actor = "postured"
	return e
}

// EnforcedEvent is the event recording that a report-only check's
// enforceAt was reached: timed at the enforceAt (the check enforces from
// that instant on), with an ID derived from the check and the instant.
func EnforcedEvent(p posture.CheckEnforced) posture.Event {
	e := posture.MustEvent(p, p.EnforceAt)
	e.ID = posture.DerivedID(posture.TypeCheckEnforced, p.CheckID, p.EnforceAt.UTC().Format(time.RFC3339Nano))
	e.Actor = "postured"
	return e
}

// Run ticks every Interval of the clock until ctx ends.
func (d *Deadlines) Run(ctx context.Context) error {
	interval := d.Interval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	t := d.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.Chan():
		}
		if _, err := d.Tick(ctx); err != nil && ctx.Err() == nil {
			d.logger().Error("listing due deadlines", "err", err)
		}
	}
}

// Tick appends the deadlines reached by the clock's now and returns how
// many it appended. A failed append is logged and retried on a later tick.
// Run calls it; a test may too, after moving the clock: when it returns,
// every deadline reached by then is in the log.
func (d *Deadlines) Tick(ctx context.Context) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sent == nil {
		d.sent = map[string]time.Time{}
	}
	now := d.Clock.Now()
	due, err := d.Due.DueDeadlines(now.Add(-Delay), batch)
	if err != nil {
		return 0, err
	}
	events := make([]posture.Event, 0, len(due))
	for _, dl := range due {
		events = append(events, Event(dl))
	}
	if d.Enforce != nil {
		checks, err := d.Enforce.DueEnforcements(now, batch)
		if err != nil {
			return 0, err
		}
		for _, c := range checks {
			events = append(events, EnforcedEvent(c))
		}
	}
	n := 0
	for _, e := range events {
		if at, ok := d.sent[e.ID]; ok && now.Sub(at) < resend {
			continue
		}
		if _, err := d.Log.Append(ctx, e); err != nil {
			if ctx.Err() == nil {
				d.logger().Warn("appending a timed event", "type", e.Type, "subject", e.Subject, "err", err)
			}
			continue
		}
		d.sent[e.ID] = now
		n++
	}
	for id, at := range d.sent {
		if now.Sub(at) > forget {
			delete(d.sent, id)
		}
	}
	return n, nil
}

func (d *Deadlines) logger() *slog.Logger {
	if d.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return d.Logger
}
