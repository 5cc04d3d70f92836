package eventlog

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// MaxBatch bounds how many waiting events Consume hands over at once.
const MaxBatch = 512

// Consume delivers the events from sequence from onwards, in order, until ctx
// ends or fn returns an error. Each call of fn gets one event or several that
// were already waiting (at most MaxBatch), so that the consumer can apply
// them together. Consume returns fn's error, or ctx's when it ends.
func (l *Log) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	if from == 0 {
		from = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cons, err := l.orderedFrom(ctx, from)
	if err != nil {
		return err
	}
	msgs := make(chan jetstream.Msg, 4*MaxBatch)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case msgs <- m:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(2*MaxBatch))
	if err != nil {
		return fmt.Errorf("eventlog: consume: %w", err)
	}
	// Cancel first: a callback blocked on a full channel must let go before
	// Stop waits for it.
	defer func() { cancel(); cc.Stop() }()

	batch := make([]posture.Event, 0, MaxBatch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m := <-msgs:
			e, err := decodeMsg(m)
			if err != nil {
				return err
			}
			batch = append(batch, e)
		}
	drain:
		for len(batch) < MaxBatch {
			select {
			case m := <-msgs:
				e, err := decodeMsg(m)
				if err != nil {
					return err
				}
				batch = append(batch, e)
			default:
				break drain
			}
		}
		if err := fn(batch); err != nil {
			return err
		}
	}
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
		for i, e := range batch {
			if e.Seq >= to {
				if err := fn(batch[:i+1]); err != nil {
					return err
				}
				return errDone
			}
		}
		return fn(batch)
	})
	if errors.Is(err, errDone) {
		return nil
	}
	return err
}

func (l *Log) orderedFrom(ctx context.Context, from uint64) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := retry(ctx, func() error {
		var err error
		cons, err = l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   from,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: consumer from %d: %w", from, err)
	}
	return cons, nil
}

func decodeMsg(m jetstream.Msg) (posture.Event, error) {
	md, err := m.Metadata()
	if err != nil {
		return posture.Event{}, fmt.Errorf("eventlog: metadata: %w", err)
	}
	return decode(m.Data(), md.Sequence.Stream)
}
