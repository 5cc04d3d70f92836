package projections

import (
	"context"
	"errors"
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
type Moment struct {
	Seq uint64
	At  time.Time
}

var errMomentReached = errors.New("moment reached")

// ReplayTo applies the events of r after the store's cursor up to the
// moment m, calling progress (when not nil) with the cursor after each
// batch. It returns the number of events applied.
func (s *Store) ReplayTo(ctx context.Context, r Reader, m Moment, progress func(cursor uint64)) (uint64, error) {
	var applied uint64
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
		if err := s.Apply(batch[:cut]); err != nil {
			return err
		}
		applied += uint64(cut)
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
