package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// MaxBatch bounds how many waiting messages' events Consume hands over at
// once (a batch of the log's, batch.go, may carry it beyond: a message's
// events are handed over together).
const MaxBatch = 512

// Consume delivers the events from sequence from onwards, in order, until ctx
// ends or fn returns an error, or it reaches a message that is not an event.
// In place of such a message it delivers the decision to skip it, if the
// log holds one (see Skip); otherwise it stops there, after delivering the
// events before it, with a *BadEventError. Each call of fn gets one event or several that
// were already waiting (at most MaxBatch), so that the consumer can apply
// them together. Consume returns fn's error, or ctx's when it ends.
//
// On a cluster, the consumer lives on one server. When that server dies
// before the cluster notices (a kill, a power loss), the client's own
// recovery may recreate the consumer on the dead server again and again, and
// nothing is delivered any more. So a consumer that delivers nothing for
// stallTimeout and in which the log holds events it has not delivered for a
// stallCheck is replaced by a new one from the next undelivered sequence.
func (l *Log) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	if from == 0 {
		from = 1
	}
	next := from
	for {
		err := l.consume(ctx, &next, fn)
		if !errors.Is(err, errStalled) {
			return err
		}
		l.log.Warn("eventlog: the consumer delivers nothing while the log is ahead; replacing it", "next", next)
	}
}

// Stall detection: a consumer that delivered nothing for stallTimeout looks
// at the log every stallCheck (one stream info request), and is stalled
// when two looks in a row find the log ahead of it.
const (
	stallTimeout = 3 * time.Second
	stallCheck   = time.Second
)

var errStalled = errors.New("eventlog: consumer stalled")

// stallWatch tells a stalled consumer from a quiet one (see Consume).
type stallWatch struct {
	lastDelivery, checked, aheadSince time.Time
}

// delivered records a delivery at now.
func (w *stallWatch) delivered(now time.Time) { w.lastDelivery, w.aheadSince = now, time.Time{} }

// stalled is asked at each tick of a ticker of stallCheck/2. Quiet for a
// while, the consumer looks at the log now and then; the log ahead of it
// (holding next) at two looks stallCheck apart or more: stalled.
func (w *stallWatch) stalled(ctx context.Context, l *Log, now time.Time, next uint64) bool {
	if now.Sub(w.lastDelivery) < stallTimeout || now.Sub(w.checked) < stallCheck {
		return false
	}
	w.checked = now
	ahead, ok := l.ahead(ctx, next)
	switch {
	case !ok: // the log unreachable: look again later
	case !ahead:
		w.aheadSince = time.Time{}
	case w.aheadSince.IsZero():
		w.aheadSince = now
	default:
		return true
	}
	return false
}

// consume runs one ordered consumer from *next, advancing *next past every
// delivered batch, until ctx ends, fn fails, or the consumer stalls.
func (l *Log) consume(ctx context.Context, next *uint64, fn func([]posture.Event) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := l.orderedFrom(ctx, *next)
	if err != nil {
		return err
	}
	// Messages are decoded on the client's delivery goroutine, so that
	// decoding overlaps with fn.
	msgs := make(chan delivered, 4*MaxBatch)
	tap := tapFrom(ctx) // a Checkpointer's (checkpointer.go), or nil
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if tap != nil {
			tap(m)
		}
		events, err := decodeMsg(l.prefix, m)
		select {
		case msgs <- delivered{events, err}:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(2*MaxBatch))
	if err != nil {
		return fmt.Errorf("eventlog: consume: %w", err)
	}
	// Cancel first: a callback blocked on a full channel must let go before
	// Stop waits for it.
	stalled := false
	defer func() {
		cancel()
		if stalled {
			// A stalled consumer may hold its lock for a request to a dead
			// server (up to 10s); Close waits for it instead.
			l.stopping.Go(cc.Stop)
			return
		}
		cc.Stop()
	}()

	check := time.NewTicker(stallCheck / 2)
	defer check.Stop()
	watch := stallWatch{lastDelivery: time.Now()}
	batch := make([]posture.Event, 0, MaxBatch)
	// halt is why the consumer stops after delivering batch: a message
	// that is not an event and that no decision skips, or an error.
	var halt error
	add := func(m delivered) {
		events, err := m.events, m.err
		var bad *BadEventError
		if errors.As(err, &bad) {
			if bad.Seq < *next {
				return // a replaced consumer's leftover
			}
			var d posture.Event
			d, err = l.passOver(ctx, bad)
			events = []posture.Event{d}
		}
		if err != nil {
			halt = err
			return
		}
		if events[0].Seq >= *next { // a replaced consumer's leftovers are dropped
			batch = append(batch, events...)
		}
	}
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-check.C:
			if watch.stalled(ctx, l, now, *next) {
				stalled = true
				return errStalled
			}
			continue
		case m := <-msgs:
			add(m)
		}
	drain:
		for halt == nil && len(batch) < MaxBatch {
			select {
			case m := <-msgs:
				add(m)
			default:
				break drain
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
			*next = batch[len(batch)-1].Seq + 1
			watch.delivered(time.Now())
		}
		if halt != nil {
			return halt
		}
	}
}

// delivered is a message of the consumer, decoded: its events.
type delivered struct {
	events []posture.Event
	err    error
}

// ahead reports whether the log holds the event at next; ok is false when
// the log's position could not be read.
func (l *Log) ahead(ctx context.Context, next uint64) (ahead, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	info, err := l.stream.Info(ctx)
	if err != nil {
		return false, false
	}
	return info.State.LastSeq >= next, true
}

// Read delivers the events with from <= seq <= to, in order, and returns when
// the last one was delivered. to == 0 means the newest event at the time of
// the call. It is the replay primitive.
func (l *Log) Read(ctx context.Context, from, to uint64, fn func([]posture.Event) error) error {
	last, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	if to == 0 || to > last {
		to = last
	}
	if from == 0 {
		from = 1
	}
	if from > to {
		return nil
	}
	errDone := errors.New("done")
	err = l.Consume(ctx, from, func(batch []posture.Event) error {
		// The events of the message at to are all in this batch (a
		// message is delivered whole), and those after it are cut.
		for i, e := range batch {
			if e.Seq > to {
				batch = batch[:i]
				break
			}
		}
		if len(batch) > 0 {
			if err := fn(batch); err != nil {
				return err
			}
		}
		if len(batch) == 0 || batch[len(batch)-1].Seq >= to {
			return errDone
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return nil
	}
	return err
}

func (l *Log) orderedFrom(ctx context.Context, from uint64) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		cons, err = l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   from,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: consumer from %d: %w", from, consumerLimit(err))
	}
	return cons, nil
}

// consumerLimit makes the server's refusal of a consumer past its limit
// per stream (a thousand by default) an answer that says what to do:
// postured's own are few, so those readers left fill the stream.
func consumerLimit(err error) error {
	if !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		return err
	}
	return &posture.Error{Code: posture.CodeUnavailable, Err: err, Message: "the event log's server refuses another consumer: " +
		"the stream has as many as the server allows, most of them left by readers; list them (nats consumer ls) and remove those " +
		"no reader uses, with credentials allowed to delete consumers"}
}

func decodeMsg(prefix string, m jetstream.Msg) ([]posture.Event, error) {
	md, err := m.Metadata()
	if err != nil {
		return nil, fmt.Errorf("eventlog: metadata: %w", err)
	}
	return decodeMessage(prefix, m.Subject(), m.Data(), md.Sequence.Stream, md.Timestamp)
}
