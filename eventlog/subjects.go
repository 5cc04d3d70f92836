package eventlog

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// ReadSubjects is Read narrowed to the events on some subjects: those with
// from <= seq <= to (to == 0: the newest event when the call starts) whose
// subject matches one of subjects (NATS patterns relative to the log, such
// as "model", "posture.<identity>" or "skip.>"), in order, and every
// batch of group commit whole (a message is one: its events on other
// subjects are the caller's to pass over). The server filters, so the
// other messages cost nothing here. A message that is
// not an event stops it with a *BadEventError, skip decisions or not: the
// caller reads that stretch with Read, which knows them.
func (l *Log) ReadSubjects(ctx context.Context, from, to uint64, subjects []string, fn func([]posture.Event) error) error {
	last, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	if to == 0 || to > last {
		to = last
	}
	from = max(from, 1)
	if from > to {
		return nil
	}
	// Batches (batch.go) hold events of any subject: every batch is
	// read, and delivered whole (see above).
	filters := make([]string, len(subjects), len(subjects)+1)
	for i, s := range subjects {
		filters[i] = l.prefix + s
	}
	if !slices.Contains(subjects, ">") && !slices.Contains(subjects, batchSubject) { // filters may not overlap
		filters = append(filters, l.prefix+batchSubject)
	}
	// An ephemeral consumer counts at creation the messages it will
	// deliver, which tells when the read is complete.
	cons, err := l.stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		FilterSubjects:    filters,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		return fmt.Errorf("eventlog: consumer of %d subjects from %d: %w", len(subjects), from, consumerLimit(err))
	}
	info := cons.CachedInfo()
	defer func() {
		// Its inactivity removes it anyway.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		_ = l.stream.DeleteConsumer(dctx, info.Name)
	}()
	pending := info.NumPending
	batch := make([]posture.Event, 0, MaxBatch)
	// Fetches start small and double: the server scans the stream until
	// it has a fetch's worth of matching messages, and a reader after a
	// moment often stops within the first few (a first fetch of MaxBatch
	// made the server scan a large part of a 1,000,000-event stream for
	// an identity's events, for each past moment).
	size := uint64(16)
	for pending > 0 {
		msgs, err := cons.Fetch(int(min(pending, size)), jetstream.FetchMaxWait(requestTimeout))
		size = min(2*size, MaxBatch)
		if err != nil {
			return fmt.Errorf("eventlog: fetch: %w", err)
		}
		done := false
		got := 0
		for m := range msgs.Messages() {
			got++
			pending--
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("eventlog: metadata: %w", err)
			}
			if done || md.Sequence.Stream > to {
				done = true
				continue
			}
			events, err := decodeMsg(l.prefix, m)
			if err != nil {
				return err
			}
			batch = append(batch, events...)
			done = md.Sequence.Stream == to
		}
		if err := msgs.Error(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("eventlog: fetch: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if done {
			return nil
		}
		if got == 0 {
			return fmt.Errorf("eventlog: fetch from %d: nothing delivered, %d pending", from, pending)
		}
	}
	return nil
}
