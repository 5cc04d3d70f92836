package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// Writer is the write path of handlers: validate, append, wait until the
// local projection has applied the event, then answer from the projection.
type Writer struct {
	Log     Log
	Barrier Barrier
	Now     Clock

	turns turns // the changes of each subject, one at a time on this node
}

// Stamp is who caused an event: the actor (an identity id, or "postured"
// for the controller itself) and the request id.
type Stamp struct {
	Actor     string
	RequestID string
}

// StampOf is the stamp of a request.
func StampOf(c echo.Context) Stamp {
	s := Stamp{RequestID: c.Response().Header().Get(echo.HeaderXRequestID)}
	if p := PrincipalOf(c); p != nil {
		s.Actor = p.Identity.ID
	}
	return s
}

// maxConflicts bounds the retries of a model change that keeps losing the
// race for the model subject.
const maxConflicts = 20

// Event wraps a payload in an event with the writer's time and the stamp.
func (w *Writer) Event(st Stamp, p posture.Payload) (posture.Event, error) {
	e, err := posture.NewEvent(p, w.Now())
	if err != nil {
		return e, err
	}
	e.Actor, e.RequestID = st.Actor, st.RequestID
	return e, nil
}

// Append appends the payload's event for a request and waits until the
// projection has applied it. It returns the event's sequence.
func (w *Writer) Append(c echo.Context, p posture.Payload) (uint64, error) {
	return w.AppendContext(c.Request().Context(), StampOf(c), p)
}

// AppendContext is Append outside a request.
func (w *Writer) AppendContext(ctx context.Context, st Stamp, p posture.Payload) (uint64, error) {
	e, err := w.Event(st, p)
	if err != nil {
		return 0, err
	}
	return w.AppendEvent(ctx, e)
}

// AppendEvent appends an event built with Event and waits until the
// projection has applied it, for a handler that answers with the event's
// time.
func (w *Writer) AppendEvent(ctx context.Context, e posture.Event) (uint64, error) {
	seq, err := w.Log.Append(ctx, e)
	if err != nil {
		return 0, err
	}
	return seq, w.Barrier.WaitFor(ctx, seq)
}

// Model makes a change of the model (identities, services, policies,
// checks...) under optimistic concurrency. decide reads the projection,
// validates and returns the events of the change; they are appended only if
// no other model change was appended since the state decide saw. On a lost
// race decide runs again on the newer state, so checks such as "this name is
// free" hold across requests and across nodes. Model returns once the
// projection has applied the change. A change of several events is appended
// in order, each expecting the one before it.
func (w *Writer) Model(c echo.Context, decide func() ([]posture.Payload, error)) error {
	return w.ModelContext(c.Request().Context(), StampOf(c), decide)
}

// ModelContext is Model outside a request.
func (w *Writer) ModelContext(ctx context.Context, st Stamp, decide func() ([]posture.Payload, error)) error {
	return w.Change(ctx, st, Change{
		Subject: posture.SubjectModel,
		// The local projection's last model change: decide reads that state.
		Expect: func(context.Context) (uint64, error) { return w.Barrier.LastModelSeq(), nil },
		Decide: func() ([]posture.Payload, error) { return decide() },
		Chain:  true,
	})
}

// ChangeSubject is Change on one subject, whose decide reads the state the
// subject's last event left (applied here before decide runs): an
// identity's MFA enrollment, the end of one of its API sessions.
func (w *Writer) ChangeSubject(c echo.Context, subject string, decide func() ([]posture.Payload, error)) error {
	return w.Change(c.Request().Context(), StampOf(c), Change{
		Subject: subject,
		Expect: func(ctx context.Context) (uint64, error) {
			last, err := w.Log.LastSubjectSeq(ctx, subject)
			if err != nil {
				return 0, err
			}
			return last, w.Barrier.WaitFor(ctx, last)
		},
		Decide: decide,
	})
}

// Change is a change of one subject under optimistic concurrency (Writer.Change).
type Change struct {
	// Subject is the subject whose last sequence the change expects.
	Subject string
	// Expect returns the sequence decide's state reflects: the subject's
	// last event as the change will read it.
	Expect func(ctx context.Context) (uint64, error)
	// Decide reads the projection, validates and returns the events of the
	// change (none: nothing to do). The first is on Subject.
	Decide func() ([]posture.Payload, error)
	// Chain: every event is on Subject and expects the one before it.
	// Otherwise only the first is conditional and the others follow it.
	Chain bool
}

// Change appends a change's events only if no other event of its subject
// was appended since the state Decide saw. On a lost race it catches up
// with the winner and decides again on the newer state, so that checks such
// as "this name is free" or "this code is unused" hold across requests and
// across nodes. It returns once the projection has applied the change.
func (w *Writer) Change(ctx context.Context, st Stamp, ch Change) error {
	// The changes of one subject take turns on this node: each decides on
	// the state its predecessor left, once that is applied, rather than
	// racing it (64 concurrent model changes on a busy node lost up to
	// 20 races each). Changes made through other nodes still race, and so
	// does a change that waited turnWait for its turn.
	done, err := w.turns.take(ctx, ch.Subject, turnWait)
	if err != nil {
		return err
	}
	defer done()
	// wrote: some of the change's events are in the log (a chain can lose
	// its race after its first event), so a stopped projection's answer
	// must not say that nothing was written.
	wrote := false
	unwritten := func(err error) error {
		if wrote {
			return err
		}
		return unwrittenHalt(err)
	}
	// rest: a chain's events after those it appended before losing a race.
	// The first events are in the log: the rest follow them as decided,
	// rather than a decision on a state that now holds half the change.
	var rest []posture.Payload
	for attempt := range maxConflicts {
		if attempt > 0 {
			// Many changes racing for one subject: spread their retries.
			if err := sleep(ctx, time.Duration(rand.Int64N(int64(min(attempt, 10))*int64(time.Millisecond)))); err != nil {
				return unwritten(err)
			}
		}
		expect, err := ch.Expect(ctx)
		if err != nil {
			return unwritten(err)
		}
		payloads := rest
		if payloads == nil {
			if payloads, err = ch.Decide(); err != nil || len(payloads) == 0 {
				return err
			}
		}
		if payloads[0].Subject() != ch.Subject {
			return fmt.Errorf("a change of %s cannot start with %s (subject %s)", ch.Subject, payloads[0].EventType(), payloads[0].Subject())
		}
		var seq uint64
		var n int
		if ch.Chain {
			seq, n, err = w.appendChain(ctx, st, ch.Subject, payloads, expect)
		} else {
			seq, n, err = w.appendAfter(ctx, st, payloads, expect)
		}
		wrote = wrote || n > 0
		if posture.CodeOf(err) == posture.CodeConflict {
			if ch.Chain && n > 0 {
				rest = payloads[n:]
			}
			// Catch up with the change that won, then decide again (or
			// append the rest).
			last, lerr := w.Log.LastSubjectSeq(ctx, ch.Subject)
			if lerr != nil {
				return lerr
			}
			if err := w.Barrier.WaitFor(ctx, last); err != nil {
				return unwritten(err)
			}
			continue
		}
		if err != nil {
			return err
		}
		return w.Barrier.WaitFor(ctx, seq)
	}
	return &posture.Error{Code: posture.CodeConflict, Message: fmt.Sprintf("the change lost %d races for %s; retry", maxConflicts, ch.Subject)}
}

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// appendAfter appends the first event if the last of its subject is
// expect, then the others unconditionally. n is how many it appended.
func (w *Writer) appendAfter(ctx context.Context, st Stamp, payloads []posture.Payload, expect uint64) (seq uint64, n int, err error) {
	events, err := w.events(st, payloads)
	if err != nil {
		return 0, 0, err
	}
	for i, e := range events {
		if i == 0 {
			seq, err = w.Log.AppendIfLast(ctx, e, expect)
		} else {
			seq, err = w.Log.Append(ctx, e)
		}
		if err != nil {
			return 0, n, err
		}
		n++
	}
	return seq, n, nil
}

func (w *Writer) appendChain(ctx context.Context, st Stamp, subject string, payloads []posture.Payload, expect uint64) (seq uint64, n int, err error) {
	for _, p := range payloads {
		if p.Subject() != subject {
			return 0, 0, fmt.Errorf("a change of %s cannot carry %s (subject %s)", subject, p.EventType(), p.Subject())
		}
	}
	events, err := w.events(st, payloads)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range events {
		if seq, err = w.Log.AppendIfLast(ctx, e, expect); err != nil {
			return 0, n, err
		}
		expect = seq
		n++
	}
	return seq, n, nil
}

// events builds the events of a change before any is appended, so that
// one that cannot be encoded (a time past year 9999) fails the change
// whole rather than after the events before it.
func (w *Writer) events(st Stamp, payloads []posture.Payload) ([]posture.Event, error) {
	out := make([]posture.Event, len(payloads))
	for i, p := range payloads {
		var err error
		if out[i], err = w.Event(st, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// turns lets the changes of each subject go one at a time.
type turns struct {
	mu sync.Mutex
	m  map[string]*turn // subjects with a change going or waiting
}

type turn struct {
	token   chan struct{} // holds a value while a change goes
	waiting int           // changes going or waiting
}

// turnWait bounds the wait for a subject's turn. Past it a change goes
// without its turn, racing the others as a change through another node
// does: a log that does not answer holds a change for up to its append
// timeout, and the changes queued behind it would otherwise wait for each
// one in turn.
var turnWait = 2 * time.Second

// take waits for the subject's turn, for at most wait, or until ctx ends;
// done ends the turn (or the change that went without it).
func (t *turns) take(ctx context.Context, subject string, wait time.Duration) (done func(), err error) {
	t.mu.Lock()
	if t.m == nil {
		t.m = map[string]*turn{}
	}
	tu := t.m[subject]
	if tu == nil {
		tu = &turn{token: make(chan struct{}, 1)}
		t.m[subject] = tu
	}
	tu.waiting++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if tu.waiting--; tu.waiting == 0 {
			delete(t.m, subject)
		}
		t.mu.Unlock()
	}
	end := func() { <-tu.token; leave() }
	select {
	case tu.token <- struct{}{}: // free: no timer
		return end, nil
	default:
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case tu.token <- struct{}{}:
		return end, nil
	case <-timer.C:
		return leave, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// Unchanged reports whether an update made of old only e, the same but for
// its time of update: such an update records nothing.
func Unchanged[T any](old, e T) (bool, error) {
	fields := func(v T) (map[string]json.RawMessage, error) {
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, err
		}
		delete(m, "updatedAt")
		return m, nil
	}
	a, err := fields(old)
	if err != nil {
		return false, err
	}
	b, err := fields(e)
	if err != nil {
		return false, err
	}
	return maps.EqualFunc(a, b, func(x, y json.RawMessage) bool { return bytes.Equal(x, y) }), nil
}
