package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// rawMsg is a stored message as it is, undecoded.
type rawMsg struct {
	seq     uint64
	subject string // the full NATS subject
	data    []byte
	pending uint64 // messages after this one for the reader, when it was delivered
}

// errStopRead ends a raw read without an error.
var errStopRead = errors.New("eventlog: stop reading")

// readRaw delivers the stored messages from sequence from on (only those on
// subject filter when it is set), in order and as they are stored, until ctx
// ends or fn returns an error; errStopRead ends it with nil. Sequences that
// were deleted are not delivered: the reader sees a gap.
//
// It is Consume's reader without decoding, for the checkpoints that hash
// what is stored. Like Consume, an unfiltered reader that delivers nothing
// while the log is ahead of it is replaced (see Consume).
func (l *Log) readRaw(ctx context.Context, from uint64, filter string, fn func(rawMsg) error) error {
	if from == 0 {
		from = 1
	}
	next := from
	for {
		err := l.readRawOnce(ctx, &next, filter, fn)
		if errors.Is(err, errStopRead) {
			return nil
		}
		if !errors.Is(err, errStalled) {
			return err
		}
		l.log.Warn("eventlog: a raw reader delivers nothing while the log is ahead; replacing it", "next", next)
	}
}

func (l *Log) readRawOnce(ctx context.Context, next *uint64, filter string, fn func(rawMsg) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: *next}
	if filter != "" {
		cfg.FilterSubjects = []string{filter}
	}
	var cons jetstream.Consumer
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		cons, err = l.stream.OrderedConsumer(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("eventlog: raw reader from %d: %w", *next, consumerLimit(err))
	}
	type item struct {
		m   rawMsg
		err error
	}
	msgs := make(chan item, 4*MaxBatch)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		var it item
		if err != nil {
			it.err = fmt.Errorf("eventlog: metadata: %w", err)
		} else {
			it.m = rawMsg{seq: md.Sequence.Stream, subject: m.Subject(), data: m.Data(), pending: md.NumPending}
		}
		select {
		case msgs <- it:
		case <-ctx.Done():
		}
	}, jetstream.PullMaxMessages(2*MaxBatch))
	if err != nil {
		return fmt.Errorf("eventlog: raw reader: %w", err)
	}
	stalled := false
	defer func() {
		cancel()
		if stalled {
			l.stopping.Go(cc.Stop)
			return
		}
		cc.Stop()
	}()

	check := time.NewTicker(stallCheck / 2)
	defer check.Stop()
	watch := stallWatch{lastDelivery: time.Now()}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-check.C:
			// A filtered reader cannot tell a stall from messages it does
			// not want: only unfiltered readers are replaced.
			if filter == "" && watch.stalled(ctx, l, now, *next) {
				stalled = true
				return errStalled
			}
		case it := <-msgs:
			if it.err != nil {
				return it.err
			}
			if it.m.seq < *next { // a replaced reader's leftovers
				continue
			}
			if err := fn(it.m); err != nil {
				return err
			}
			*next = it.m.seq + 1
			watch.delivered(time.Now())
		}
	}
}
