package projections

import (
	"context"
	"errors"
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

// concerns says whether e can change what a store answers about identity.
func concerns(e posture.Event, identity string) bool {
	prefix, id, ok := strings.Cut(e.Subject, ".")
	return !ok || id == identity || !slices.Contains(identitySubjects, prefix)
}

var errMomentReached = errors.New("moment reached")

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
	err := r.Read(ctx, s.Cursor()+1, m.Seq, func(batch []posture.Event) error {
		cut := len(batch)
		if !m.At.IsZero() {
			for i, e := range batch {
				if e.At.After(m.At) {
					cut = i
					break
				}
			}
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
	})
	if errors.Is(err, errMomentReached) {
		err = nil
	}
	return applied, err
}
