package projections

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// Reader reads a range of the log (eventlog.Log implements it): the events
// with from <= seq <= to, in order; to == 0 means the newest event when the
// call starts.
type Reader interface {
	Read(ctx context.Context, from, to uint64, fn func([]posture.Event) error) error
}

// SubjectReader is a Reader that can also read only the events on some
// subjects, filtered where the log is (eventlog.Log implements it): a
// replay narrowed to one identity then reads only what it applies.
type SubjectReader interface {
	ReadSubjects(ctx context.Context, from, to uint64, subjects []string, fn func([]posture.Event) error) error
}

// Moment names a past state of the projection: the log applied up to Seq
// (0: no limit by sequence) and stopped before the first event later than
// At (zero: no limit by time). The zero Moment is the whole log.
//
// Event times need not grow with sequences (nodes' clocks differ a
// little): the state at At is the prefix of the log before the first event
// later than At, as a replay from the start finds it.
//
// Identity, when set, narrows the events applied to those that can change
// what the store answers about that identity (Explain, History): the
// events of the other identities' per-identity subjects (posture, MFA,
// API sessions, sessions) are passed over, everything else is applied.
// Such a store answers for that identity only; only a scratch store (a
// copy opened by OpenAt) takes it.
type Moment struct {
	Seq      uint64
	At       time.Time
	Identity string
}

// identitySubjects are the prefixes of the subjects that hold one
// identity's facts and change nothing of another identity.
var identitySubjects = []string{posture.SubjectPosture, posture.SubjectMFA, posture.SubjectSession, "apisession"}

// subjectFamilies are the first tokens of the subjects of the registered
// event types, and whether a family has more tokens ("posture.<id>",
// "skip.<seq>") or is one subject ("model").
var subjectFamilies = func() map[string]bool {
	out := map[string]bool{}
	for _, typ := range posture.EventTypes() {
		p, err := posture.Event{Type: typ, Data: []byte("{}")}.Decode()
		if err != nil {
			panic(fmt.Sprintf("projections: event type %s: %v", typ, err))
		}
		family, _, more := strings.Cut(p.Subject(), ".")
		out[family] = out[family] || more
	}
	return out
}()

// identityFilter is the subjects of the events that concern identity (see
// concerns), as NATS patterns relative to the log.
func identityFilter(identity string) []string {
	var out []string
	for family, more := range subjectFamilies {
		switch {
		case slices.Contains(identitySubjects, family):
			out = append(out, family+"."+identity)
		case more:
			out = append(out, family+".>")
		default:
			out = append(out, family)
		}
	}
	slices.Sort(out)
	return out
}

// validIdentity says whether an identity id can be used in a NATS subject
// (one token, no wildcards).
func validIdentity(id string) bool {
	return id != "" && !strings.ContainsAny(id, ".*> \t\r\n")
}

// concerns says whether e can change what a store answers about identity.
func concerns(e posture.Event, identity string) bool {
	prefix, id, ok := strings.Cut(e.Subject, ".")
	return !ok || id == identity || !slices.Contains(identitySubjects, prefix)
}

var errMomentReached = errors.New("moment reached")

// Through returns how many of events, whole messages of the log in its
// order, come before the first event after at, a message counted whole: a
// batch of the log's (its events share a sequence) whose first event is at
// or before at is in with all its events, which were committed together.
// A store is never left in the middle of a message, which the events
// read after its cursor could not complete.
func Through(events []posture.Event, at time.Time) int {
	for i, e := range events {
		if e.At.After(at) {
			for i > 0 && i < len(events) && events[i].Seq == events[i-1].Seq {
				i++
			}
			return i
		}
	}
	return len(events)
}

// ReplayTo applies the events of r after the store's cursor up to the
// moment m, calling progress (when not nil) with the cursor after each
// batch. It returns the number of events applied.
func (s *Store) ReplayTo(ctx context.Context, r Reader, m Moment, progress func(cursor uint64)) (uint64, error) {
	if m.Identity != "" {
		if !s.scratch {
			return 0, errors.New("projections: a replay narrowed to one identity needs a scratch store")
		}
		s.mu.Lock()
		s.partial = true
		s.mu.Unlock()
	}
	var applied uint64
	var narrowed []posture.Event
	onBatch := func(batch []posture.Event) error {
		cut := len(batch)
		if !m.At.IsZero() {
			cut = Through(batch, m.At)
		}
		apply := batch[:cut]
		if m.Identity != "" {
			narrowed = narrowed[:0]
			for _, e := range apply {
				if concerns(e, m.Identity) {
					narrowed = append(narrowed, e)
				}
			}
			apply = narrowed
		}
		if err := s.Apply(apply); err != nil {
			return err
		}
		applied += uint64(len(apply))
		if progress != nil {
			progress(s.Cursor())
		}
		if cut < len(batch) {
			return errMomentReached
		}
		return nil
	}
	sr, narrow := r.(SubjectReader)
	if narrow && m.Identity != "" && validIdentity(m.Identity) {
		// The log filters. A message that is not an event, or a log that
		// cannot filter, is read again without (from the cursor: what was
		// applied stays).
		err := sr.ReadSubjects(ctx, s.Cursor()+1, m.Seq, identityFilter(m.Identity), onBatch)
		if err == nil || errors.Is(err, errMomentReached) {
			return applied, nil
		}
		if ctx.Err() != nil || s.Err() != nil {
			return applied, err
		}
		s.log.Info("projections: a narrowed read of the log stopped; reading on without the filter", "cursor", s.Cursor(), "err", err)
	}
	err := r.Read(ctx, s.Cursor()+1, m.Seq, onBatch)
	if errors.Is(err, errMomentReached) {
		err = nil
	}
	return applied, err
}
