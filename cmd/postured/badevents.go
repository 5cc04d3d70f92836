package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// haltingSource is the log as a node's projection consumes it. At a message
// that is not an event and that no decision skips, it stops loudly (an
// ERROR line with the sequence and the reason, readiness 503 naming it, the
// bad-event metrics) and waits for an operator's decision (`postured events
// skip`), then goes on by itself. Nothing is skipped without a decision.
type haltingSource struct {
	log    *eventlog.Log
	via    projections.Source // what reads log (the checkpointer, which hashes what it delivers); nil: log itself
	halt   *api.Halt
	logger *slog.Logger
}

func (s haltingSource) Consume(ctx context.Context, from uint64, fn func([]posture.Event) error) error {
	var via projections.Source = s.log
	if s.via != nil {
		via = s.via
	}
	for {
		err := via.Consume(ctx, from, func(batch []posture.Event) error {
			if err := fn(batch); err != nil {
				return err
			}
			for _, e := range batch {
				if p, ok := skippedHere(e); ok {
					s.logger.Info("passed over a message that is not an event, as decided", "seq", e.Seq,
						"by", e.Actor, "reason", p.Reason, "problem", p.Problem)
				}
			}
			from = batch[len(batch)-1].Seq + 1
			return nil
		})
		var bad *eventlog.BadEventError
		if !errors.As(err, &bad) {
			return err
		}
		// Logged first: whoever sees the halt finds its line in the log.
		s.logger.Error("projection stopped at a message that is not an event: inspect it with `postured events inspect --seq N`, "+
			"and skip it with `postured events skip --seq N --reason ...` to go on (against a running node, with --nats-url and postured's NATS credentials)",
			"seq", bad.Seq, "subject", bad.Subject, "reason", bad.Reason)
		s.halt.Stop(bad.Seq, bad.Reason)
		if _, err := s.log.WaitForSkip(ctx, bad); err != nil {
			return err
		}
		s.halt.Resume()
		from = bad.Seq // the consumer delivers the decision in its place
	}
}

// skippedHere returns the decision if e stands in place of the message it
// skipped (the decision is also delivered where it was appended).
func skippedHere(e posture.Event) (posture.EventSkipped, bool) {
	if e.Type != posture.TypeEventSkipped {
		return posture.EventSkipped{}, false
	}
	p, err := e.Decode()
	if err != nil {
		return posture.EventSkipped{}, false
	}
	sk, ok := p.(posture.EventSkipped)
	return sk, ok && sk.Seq == e.Seq
}

// explainBad adds to an error that stopped a reader at a message that is not
// an event what the operator can do about it.
func explainBad(err error) error {
	var bad *eventlog.BadEventError
	if !errors.As(err, &bad) {
		return err
	}
	return fmt.Errorf("%w\ninspect it with `postured events inspect --seq %d`; `postured events skip --seq %d --reason \"...\"` records the decision to pass over it",
		err, bad.Seq, bad.Seq)
}

type eventsInspectCmd struct {
	logFlags
	Seq  uint64 `required:"" help:"Sequence of the message."`
	JSON bool   `name:"json" help:"Print the message as one JSON object."`
}

// inspection is what events inspect shows of a message.
type inspection struct {
	Seq     uint64              `json:"seq"`
	Subject string              `json:"subject"`
	Stored  time.Time           `json:"stored"`
	Headers map[string][]string `json:"headers,omitempty"`
	Data    []byte              `json:"data"` // base64 in JSON
	Size    int                 `json:"size"`
	IsEvent bool                `json:"isEvent"`
	Type    string              `json:"type,omitempty"`
	Events  int                 `json:"events,omitempty"` // a batch's count (group commit)
	Problem string              `json:"problem,omitempty"`
	Skip    *skipView           `json:"skippedBy,omitempty"`
}

// skipView is a decision to skip a message, for people and for JSON.
type skipView struct {
	Seq         uint64    `json:"seq"`         // the skipped message
	DecisionSeq uint64    `json:"decisionSeq"` // where the decision is in the log
	At          time.Time `json:"at"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	Problem     string    `json:"problem,omitempty"`
}

func newSkipView(d posture.Event) skipView {
	p, _ := d.Decode()
	sk, _ := p.(posture.EventSkipped)
	return skipView{Seq: sk.Seq, DecisionSeq: d.Seq, At: d.At, Actor: d.Actor, Reason: sk.Reason, Problem: sk.Problem}
}

func (x *eventsInspectCmd) Run(ctx context.Context, s streams) error {
	l, err := x.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	m, err := l.Message(ctx, x.Seq)
	if err != nil {
		return err
	}
	in := inspection{Seq: m.Seq, Subject: m.Subject, Stored: m.Time, Headers: m.Header, Data: m.Data, Size: len(m.Data)}
	events, err := m.Events()
	var bad *eventlog.BadEventError
	switch {
	case err == nil && len(events) > 1:
		in.IsEvent, in.Events = true, len(events)
	case err == nil:
		in.IsEvent, in.Type = true, events[0].Type
	case errors.As(err, &bad):
		in.Problem = bad.Reason
		d, ok, err := l.SkipFor(ctx, bad)
		if err != nil {
			return err
		}
		if ok {
			v := newSkipView(d)
			in.Skip = &v
		}
	default:
		return err
	}
	if x.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(in)
	}
	return writeInspection(s.out, in)
}

// writeInspection prints a message for people: its data as text when it is
// printable, as a hex dump otherwise.
func writeInspection(w io.Writer, in inspection) error {
	fmt.Fprintf(w, "sequence: %d\nsubject:  %s\nstored:   %s\n", in.Seq, pr(in.Subject), in.Stored.Format(time.RFC3339Nano))
	keys := make([]string, 0, len(in.Headers))
	for k := range in.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "header:   %s: %s\n", pr(k), pr(strings.Join(in.Headers[k], ", ")))
	}
	if printable(in.Data) {
		fmt.Fprintf(w, "data:     %d bytes, text:\n%s\n", in.Size, posture.PrintableLines(string(in.Data)))
	} else {
		fmt.Fprintf(w, "data:     %d bytes, not text:\n%s", in.Size, hex.Dump(in.Data))
	}
	switch {
	case in.IsEvent && in.Events > 1:
		fmt.Fprintf(w, "event:    yes, a batch of %d events\n", in.Events)
	case in.IsEvent:
		fmt.Fprintf(w, "event:    yes, of type %s\n", in.Type)
	case in.Skip != nil:
		fmt.Fprintf(w, "event:    no: %s\nskipped:  by %s at %s (decision at sequence %d): %s\n", pr(in.Problem),
			pr(in.Skip.Actor), in.Skip.At.Format(time.RFC3339), in.Skip.DecisionSeq, pr(in.Skip.Reason))
	default:
		fmt.Fprintf(w, "event:    no: %s\nskipped:  no; consumers stop here until `postured events skip --seq %d --reason \"...\"` records the decision\n",
			pr(in.Problem), in.Seq)
	}
	return nil
}

// printable reports whether data reads as text.
func printable(data []byte) bool {
	if !utf8.Valid(data) {
		return false
	}
	for _, r := range string(data) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

type eventsSkipCmd struct {
	logFlags
	Seq    uint64 `required:"" help:"Sequence of the message that is not an event."`
	Reason string `required:"" help:"Why it is skipped (recorded in the log)."`
	Actor  string `help:"Who decides (recorded in the log; default: <user>@<host>)."`
}

func (x *eventsSkipCmd) Run(ctx context.Context, s streams) error {
	if strings.TrimSpace(x.Reason) == "" {
		return usageError{errors.New("--reason is empty: say why the message is skipped (it is recorded in the log)")}
	}
	actor := x.Actor
	if actor == "" {
		actor = defaultActor()
	}
	l, err := x.openToWrite(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	d, err := l.Skip(ctx, eventlog.SkipRequest{Seq: x.Seq, Reason: x.Reason, Actor: actor, At: time.Now()})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(s.out, "skipped message %d: decision recorded at sequence %d by %s; every node passes over it\n", x.Seq, d.Seq, pr(actor))
	return err
}

// defaultActor names the operator running a command: user@host.
func defaultActor() string {
	name := "unknown"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
}

type auditSkipsCmd struct {
	logFlags
	JSON bool `name:"json" help:"One JSON object per line instead of a table."`
}

func (a *auditSkipsCmd) Run(ctx context.Context, s streams) error {
	l, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	skips, err := l.Skips(ctx)
	if err != nil {
		return err
	}
	if a.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		for _, d := range skips {
			if err := enc.Encode(newSkipView(d)); err != nil {
				return err
			}
		}
		return nil
	}
	if len(skips) == 0 {
		fmt.Fprintln(s.err, "postured: no message of the log has been skipped")
		return nil
	}
	tw := tabwriter.NewWriter(s.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SKIPPED SEQ\tDECIDED AT\tDECISION SEQ\tBY\tREASON\tPROBLEM")
	for _, d := range skips {
		v := newSkipView(d)
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", v.Seq, v.At.UTC().Format(api.TimeFormat), v.DecisionSeq, pr(v.Actor), pr(v.Reason), pr(v.Problem))
	}
	return tw.Flush()
}
