package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/projections"
)

// parseTime reads a time flag: an RFC 3339 time (2026-11-22T10:32:00Z,
// with or without fractions of a second) or a duration from now (-2h,
// -90m, -1h30m). The end of a range (end) is taken to the end of its last
// digit (posture.EndOf), so that --at or --until 10:32:00Z includes the events
// of 10:32:00.5. A value it cannot read is a usage error.
func parseTime(flag, s string, end bool, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, usageError{fmt.Errorf("--%s %q: want an RFC 3339 time (2026-11-22T10:32:00Z, 2026-11-22T11:32:00+01:00) or a duration from now (-2h, -30m)", flag, s)}
	}
	if end {
		t = posture.EndOf(s, t)
	}
	return t, nil
}

type auditCmd struct {
	Identity auditIdentityCmd `cmd:"" name:"identity" help:"An identity's timeline: posture facts, access changes and session decisions."`
	Verify   auditVerifyCmd   `cmd:"" name:"verify" help:"Check the log against its signed checkpoints: exit 0 with a summary, or 1 naming the first sequence deleted, altered or inserted."`
	Skips    auditSkipsCmd    `cmd:"" name:"skips" help:"The messages of the log that are not events and were skipped: who decided, when and why."`
}

type auditIdentityCmd struct {
	logFlags
	ID    string `arg:"" help:"Identity id."`
	Since string `help:"Only entries at or after this time (RFC 3339, or a duration from now such as -2h)."`
	Until string `help:"Only entries at or before this time (RFC 3339, taken to the end of its last digit, so 10:32:00Z includes 10:32:00.5; or a duration from now such as -30m)."`
	JSON  bool   `name:"json" help:"One JSON object per line instead of a table."`
}

func (a *auditIdentityCmd) Run(ctx context.Context, s streams) error {
	now := time.Now()
	since, err := parseTime("since", a.Since, false, now)
	if err != nil {
		return err
	}
	until, err := parseTime("until", a.Until, true, now)
	if err != nil {
		return err
	}
	if !since.IsZero() && !until.IsZero() && until.Before(since) {
		return usageError{errors.New("--until is before --since")}
	}
	l, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	store, release, err := pastMoment(ctx, l.Log, l.snapshots, cutoff{until: until}, a.ID)
	if err != nil {
		return err
	}
	defer release()
	if w := missingWarning(ctx, l.Log, store.Cursor()); w != "" {
		fmt.Fprintln(s.err, "postured: warning:", w)
	}
	entries, err := store.History(a.ID, since, until)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		// A deleted identity keeps its timeline; one the log never
		// had is a mistake worth saying.
		if _, err := projections.Get[posture.Identity](store, a.ID); errors.Is(err, posture.ErrNotFound) {
			return posture.NotFound("identity", a.ID)
		}
		window := ""
		if !since.IsZero() || !until.IsZero() {
			window = " in the window"
		}
		fmt.Fprintf(s.err, "postured: no entry%s: nothing of the identity's is recorded there yet\n", window)
	}
	return writeHistory(s.out, entries, a.JSON)
}

// writeHistory prints a timeline as a table or as JSON lines.
func writeHistory(w io.Writer, entries []posture.HistoryEntry, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, e := range entries {
			if err := enc.Encode(e); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSEQ\tKIND\tAPI SESSION\tWHAT\tCAUSE")
	for _, e := range entries {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", e.At.UTC().Format(api.TimeFormat), e.Seq, e.Kind, cell(orDash(e.APISessionID)), cell(e.Summary), e.Event)
	}
	return tw.Flush()
}

// maxCell bounds a table cell: the table pads every row to its widest
// cell, so one client's long report would widen every line. --json prints
// everything.
const maxCell = 160

// cell is a printable table cell of at most maxCell characters.
func cell(s string) string {
	s = pr(s)
	if r := []rune(s); len(r) > maxCell {
		return string(r[:maxCell-1]) + "…"
	}
	return s
}

// pr is posture.Printable: what endpoints and admins wrote, for a terminal.
var pr = posture.Printable

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type explainCmd struct {
	logFlags
	Identity string `required:"" help:"Identity id."`
	Service  string `required:"" help:"Service id."`
	At       string `help:"The moment (RFC 3339, taken to the end of its last digit, so 10:32:00Z includes 10:32:00.5; or a duration from now such as -2h); default now."`
	Type     string `default:"Dial" help:"Dial or Bind (in any case, as the API takes it)."`
	JSON     bool   `name:"json" help:"Print the explanation as JSON."`
}

func (x *explainCmd) Validate() error {
	for _, t := range []string{posture.Dial, posture.Bind} {
		if strings.EqualFold(x.Type, t) {
			x.Type = t
			return nil
		}
	}
	return fmt.Errorf("--type %q: want Dial or Bind", x.Type)
}

func (x *explainCmd) Run(ctx context.Context, s streams) error {
	at, err := parseTime("at", x.At, true, time.Now())
	if err != nil {
		return err
	}
	if at.IsZero() {
		at = time.Now().UTC()
	}
	l, err := x.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	e, err := explainAt(ctx, l.Log, l.snapshots, x.Identity, x.Service, x.Type, at)
	if err != nil {
		return err
	}
	if x.JSON {
		enc := json.NewEncoder(s.out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	return writeExplanation(s.out, e)
}

// writeExplanation prints a decision for people.
func writeExplanation(w io.Writer, e posture.Explanation) error {
	if e.Warning != "" {
		fmt.Fprintf(w, "WARNING: %s\n", e.Warning)
	}
	fmt.Fprintf(w, "%s of service %s (%s) by identity %s at %s: %s\n", e.Type, pr(e.ServiceName), pr(e.ServiceID), pr(e.IdentityID),
		e.At.UTC().Format(api.TimeFormat), strings.ToUpper(e.Decision))
	for _, s := range e.APISessions {
		verdict := "denied"
		if s.Granted {
			verdict = "granted"
		}
		fmt.Fprintf(w, "\nAPI session %s: %s\n", pr(s.APISessionID), verdict)
		for _, p := range s.Policies {
			fmt.Fprintf(w, "  policy %s (%s): %s\n", pr(p.PolicyName), p.PolicyID, passing(p.Passing))
			if len(p.Checks) == 0 {
				fmt.Fprintln(w, "    no posture checks: always passes")
			}
			for _, c := range p.Checks {
				var notes string
				if c.Stale {
					notes += " (stale evidence)"
				}
				if c.ReportOnly {
					notes += " (report only: does not deny)"
				}
				fmt.Fprintf(w, "    %s check %s: %s%s\n", c.PostureCheckType, pr(c.PostureCheckName), passing(c.Passing), notes)
				fmt.Fprintf(w, "      actual:   %s\n      expected: %s\n", pr(string(c.ActualValue)), pr(string(c.ExpectedValue)))
				for _, d := range []struct {
					what string
					t    *time.Time
				}{{"valid until", c.ValidUntil}, {"MFA timeout ends", c.TimeoutEndsAt}, {"wake grace ends", c.WakeGraceEnds}, {"unlock grace ends", c.UnlockGraceEnds}} {
					if d.t != nil {
						fmt.Fprintf(w, "      %s: %s\n", d.what, d.t.UTC().Format(api.TimeFormat))
					}
				}
			}
		}
		for _, r := range s.Related {
			fmt.Fprintf(w, "  fact: %s at %s (event %d, %s)\n", pr(r.Summary), r.At.UTC().Format(api.TimeFormat), r.Seq, r.Event)
		}
		if s.LastChange != nil {
			fmt.Fprintf(w, "  last change: %s at %s (event %d, %s)\n", pr(s.LastChange.Summary), s.LastChange.At.UTC().Format(api.TimeFormat), s.LastChange.Seq, s.LastChange.Event)
		}
	}
	return nil
}

func passing(ok bool) string {
	if ok {
		return "passing"
	}
	return "failing"
}

type eventsCmd struct {
	Tail    eventsTailCmd    `cmd:"" help:"Follow the log live: one JSON line per event (for a SIEM pipe)."`
	Inspect eventsInspectCmd `cmd:"" help:"Show a message of the log as it is stored, and whether it is an event."`
	Skip    eventsSkipCmd    `cmd:"" help:"Record in the log the decision to pass over a message that is not an event."`
}

type eventsTailCmd struct {
	logFlags
	Identity string   `help:"Only events about this identity."`
	Type     []string `help:"Only events of these types (repeatable, or comma-separated)."`
	From     uint64   `help:"Start at this sequence (default, or 0: after the newest event; 1: the log's start)."`
	NoFollow bool     `help:"Stop after the newest event (the log's newest when the command starts) instead of following the log: with --from, a dump."`
}

// listed reads a repeatable, comma-separated flag whose values must be
// among allowed (each an "a" of what), once each, in order.
func listed(flag, what string, values, allowed []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, x := range strings.Split(v, ",") {
			x = strings.TrimSpace(x)
			if !slices.Contains(allowed, x) {
				return nil, fmt.Errorf("%s %q: not %s (%s)", flag, x, what, strings.Join(allowed, ", "))
			}
			if !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	return out, nil
}

func (t *eventsTailCmd) Run(ctx context.Context, s streams) error {
	list, err := listed("--type", "an event type", t.Type, posture.EventTypes())
	if err != nil {
		return usageError{err}
	}
	types := map[string]bool{}
	for _, ty := range list {
		types[ty] = true
	}
	l, err := t.open(ctx)
	if err != nil {
		return err
	}
	defer l.Close()
	watchConnection(l.Conn(), s.err)
	last, err := l.LastSeq(ctx)
	if err != nil {
		return err
	}
	from := t.From
	if from == 0 {
		from = last + 1
	}
	read := func(from uint64, fn func([]posture.Event) error) error {
		if !t.NoFollow {
			return l.Consume(ctx, from, fn)
		}
		if from > last {
			return nil
		}
		return l.Read(ctx, from, last, fn)
	}
	if !t.NoFollow {
		// Every event from here on is printed: a script may act now.
		fmt.Fprintf(s.err, "postured: following the log from sequence %d (Ctrl-C stops)\n", from)
	}
	enc := json.NewEncoder(s.out)
	enc.SetEscapeHTML(false)
	printed := 0
	for {
		err = read(from, func(batch []posture.Event) error {
			for _, e := range batch {
				from = e.Seq + 1
				if len(types) > 0 && !types[e.Type] {
					continue
				}
				if t.Identity != "" && !aboutIdentity(e, t.Identity) {
					continue
				}
				if err := enc.Encode(tailLine{Event: e, Seq: e.Seq, Part: e.Part}); err != nil {
					return err
				}
				printed++
			}
			return nil
		})
		// A message that is not an event is reported (not its data:
		// `events inspect` shows it) and the tail goes on: it applies
		// nothing, so it needs no decision to pass over it.
		var bad *eventlog.BadEventError
		if !errors.As(err, &bad) {
			break
		}
		if len(types) == 0 && t.Identity == "" {
			if err := enc.Encode(badLine{Seq: bad.Seq, Subject: bad.Subject, Stored: bad.Stored, Problem: bad.Reason,
				Size: len(bad.Data), DataSHA256: bad.DataSHA256(), NotAnEvent: true}); err != nil {
				return err
			}
			printed++
		}
		from = bad.Seq + 1
	}
	if ctx.Err() != nil {
		return nil
	}
	if err == nil && t.NoFollow && printed == 0 {
		// Said, so that an empty dump is not taken for an empty log.
		why := "none matched"
		switch {
		case t.From == 0:
			why = "without --from, or with --from 0, the tail starts after the newest; --from 1 dumps the log"
		case t.From > last:
			why = fmt.Sprintf("--from %d is past it", t.From)
		}
		fmt.Fprintf(s.err, "postured: no event printed: the log's newest is sequence %d (%s)\n", last, why)
	}
	return err
}

// badLine is how events tail reports a message that is not an event.
type badLine struct {
	Seq        uint64    `json:"seq"`
	Subject    string    `json:"subject"`
	Stored     time.Time `json:"stored"`
	NotAnEvent bool      `json:"notAnEvent"`
	Problem    string    `json:"problem"`
	Size       int       `json:"size"`
	DataSHA256 string    `json:"dataSha256"`
}

// tailLine is an event with its sequence, as events tail prints it.
type tailLine struct {
	posture.Event
	Seq  uint64 `json:"seq"`
	Part int    `json:"part"` // the event's index in its message: 0 alone or first of a batch (group commit)
}

// aboutIdentity reports whether an event concerns an identity: its subject
// is the identity's (posture, sessions, API sessions, MFA), or its payload
// names the identity.
func aboutIdentity(e posture.Event, id string) bool {
	if strings.HasSuffix(e.Subject, "."+id) {
		return true
	}
	var p struct {
		IdentityID string `json:"identityId"`
		ID         string `json:"id"`
		Entity     struct {
			ID         string `json:"id"`
			IdentityID string `json:"identityId"`
		} `json:"entity"`
	}
	if json.Unmarshal(e.Data, &p) != nil {
		return false
	}
	return p.IdentityID == id || p.Entity.ID == id || p.Entity.IdentityID == id ||
		(strings.HasPrefix(e.Type, "identity.") && p.ID == id)
}
