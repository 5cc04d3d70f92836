package api

import (
	"context"
	"log/slog"
	"time"

	"github.com/seed-0809debe/posture"
)

// TransitionOutbox is the queue of transitions a projection derived
// (projections.Store implements it).
type TransitionOutbox interface {
	PendingTransitions(seq uint64, n, limit int) ([]posture.QueuedTransition, error)
	PruneTransitions(upTo uint64) error
}

// TransitionStream is the stream transitions are published to
// (eventlog.Transitions implements it).
type TransitionStream interface {
	Publish(ctx context.Context, t posture.Transition, sourceSeq uint64) error
	LastSource(ctx context.Context) (uint64, error)
}

// TransitionRelay publishes the transitions the local projection derived,
// in log order, to the transitions stream, and prunes them from the outbox.
//
// Exactly once with several nodes: every node derives the same transitions
// with the same IDs, and each message id is the transition's ID, so copies
// published within the stream's deduplication window are dropped. Before
// each round a relay reads the source sequence of the stream's newest
// transition and skips what comes from earlier events: a node that lags
// (or rebuilds its projection from the log) does not publish history again.
type TransitionRelay struct {
	Outbox   TransitionOutbox
	Stream   TransitionStream
	Logger   *slog.Logger
	Interval time.Duration // how often to look (default 100ms)
}

// Run relays transitions until ctx ends.
func (r *TransitionRelay) Run(ctx context.Context) error {
	interval := r.Interval
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := r.round(ctx); err != nil && ctx.Err() == nil {
			r.Logger.Warn("relaying transitions", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// round publishes what the outbox holds, a page at a time, then prunes it.
func (r *TransitionRelay) round(ctx context.Context) error {
	const page = 512
	var (
		seq       uint64
		n         int
		published uint64 // every transition of events up to it is in the stream
		done      uint64
		asked     bool
	)
	defer func() {
		if published > 0 {
			if err := r.Outbox.PruneTransitions(published); err != nil {
				r.Logger.Warn("pruning relayed transitions", "err", err)
			}
		}
	}()
	for {
		pending, err := r.Outbox.PendingTransitions(seq, n, page)
		if err != nil || len(pending) == 0 {
			return err
		}
		if !asked {
			if done, err = r.Stream.LastSource(ctx); err != nil {
				return err
			}
			asked = true
		}
		for _, q := range pending {
			if q.Seq != seq && seq != 0 {
				published = seq // the previous event is complete
			}
			seq, n = q.Seq, q.N+1
			// Transitions of the stream's newest source may be partly
			// published (by another node): publish them again, the
			// stream drops the copies.
			if q.Seq < done {
				continue
			}
			if err := r.Stream.Publish(ctx, q.Transition, q.Seq); err != nil {
				return err
			}
		}
		if len(pending) < page {
			published = seq
			return nil
		}
	}
}
