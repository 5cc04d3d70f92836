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
	NoFollow bool     `help:"Stop after the newest transition (the stream's newest when the command starts) instead of following: with --all, a dump."`
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
	watchConnection(l.Conn(), s.err)
	// An ordered consumer: ephemeral, in stream order, and recreated by
	// the client where it left off if the server loses it (it deletes the
	// one it replaces: the auditor's credentials may delete their own).
	cons, err := tr.Stream().OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: deliver})
	if err != nil {
		return fmt.Errorf("follow %s: %w", tr.Name(), err)
	}
	// The server would keep the consumer for minutes after the command
	// ends: a script that dumps the stream often would pile them up.
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = tr.Stream().DeleteConsumer(ctx, cons.CachedInfo().Name)
	}()
	var last uint64 // with --no-follow: the stream's newest when the command starts
	if t.NoFollow {
		info, err := tr.Stream().Info(ctx)
		if err != nil {
			return err
		}
		if last = info.State.LastSeq; !t.All || cons.CachedInfo().NumPending == 0 {
			return nil // nothing selected before now
		}
	}
	msgs, err := cons.Messages()
	if err != nil {
		return err
	}
	defer msgs.Stop()
	go func() { <-ctx.Done(); msgs.Stop() }()
	if !t.NoFollow {
		// The consumer stands: every transition from here on is printed,
		// and a script may act now.
		from := "after the newest transition"
		if t.All {
			from = "the oldest transition kept"
		}
		fmt.Fprintf(s.err, "postured: following %s from %s (Ctrl-C stops)\n", tr.Name(), from)
	}
	for {
		msg, err := msgs.Next()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if t.NoFollow && meta.Sequence.Stream > last {
			return nil
		}
		// Each transition is stored as one line of compact JSON.
		if _, err := fmt.Fprintf(s.out, "%s\n", msg.Data()); err != nil {
			return err
		}
		if t.NoFollow && (meta.NumPending == 0 || meta.Sequence.Stream >= last) {
			return nil
		}
	}
}

// watchConnection says on w when the connection to NATS is lost and when
// it is back: a tail is silent otherwise while the server is away.
func watchConnection(nc *nats.Conn, w io.Writer) {
	nc.SetDisconnectErrHandler(func(c *nats.Conn, err error) {
		if c.IsClosed() { // closed by this command, not lost
			return
		}
		fmt.Fprintf(w, "postured: lost the connection to NATS (%v); waiting for it to come back\n", err)
	})
	nc.SetReconnectHandler(func(c *nats.Conn) {
		fmt.Fprintf(w, "postured: connected to NATS again (%s)\n", c.ConnectedUrlRedacted())
	})
}
