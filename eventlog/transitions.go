package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// The transitions stream holds posture transitions (posture.Transition),
// one JSON message each, on "<lowercase stream>-transitions.<identityId>.<kind>"
// (postured-transitions.<identityId>.<kind> for the default stream
// POSTURED; the event stream owns "postured.>", and two streams may not
// share subjects). Its name is "<stream>_TRANSITIONS". Each message's
// Nats-Msg-Id is the transition's derived ID, so that every node may
// publish what its projection derived: the stream keeps one copy. The
// header Postured-Source-Seq is the sequence of the event the transition
// was derived from.
const (
	transitionsSuffix = "_TRANSITIONS"
	// HeaderSourceSeq is the header with the sequence of a transition's
	// cause in the event log.
	HeaderSourceSeq = "Postured-Source-Seq"
)

// TransitionsStream is the name of the transitions stream of an event
// stream ("POSTURED_TRANSITIONS").
func TransitionsStream(stream string) string { return stream + transitionsSuffix }

// TransitionsSubjects is the subject prefix of the transitions stream of
// an event stream ("postured-transitions.").
func TransitionsSubjects(stream string) string { return strings.ToLower(stream) + "-transitions." }

// TransitionsOptions configure the transitions stream.
type TransitionsOptions struct {
	// Replicas of the stream (default 1).
	Replicas int
	// Duplicates is the deduplication window (default 10 minutes): nodes
	// that publish the same transition within it store it once.
	Duplicates time.Duration
	// MaxAge drops transitions older than this (default: kept).
	MaxAge time.Duration
	// Existing opens the stream only if it exists (readers).
	Existing bool
}

// Transitions is a handle on the transitions stream.
type Transitions struct {
	l      *Log
	stream jetstream.Stream
	name   string
	prefix string
}

// OpenTransitions creates (or, with Existing, only opens) the transitions
// stream beside the event stream. An existing stream is updated only where
// its configuration differs and the credentials may (see ensureStream).
func (l *Log) OpenTransitions(ctx context.Context, opts TransitionsOptions) (*Transitions, error) {
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Duplicates <= 0 {
		opts.Duplicates = 10 * time.Minute
	}
	t := &Transitions{l: l, name: TransitionsStream(l.name), prefix: TransitionsSubjects(l.name)}
	cfg := jetstream.StreamConfig{
		Name:        t.name,
		Description: "postured posture transitions",
		Subjects:    []string{t.prefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      opts.MaxAge,
		Duplicates:  opts.Duplicates,
		AllowDirect: true,
	}
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		if opts.Existing {
			t.stream, err = l.js.Stream(ctx, t.name)
		} else {
			t.stream, err = l.ensureStream(ctx, cfg)
		}
		if err != nil {
			for _, op := range []string{"INFO", "CREATE"} {
				if denied := l.denied("$JS.API.STREAM." + op + "." + t.name); denied != nil {
					return denied
				}
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: stream %s: %w", t.name, err)
	}
	return t, nil
}

// Name is the stream's name.
func (t *Transitions) Name() string { return t.name }

// Subjects is the stream's subject prefix ("postured-transitions.").
func (t *Transitions) Subjects() string { return t.prefix }

// Stream is the JetStream stream, for consumers (webhook deliveries).
func (t *Transitions) Stream() jetstream.Stream { return t.stream }

// Subject is the subject of a transition.
func (t *Transitions) Subject(tr posture.Transition) string {
	return t.prefix + tr.IdentityID + "." + tr.Kind
}

// Publish stores a transition derived from the event at sourceSeq; a
// transition already stored (same ID, within the deduplication window) is
// not stored again.
func (t *Transitions) Publish(ctx context.Context, tr posture.Transition, sourceSeq uint64) error {
	body, err := json.Marshal(tr)
	if err != nil {
		return fmt.Errorf("eventlog: encode transition: %w", err)
	}
	msg := &nats.Msg{Subject: t.Subject(tr), Data: body, Header: nats.Header{}}
	msg.Header.Set(HeaderSourceSeq, strconv.FormatUint(sourceSeq, 10))
	err = retryWithin(ctx, appendAttempt, func(ctx context.Context) error {
		_, err := t.l.js.PublishMsg(ctx, msg, jetstream.WithMsgID(tr.ID), jetstream.WithExpectStream(t.name))
		if err != nil {
			if denied := t.l.denied(msg.Subject); denied != nil {
				return denied
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("eventlog: publish transition %s: %w", tr.Kind, err)
	}
	return nil
}

// LastSource is the source sequence of the newest transition in the
// stream (0 when it is empty): the relays of all nodes resume after it.
func (t *Transitions) LastSource(ctx context.Context) (uint64, error) {
	var last uint64
	err := retry(ctx, func(ctx context.Context) error {
		info, err := t.stream.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs == 0 {
			last = 0
			return nil
		}
		m, err := t.stream.GetMsg(ctx, info.State.LastSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return fmt.Errorf("transition %d: %w", info.State.LastSeq, err) // raced with a write: ask again
		}
		if err != nil {
			return err
		}
		last, err = strconv.ParseUint(m.Header.Get(HeaderSourceSeq), 10, 64)
		if err != nil {
			return fmt.Errorf("eventlog: transition %d: header %s: %w", m.Sequence, HeaderSourceSeq, err)
		}
		return nil
	})
	return last, err
}

// Read calls fn with each stored transition from sequence from on, until
// the end of the stream as it was when called.
func (t *Transitions) Read(ctx context.Context, from uint64, fn func(seq uint64, tr posture.Transition) error) error {
	info, err := t.stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("eventlog: %s: %w", t.name, err)
	}
	for seq := max(from, info.State.FirstSeq); seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := t.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("eventlog: %s %d: %w", t.name, seq, err)
		}
		var tr posture.Transition
		if err := json.Unmarshal(m.Data, &tr); err != nil {
			return fmt.Errorf("eventlog: %s %d: %w", t.name, seq, err)
		}
		if err := fn(seq, tr); err != nil {
			return err
		}
	}
	return nil
}
