package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

type transitionsCmd struct {
	Tail transitionsTailCmd `cmd:"" help:"Follow the transitions stream live: one JSON line per transition (why and when an identity's access changed)."`
}

type transitionsTailCmd struct {
	logFlags
	Identity string   `help:"Only transitions of this identity."`
	Kind     []string `help:"Only transitions of these kinds (repeatable, or comma-separated)."`
	All      bool     `help:"Start at the oldest transition kept (default: after the newest)."`
}

// filters are the stream subjects the flags select: <prefix><identity>.<kind>.
func (t *transitionsTailCmd) filters(prefix string) ([]string, error) {
	identity := t.Identity
	if identity == "" {
		identity = "*"
	} else if strings.ContainsFunc(identity, func(r rune) bool { return r <= ' ' || r == 0x7f || strings.ContainsRune(".*>", r) }) {
		return nil, fmt.Errorf("--identity %q: not an identity id (no dots, wildcards, spaces or control characters)", identity)
	}
	kinds, err := listed("--kind", "a transition kind", t.Kind, posture.TransitionKinds)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, k := range kinds {
		out = append(out, prefix+identity+"."+k)
	}
	if len(out) == 0 {
		out = []string{prefix + identity + ".*"}
	}
	return out, nil
}

func (t *transitionsTailCmd) Run(ctx context.Context, s streams) error {
	if _, err := t.filters(""); err != nil {
		return usageError{err}
	}
	l, err := t.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	tr, err := l.OpenTransitions(ctx, eventlog.TransitionsOptions{Existing: true})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return errors.New("no transitions stream beside this log: a node creates it when it starts, so start one on it first")
	}
	if err != nil {
		return err
	}
	filters, _ := t.filters(tr.Subjects())
	deliver := jetstream.DeliverNewPolicy
	if t.All {
		deliver = jetstream.DeliverAllPolicy
	}
	reconnected := watchConnection(l.Conn(), s.err)
	return followStream(ctx, tr.Stream(), filters, deliver, reconnected, func(msg jetstream.Msg) error {
		// Each transition is stored as one line of compact JSON.
		_, err := fmt.Fprintf(s.out, "%s\n", msg.Data())
		return err
	})
}

// watchConnection says on w when the connection to NATS is lost and when
// it is back: a tail is silent otherwise while the server is away. The
// returned channel receives a value at each reconnection.
func watchConnection(nc *nats.Conn, w io.Writer) <-chan struct{} {
	reconnected := make(chan struct{}, 1)
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if c.IsClosed() { // closed by this command, not lost
			return
		}
		fmt.Fprintf(w, "postured: lost the connection to NATS (%v); waiting for it to come back\n", err)
	})
	nc.SetReconnectHandler(func(c *nats.Conn) {
		fmt.Fprintf(w, "postured: connected to NATS again (%s)\n", c.ConnectedUrlRedacted())
		select {
		case reconnected <- struct{}{}:
		default:
		}
	})
	return reconnected
}

const (
	// tailInactive is how long the server keeps a tail's consumer once
	// nobody pulls from it.
	tailInactive = time.Minute
	// tailHeartbeat is how often an idle consumer says it is still there.
	tailHeartbeat = 5 * time.Second
)

// followStream calls fn with each message of stream on filters, from the
// deliver policy on and in order, until ctx ends.
//
// It follows with an ephemeral consumer of its own rather than an ordered
// consumer, which deletes the consumer it replaces: the auditor's
// credentials may create consumers but not delete them (the server logs
// each refusal). When a consumer is lost (the connection dropped and came
// back, the heartbeats stopped, a message was missed), a new one starts
// after the last message delivered, and the old one is left to the server,
// which removes it after tailInactive.
func followStream(ctx context.Context, stream jetstream.Stream, filters []string, deliver jetstream.DeliverPolicy,
	reconnected <-chan struct{}, fn func(jetstream.Msg) error) error {
	var next uint64 // the stream sequence after the last message delivered (0: none yet)
	wait := 250 * time.Millisecond
	for first := true; ; first = false {
		cfg := jetstream.ConsumerConfig{DeliverPolicy: deliver, AckPolicy: jetstream.AckNonePolicy,
			InactiveThreshold: tailInactive, MemoryStorage: true, Replicas: 1}
		if len(filters) == 1 {
			cfg.FilterSubject = filters[0]
		} else {
			cfg.FilterSubjects = filters
		}
		if next != 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, next
		}
		cons, err := stream.CreateConsumer(ctx, cfg)
		if err == nil {
			err = followConsumer(ctx, cons, reconnected, &next, fn)
		} else if first {
			return fmt.Errorf("follow %s: %w", stream.CachedInfo().Config.Name, err)
		}
		var stop stopFollowing
		if ctx.Err() != nil {
			return nil
		}
		if errors.As(err, &stop) {
			return stop.err
		}
		// Lost: start again where it left off, once the server answers.
		select {
		case <-ctx.Done():
			return nil
		case <-reconnected:
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
		if err == nil {
			wait = 250 * time.Millisecond
		}
	}
}

// stopFollowing ends followStream with err (the connection is closed, fn
// failed, a message is unreadable).
type stopFollowing struct{ err error }

func (s stopFollowing) Error() string { return s.err.Error() }

// followConsumer delivers cons's messages to fn, advancing next, until the
// consumer is lost (nil: follow again from next) or must stop.
func followConsumer(ctx context.Context, cons jetstream.Consumer, reconnected <-chan struct{}, next *uint64, fn func(jetstream.Msg) error) error {
	msgs, err := cons.Messages(jetstream.PullHeartbeat(tailHeartbeat), jetstream.WithMessagesErrOnMissingHeartbeat(true))
	if err != nil {
		return err
	}
	defer msgs.Stop()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-ctx.Done():
		case <-reconnected: // the consumer may be gone with the server
		case <-done:
			return
		}
		msgs.Stop()
	}()
	var delivered uint64 // the consumer's own sequence: a gap is a missed message
	for {
		msg, err := msgs.Next()
		if err != nil {
			if errors.Is(err, nats.ErrConnectionClosed) {
				return stopFollowing{err}
			}
			return nil
		}
		md, err := msg.Metadata()
		if err != nil {
			return stopFollowing{err}
		}
		if md.Sequence.Consumer != delivered+1 {
			return nil
		}
		delivered = md.Sequence.Consumer
		if md.Sequence.Stream < *next {
			continue
		}
		if err := fn(msg); err != nil {
			return stopFollowing{err}
		}
		*next = md.Sequence.Stream + 1
	}
}
