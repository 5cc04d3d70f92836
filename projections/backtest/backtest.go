// Package backtest replays the log over a window of time with a candidate
// change of the model (posture checks and service policies created, updated
// or deleted) applied from the window's start, and compares every recorded
// decision with what the candidate would have decided: sessions granted and
// denied, sessions removed, posture transitions.
//
// Two throwaway projections are rebuilt side by side with the projector's
// own handlers (projections.Store): the baseline takes the log as it is,
// the candidate takes the candidate's changes as an overlay at the window's
// start and then the same events, rewritten where the candidate decides
// otherwise:
//
//   - A real change of an entity the candidate updates is replaced by the
//     candidate's version (a creation in the window creates the candidate's
//     version); a real deletion still deletes it. A real creation or update
//     of an entity the candidate deletes changes nothing.
//   - A recorded session request is decided again on the candidate's
//     projection, at the event's time, with the same rule as the client API
//     (one passing policy of the type grants; a policy without checks
//     passes): the candidate projection records the candidate's outcome.
//   - A deadline that only the candidate's checks reach (a shorter MFA
//     timeout, say) is applied when it passes, as the timer loop of a node
//     would have appended it.
//
// Transitions (policies passing and failing, sessions removed, grace and
// timeouts) are compared by their derived ids, which depend only on the
// cause event and what they are about: the same transition on both sides
// is no change.
//
// The package reads the log through Source and never writes it.
package backtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/expiry"
	"github.com/seed-0809debe/posture/projections"
)

// Source is the log as a backtest reads it (eventlog.Log implements it).
type Source interface {
	LastSeq(ctx context.Context) (uint64, error)
	Read(ctx context.Context, from, to uint64, fn func([]posture.Event) error) error
}

// Options configures Run.
type Options struct {
	// Log is read from the window's start to its end.
	Log Source
	// Open returns the two projections, baseline and candidate, at the
	// window's start. Run releases them.
	Open Opener
	// Changes are the candidate's model changes (posture.Created,
	// Updated and Deleted of posture.Check and posture.ServicePolicy), in
	// the order they apply.
	Changes []posture.Payload
	// From and Until bound the window (zero: the start and the end of
	// the log). The candidate applies at From.
	From, Until time.Time
	// Progress, when set, is called after each batch with the sequence
	// reached and the last sequence of the window's read.
	Progress func(done, total uint64)
	// MaxChanges bounds the changed decisions listed in the report
	// (default 10,000), and MaxBytes their size as JSON (default 16 MiB);
	// the totals count them all.
	MaxChanges int
	MaxBytes   int
}

// Opener returns a fresh, private projection holding the state after the
// last event at or before from (every event when from is zero), and the
// function that closes and removes it. Run calls it twice, for the
// baseline and for the candidate, and calls release on each. The two must
// hold the same state; where it comes from (a replay, a snapshot of the
// projection with the events after it) does not change the report.
type Opener func(ctx context.Context, from time.Time) (store *projections.Store, release func(), err error)

// Run runs a backtest and returns its report.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Log == nil || opts.Open == nil {
		return nil, errors.New("backtest: Options.Log and Options.Open are required")
	}
	if !opts.Until.IsZero() && !opts.From.IsZero() && opts.Until.Before(opts.From) {
		return nil, errors.New("backtest: the window ends before it starts")
	}
	if opts.MaxChanges <= 0 {
		opts.MaxChanges = 10000
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 16 << 20
	}
	r, err := newRun(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	if err := r.run(ctx); err != nil {
		return nil, err
	}
	return r.report(), nil
}

// decisionTypes are the recorded decisions on session requests.
var decisionTypes = map[string]bool{posture.TypeSessionCreated: true, posture.TypeSessionDenied: true}

// overrides are what the candidate does to entities: the versions it puts
// in place of real ones, and the ids it deletes.
type overrides struct {
	checks   map[string]posture.Check
	policies map[string]posture.ServicePolicy
	deleted  map[string]bool // kind/id
}

func newOverrides(changes []posture.Payload) (overrides, error) {
	o := overrides{checks: map[string]posture.Check{}, policies: map[string]posture.ServicePolicy{}, deleted: map[string]bool{}}
	for _, p := range changes {
		switch v := p.(type) {
		case posture.Created[posture.Check], posture.Created[posture.ServicePolicy]:
		case posture.Updated[posture.Check]:
			o.checks[v.Entity.ID] = v.Entity
		case posture.Updated[posture.ServicePolicy]:
			o.policies[v.Entity.ID] = v.Entity
		case posture.Deleted[posture.Check]:
			o.deleted[string(posture.KindCheck)+"/"+v.ID] = true
		case posture.Deleted[posture.ServicePolicy]:
			o.deleted[string(posture.KindServicePolicy)+"/"+v.ID] = true
		default:
			return o, fmt.Errorf("backtest: a candidate changes posture checks and service policies only, not %s", p.EventType())
		}
	}
	return o, nil
}

// rewrite returns the model event the candidate's projection applies in
// place of a real one (the event itself when the candidate leaves it be).
func (o overrides) rewrite(e posture.Event, p posture.Payload) (posture.Event, error) {
	var out posture.Payload
	switch v := p.(type) {
	case posture.Created[posture.Check]:
		if c, ok := o.checks[v.Entity.ID]; ok {
			out = posture.Created[posture.Check]{Entity: c}
		} else if o.deleted[string(posture.KindCheck)+"/"+v.Entity.ID] {
			out = posture.Deleted[posture.Check]{ID: v.Entity.ID} // a no-op: it is gone
		}
	case posture.Updated[posture.Check]:
		if c, ok := o.checks[v.Entity.ID]; ok {
			out = posture.Updated[posture.Check]{Entity: c}
		} else if o.deleted[string(posture.KindCheck)+"/"+v.Entity.ID] {
			out = posture.Deleted[posture.Check]{ID: v.Entity.ID}
		}
	case posture.Created[posture.ServicePolicy]:
		if sp, ok := o.policies[v.Entity.ID]; ok {
			out = posture.Created[posture.ServicePolicy]{Entity: sp}
		} else if o.deleted[string(posture.KindServicePolicy)+"/"+v.Entity.ID] {
			out = posture.Deleted[posture.ServicePolicy]{ID: v.Entity.ID}
		}
	case posture.Updated[posture.ServicePolicy]:
		if sp, ok := o.policies[v.Entity.ID]; ok {
			out = posture.Updated[posture.ServicePolicy]{Entity: sp}
		} else if o.deleted[string(posture.KindServicePolicy)+"/"+v.Entity.ID] {
			out = posture.Deleted[posture.ServicePolicy]{ID: v.Entity.ID}
		}
	}
	if out == nil {
		return e, nil
	}
	return replace(e, out)
}

// replace is e with another payload: same id, sequence and time.
func replace(e posture.Event, p posture.Payload) (posture.Event, error) {
	n, err := posture.NewEvent(p, e.At)
	if err != nil {
		return e, err
	}
	n.ID, n.Seq, n.Actor, n.RequestID = e.ID, e.Seq, e.Actor, e.RequestID
	return n, nil
}

// run is one backtest under way.
type run struct {
	ctx  context.Context // checked at each event of the candidate's side
	opts Options
	log  Source
	base *projections.Store
	cand *projections.Store
	// releaseBase and releaseCand close and remove them.
	releaseBase, releaseCand func()
	overrides                overrides
	acc                      *accumulator
	// logDeadlines are the ids of the deadlines the log records in the
	// current batch.
	logDeadlines map[string]bool
	// candTransitions are the candidate's transitions of the current
	// batch, by id.
	candTransitions map[string]posture.Transition
	// deniedSessions are recorded sessions the candidate refused: their
	// later removal is part of the same change, not another one.
	deniedSessions map[string]bool
	// reached are the deadlines applied to the candidate's projection
	// alone, by event id: each once.
	reached map[string]bool
	// basePos and candPos are where the next queued transitions of each
	// projection are; the outbox is pruned every pruneEvery events (a
	// range deletion per read would slow every later read down).
	basePos, candPos position
	unpruned         uint64
	// nextDue is the candidate projection's earliest deadline at the last
	// decision or batch end (zero: none), read when the deadline index had
	// taken dueWrites writes (dueRead: it was read).
	nextDue     time.Time
	dueWrites   uint64
	dueRead     bool
	events      uint64
	first, last time.Time
}

func newRun(ctx context.Context, opts Options) (*run, error) {
	o, err := newOverrides(opts.Changes)
	if err != nil {
		return nil, err
	}
	r := &run{ctx: ctx, opts: opts, log: opts.Log, overrides: o, acc: newAccumulator(opts.MaxChanges, opts.MaxBytes),
		candTransitions: map[string]posture.Transition{}, deniedSessions: map[string]bool{}, reached: map[string]bool{}, logDeadlines: map[string]bool{}}
	// Both projections start from the same state, built side by side.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { r.base, r.releaseBase, err = opts.Open(gctx, opts.From); return err })
	g.Go(func() (err error) { r.cand, r.releaseCand, err = opts.Open(gctx, opts.From); return err })
	if err := g.Wait(); err != nil {
		r.close()
		return nil, fmt.Errorf("backtest: the state at the window's start: %w", err)
	}
	// A change of the model re-evaluates every identity it concerns, in
	// one event: a stopped run stops within it.
	r.base.SetInterrupt(ctx.Err)
	r.cand.SetInterrupt(ctx.Err)
	if r.base.Cursor() != r.cand.Cursor() {
		r.close()
		return nil, fmt.Errorf("backtest: the two projections at the window's start differ (%d, %d)", r.base.Cursor(), r.cand.Cursor())
	}
	return r, nil
}

func (r *run) close() {
	for _, release := range []func(){r.releaseBase, r.releaseCand} {
		if release != nil {
			release()
		}
	}
}

func (r *run) run(ctx context.Context) error {
	start := r.base.Cursor()
	// Transitions of the history before the window are not the
	// backtest's.
	for _, s := range []*projections.Store{r.base, r.cand} {
		if err := s.PruneTransitions(start); err != nil {
			return err
		}
	}
	r.basePos, r.candPos = position{seq: start + 1}, position{seq: start + 1}
	// The candidate's changes apply at the window's start.
	at := r.opts.From
	if at.IsZero() {
		at = r.base.AppliedAt()
	}
	overlay := make([]posture.Event, len(r.opts.Changes))
	for i, p := range r.opts.Changes {
		e, err := posture.NewEvent(p, at)
		if err != nil {
			return err
		}
		e.ID = posture.DerivedID("backtest", "candidate", fmt.Sprint(i))
		overlay[i] = e
	}
	if len(overlay) > 0 {
		ts, err := r.cand.Overlay(overlay)
		if err != nil {
			return fmt.Errorf("backtest: applying the candidate: %w", err)
		}
		r.collect(ts)
		if err := r.compare(nil); err != nil {
			return err
		}
	}
	last, err := r.log.LastSeq(ctx)
	if err != nil {
		return err
	}
	if start >= last {
		return nil
	}
	errUntil := errors.New("until reached")
	err = r.log.Read(ctx, start+1, last, func(batch []posture.Event) error {
		cut := len(batch)
		if !r.opts.Until.IsZero() {
			cut = projections.Through(batch, r.opts.Until)
		}
		if cut > 0 {
			if err := r.batch(batch[:cut]); err != nil {
				return err
			}
			if r.opts.Progress != nil {
				r.opts.Progress(batch[cut-1].Seq, last)
			}
		}
		if cut < len(batch) {
			return errUntil
		}
		return ctx.Err()
	})
	if errors.Is(err, errUntil) {
		err = nil
	}
	return err
}

// batch applies a batch of the window's events to both projections and
// compares what they derived.
func (r *run) batch(batch []posture.Event) error {
	if r.first.IsZero() {
		r.first = batch[0].At
	}
	r.last = batch[len(batch)-1].At
	r.events += uint64(len(batch))
	if err := r.base.Apply(batch); err != nil {
		return fmt.Errorf("backtest: baseline: %w", err)
	}
	// The deadlines the log records in this batch: the baseline has
	// applied them already, so its index no longer lists them.
	clear(r.logDeadlines)
	for _, e := range batch {
		if e.Type == posture.TypeDeadlineReached {
			r.logDeadlines[e.ID] = true
		}
	}
	if err := r.cand.ApplyEach(batch, r.rewrite); err != nil {
		return fmt.Errorf("backtest: candidate: %w", err)
	}
	ts, err := drain(r.cand, &r.candPos)
	if err != nil {
		return err
	}
	r.collect(ts)
	// The deadlines reached by the end of the batch.
	due, err := r.cand.DueDeadlines(r.last.Add(-expiry.Delay), 1024)
	if err != nil {
		return err
	}
	if err := r.candidateDeadlines(due, r.last, r.cand.Overlay); err != nil {
		return err
	}
	if err := r.updateNextDue(r.cand.DueDeadlines, r.cand.DueWrites()); err != nil {
		return err
	}
	base, err := drain(r.base, &r.basePos)
	if err != nil {
		return err
	}
	if err := r.compare(base); err != nil {
		return err
	}
	if r.unpruned += uint64(len(batch)); r.unpruned >= pruneEvery {
		r.unpruned = 0
		for _, s := range []*projections.Store{r.base, r.cand} {
			if err := s.PruneTransitions(s.Cursor()); err != nil {
				return err
			}
		}
	}
	return nil
}

// pruneEvery is how many events apart the outboxes are pruned.
const pruneEvery = 50000

// rewrite gives the candidate's projection the event to apply in place of
// one of the log, on the state the events before it left: first the
// deadlines only the candidate reaches before it, then a model change
// rewritten by the candidate's overrides, or a recorded session request
// decided again.
func (r *run) rewrite(v projections.View, e posture.Event) (posture.Event, error) {
	// A batch may hold many decisions, each costly with a heavy
	// candidate: a stopped run stops within one.
	if err := r.ctx.Err(); err != nil {
		return e, err
	}
	decision := decisionTypes[e.Type]
	if !r.nextDue.IsZero() && e.At.After(r.nextDue.Add(expiry.Delay)) {
		due, err := v.DueDeadlines(e.At.Add(-expiry.Delay), 1024)
		if err != nil {
			return e, err
		}
		if len(due) > 0 {
			if err := r.candidateDeadlines(due, e.At, v.Overlay); err != nil {
				return e, err
			}
		}
	}
	p, err := e.Decode()
	if err != nil {
		return e, fmt.Errorf("backtest: %w", err)
	}
	if e.Subject == posture.SubjectModel {
		return r.overrides.rewrite(e, p)
	}
	if !decision {
		return e, nil
	}
	e, err = r.decide(v, e, p)
	if err != nil {
		return e, err
	}
	// The request's own events may have set a deadline.
	return e, r.updateNextDue(v.DueDeadlines, v.DueWrites())
}

// candidateDeadlines applies the deadlines due on the candidate's
// projection by a time that the log does not record (the baseline does not
// list them, and this batch has no event for them): those only the
// candidate's checks set. A node's timer would have recorded them, timed
// at their deadline. They are looked for before an event later than the
// earliest deadline known at the last decision, and at the end of each
// batch. (A recorded request is decided at its own time in any case: a
// check that timed out fails it.)
func (r *run) candidateDeadlines(due []posture.DeadlineReached, at time.Time, overlay func([]posture.Event) ([]posture.Transition, error)) error {
	if len(due) == 0 {
		return nil
	}
	base, err := r.base.DueDeadlines(at.Add(-expiry.Delay), 1<<20)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, d := range base {
		known[expiry.Event(d).ID] = true
	}
	var events []posture.Event
	for _, d := range due {
		if e := expiry.Event(d); !known[e.ID] && !r.logDeadlines[e.ID] && !r.reached[e.ID] {
			r.reached[e.ID] = true
			events = append(events, e)
		}
	}
	if len(events) == 0 {
		return nil
	}
	ts, err := overlay(events)
	if err != nil {
		return fmt.Errorf("backtest: candidate deadlines: %w", err)
	}
	r.collect(ts)
	return nil
}

// farFuture is beyond any deadline.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// updateNextDue reads the candidate projection's earliest deadline, unless
// the deadline index took no write since it was last read (writes).
func (r *run) updateNextDue(list func(until time.Time, limit int) ([]posture.DeadlineReached, error), writes uint64) error {
	if r.dueRead && writes == r.dueWrites {
		return nil
	}
	r.dueRead, r.dueWrites = true, writes
	due, err := list(farFuture, 1)
	r.nextDue = time.Time{}
	if len(due) > 0 {
		r.nextDue = due[0].Deadline
	}
	return err
}

// collect adds transitions of the candidate's projection to
// candTransitions.
func (r *run) collect(ts []posture.Transition) {
	for _, t := range ts {
		r.candTransitions[t.ID] = t
	}
}

// position is a place in a projection's transitions outbox.
type position struct {
	seq uint64
	n   int
}

// drain reads a projection's queued transitions from pos on, and moves pos
// past them.
func drain(s *projections.Store, pos *position) ([]posture.Transition, error) {
	var out []posture.Transition
	for {
		q, err := s.PendingTransitions(pos.seq, pos.n, 1024)
		if err != nil {
			return nil, err
		}
		for _, t := range q {
			out = append(out, t.Transition)
		}
		if len(q) > 0 {
			pos.seq, pos.n = q[len(q)-1].Seq, q[len(q)-1].N+1
		}
		if len(q) < 1024 {
			return out, nil
		}
	}
}

// compare records the transitions that only one side derived from the
// current batch.
func (r *run) compare(base []posture.Transition) error {
	seen := make(map[string]bool, len(base))
	for _, t := range base {
		seen[t.ID] = true
		if _, ok := r.candTransitions[t.ID]; ok {
			r.acc.sameTransition(t)
			continue
		}
		if t.Kind == posture.TransitionSessionRemoved && r.deniedSessions[t.SessionID] {
			r.acc.refusedSessionTransition(t) // the candidate never granted it
			continue
		}
		r.acc.transition(t, true, r.names(r.base))
	}
	ids := make([]string, 0, len(r.candTransitions))
	for id := range r.candTransitions {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := r.candTransitions[ids[i]], r.candTransitions[ids[j]]
		if a.Cause.Seq != b.Cause.Seq {
			return a.Cause.Seq < b.Cause.Seq
		}
		return a.ID < b.ID
	})
	for _, id := range ids {
		r.acc.transition(r.candTransitions[id], false, r.names(r.cand))
	}
	clear(r.candTransitions)
	return nil
}

// decide decides a recorded session request again on the candidate's
// projection and returns the event the candidate's projection applies in
// its place: the recorded one when the outcome is the same.
func (r *run) decide(v projections.View, e posture.Event, p posture.Payload) (posture.Event, error) {
	var identityID, apiSessionID, serviceID, typ string
	recordedGrant, recordedWouldDeny := false, false
	var recordedFailures []posture.PolicyFailure
	var session posture.Session
	switch v := p.(type) {
	case posture.SessionCreated:
		session = v.Session
		identityID, apiSessionID, serviceID, typ = v.Session.IdentityID, v.Session.APISessionID, v.Session.ServiceID, v.Session.Type
		recordedGrant, recordedWouldDeny = true, len(v.WouldDeny) > 0
	case posture.SessionDenied:
		identityID, apiSessionID, serviceID, typ = v.IdentityID, v.APISessionID, v.ServiceID, v.Type
		recordedFailures = v.PolicyFailures
	}
	results, err := v.Access(identityID, apiSessionID, serviceID, typ, e.At)
	if err != nil {
		return e, fmt.Errorf("backtest: deciding event %d again: %w", e.Seq, err)
	}
	var passing []string
	strict := false
	for _, res := range results {
		if res.Passing {
			passing = append(passing, res.PolicyID)
		}
		strict = strict || res.Strict
	}
	grant := len(passing) > 0
	d := decision{seq: e.Seq, eventID: e.ID, at: e.At, identityID: identityID, apiSessionID: apiSessionID,
		serviceID: serviceID, typ: typ, recorded: recordedGrant, candidate: grant, recordedFailures: recordedFailures,
		wouldDeny: grant && !strict, recordedWouldDeny: recordedWouldDeny}
	if !grant || d.wouldDeny {
		d.failures = posture.Failures(results)
	}
	r.acc.decision(d, r.names(r.base))
	switch {
	case grant == recordedGrant:
		return e, nil
	case grant:
		// The candidate grants what was refused: its projection holds
		// the session the client would have had.
		s := posture.Session{ID: posture.DerivedID("backtest", "session", e.ID), IdentityID: identityID,
			APISessionID: apiSessionID, ServiceID: serviceID, Type: typ, CreatedAt: e.At}
		if has, err := v.HasSession(apiSessionID, typ, serviceID); err != nil || has {
			return e, err // it has one already: the refusal changes nothing there
		}
		return replace(e, posture.SessionCreated{Session: s, Policies: passing})
	default:
		r.deniedSessions[session.ID] = true
		return replace(e, posture.SessionDenied{IdentityID: identityID, APISessionID: apiSessionID, ServiceID: serviceID,
			ServiceName: r.names(r.cand).service(serviceID), Type: typ, PolicyFailures: d.failures})
	}
}

// names reads names from a projection.
type names struct{ s *projections.Store }

func (r *run) names(s *projections.Store) names { return names{s} }

func (n names) identity(id string) string {
	if v, err := projections.Get[posture.Identity](n.s, id); err == nil {
		return v.Name
	}
	return ""
}

func (n names) service(id string) string {
	if v, err := projections.Get[posture.Service](n.s, id); err == nil {
		return v.Name
	}
	return ""
}
