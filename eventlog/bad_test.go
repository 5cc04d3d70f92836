package eventlog_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// publishRaw stores data on subject as it is, as any client allowed to
// publish on the stream can, and returns its sequence.
func publishRaw(t *testing.T, l *eventlog.Log, subject string, data []byte) uint64 {
	t.Helper()
	ack, err := l.JetStream().Publish(context.Background(), "postured."+subject, data)
	if err != nil {
		t.Fatal(err)
	}
	return ack.Sequence
}

// readAll reads the log from 1 to its end and returns what was delivered
// and the error Read stopped with.
func readAll(t *testing.T, l *eventlog.Log) ([]posture.Event, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []posture.Event
	err := l.Read(ctx, 1, 0, func(b []posture.Event) error {
		got = append(got, b...)
		return nil
	})
	return got, err
}

func seqs(events []posture.Event) []uint64 {
	var out []uint64
	for _, e := range events {
		out = append(out, e.Seq)
	}
	return out
}

func TestBadEventStopsUntilSkipped(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, t.TempDir())
	defer l.Close()
	for i := 1; i <= 2; i++ {
		if _, err := l.Append(ctx, event("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	badSeq := publishRaw(t, l, "model", []byte("not json at all"))
	if _, err := l.Append(ctx, event("a", 4)); err != nil {
		t.Fatal(err)
	}

	// The consumer delivers what comes before and stops at the message,
	// naming it.
	got, err := readAll(t, l)
	var bad *eventlog.BadEventError
	if !errors.As(err, &bad) {
		t.Fatalf("read: %v, want a BadEventError", err)
	}
	if bad.Seq != badSeq || bad.Subject != "postured.model" || string(bad.Data) != "not json at all" || !strings.Contains(bad.Reason, "not JSON") {
		t.Fatalf("bad event: %+v", bad)
	}
	if s := seqs(got); len(s) != 2 || s[1] != 2 {
		t.Fatalf("delivered %v before the bad message, want [1 2]", s)
	}

	// The decisions that are refused, each with a clear error.
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		req  eventlog.SkipRequest
		code string
		msg  string
	}{
		{eventlog.SkipRequest{Seq: 1, Reason: "r", Actor: "op"}, posture.CodeCouldNotValidate, "is a valid config.changed event"},
		{eventlog.SkipRequest{Seq: 99, Reason: "r", Actor: "op"}, posture.CodeNotFound, "its last sequence is 4"},
		{eventlog.SkipRequest{Seq: badSeq, Reason: " ", Actor: "op"}, posture.CodeCouldNotValidate, "reason"},
		{eventlog.SkipRequest{Seq: badSeq, Reason: "r"}, posture.CodeCouldNotValidate, "decides"},
	} {
		c.req.At = now
		_, err := l.Skip(ctx, c.req)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != c.code || !strings.Contains(pe.Error()+pe.Message+pe.Reason, c.msg) {
			t.Errorf("skip %+v: %v, want %s mentioning %q", c.req, err, c.code, c.msg)
		}
	}
	if got, _ := readAll(t, l); len(got) != 2 {
		t.Fatalf("a refused decision let the consumer go on: %v", seqs(got))
	}

	d, err := l.Skip(ctx, eventlog.SkipRequest{Seq: badSeq, Reason: "garbage from a test client", Actor: "alice@ops", At: now})
	if err != nil {
		t.Fatal(err)
	}
	if d.Seq != 5 || d.Subject != posture.SkipSubject(badSeq) || d.Actor != "alice@ops" {
		t.Fatalf("decision: %+v", d)
	}
	if _, err := l.Skip(ctx, eventlog.SkipRequest{Seq: badSeq, Reason: "again", Actor: "bob", At: now}); err == nil ||
		!strings.Contains(err.Error(), "already skipped: by alice@ops") {
		t.Fatalf("second decision: %v, want already skipped", err)
	}

	// Now every reader passes over it: in its place, the decision.
	got, err = readAll(t, l)
	if err != nil {
		t.Fatal(err)
	}
	if s := seqs(got); len(s) != 5 || s[2] != badSeq || s[4] != 5 {
		t.Fatalf("delivered %v, want [1 2 3 4 5]", s)
	}
	for _, e := range []posture.Event{got[2], got[4]} {
		p, err := e.Decode()
		if err != nil {
			t.Fatal(err)
		}
		sk := p.(posture.EventSkipped)
		if e.Type != posture.TypeEventSkipped || sk.Seq != badSeq || sk.Reason != "garbage from a test client" ||
			!strings.Contains(sk.Problem, "not JSON") || e.Actor != "alice@ops" {
			t.Fatalf("event %d: %+v %+v", e.Seq, e, sk)
		}
	}
	if got[2].At.Equal(now) || got[2].At.IsZero() {
		t.Errorf("in place of the message, the decision carries the message's stored time, got %v", got[2].At)
	}
	skips, err := l.Skips(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) != 1 || skips[0].Seq != 5 {
		t.Fatalf("skips: %+v", skips)
	}
}

// Every way a message fails to be an event is reported, with why.
func TestBadEventKinds(t *testing.T) {
	l := openLog(t, t.TempDir())
	defer l.Close()
	for _, c := range []struct {
		name, subject, data, reason string
	}{
		{"not json", "model", "not json at all", "not JSON"},
		{"json but not an object", "model", `[1,2]`, "not JSON"},
		{"no envelope", "model", `{"hello":"world"}`, "the envelope has no id, type, subject"},
		{"other subject", "posture.x", `{"id":"e1","type":"config.changed","at":"2026-01-01T00:00:00Z","subject":"model","data":{}}`, `subject "model" is not the subject`},
		{"unknown type", "model", `{"id":"e1","type":"identity.promoted","at":"2026-01-01T00:00:00Z","subject":"model","data":{}}`, `unknown event type "identity.promoted"`},
		{"payload does not decode", "model", `{"id":"e1","type":"config.changed","at":"2026-01-01T00:00:00Z","subject":"model","data":{"mfaGraceSeconds":"long"}}`, "decode config.changed"},
		{"no time", "model", `{"id":"e1","type":"config.changed","subject":"model","data":{}}`, "the envelope has no at"},
		{"a posture fact of nobody", "posture.x", `{"id":"e1","type":"posture.recorded","at":"2026-01-01T00:00:00Z","subject":"posture.x","data":{"secret":"hunter2"}}`,
			"invalid posture.recorded payload: identityId is required"},
		{"invalid payload", "skip.1", `{"id":"e1","type":"event.skipped","at":"2026-01-01T00:00:00Z","subject":"skip.1","data":{"seq":1}}`, "invalid event.skipped payload: reason is required"},
		// Batches (group commit).
		{"a batch not an array", "batch", `{"id":"x"}`, "not a JSON array"},
		{"a batch of one event", "batch", rawBatch(recorded("a", 1)), "at least 2 events, this one 1"},
		{"a batch not of objects", "batch", `[1,2]`, "is not a JSON object"},
		{"a batch with a type never batched", "batch", rawBatch(recorded("a", 1), posture.MustEvent(posture.ConfigChanged{}, time.Now())),
			"of type config.changed, which is never batched"},
		{"a batch with an event without envelope", "batch", strings.TrimSuffix(rawBatch(recorded("a", 1)), "]") + `,{"hello":"world"}]`, "event 1 of the batch"},
	} {
		t.Run(c.name, func(t *testing.T) {
			seq := publishRaw(t, l, c.subject, []byte(c.data))
			m, err := l.Message(context.Background(), seq)
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Events()
			var bad *eventlog.BadEventError
			if !errors.As(err, &bad) || !strings.Contains(bad.Reason, c.reason) {
				t.Fatalf("decode: %v, want a bad event because %q", err, c.reason)
			}
			if _, err := l.Get(context.Background(), seq); !errors.As(err, &bad) {
				t.Fatalf("get: %v, want a BadEventError", err)
			}
		})
	}
}

// WaitForSkip returns once an operator decided, and a decision about other
// bytes than the message's skips nothing.
func TestWaitForSkip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := openLog(t, t.TempDir())
	defer l.Close()
	seq := publishRaw(t, l, "model", []byte("\x00\x01 binary"))
	_, err := readAll(t, l)
	var bad *eventlog.BadEventError
	if !errors.As(err, &bad) {
		t.Fatal(err)
	}

	// A forged decision (any client could append one) names other bytes.
	forged, err := posture.NewEvent(posture.EventSkipped{Seq: seq, Reason: "forged", DataSHA256: strings.Repeat("0", 64)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, forged); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := l.SkipFor(ctx, bad); ok || err != nil {
		t.Fatalf("a decision about other bytes skips the message (ok %v, err %v)", ok, err)
	}

	type result struct {
		d   posture.Event
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := l.WaitForSkip(ctx, bad)
		done <- result{d, err}
	}()
	d, err := l.Skip(ctx, eventlog.SkipRequest{Seq: seq, Reason: "binary junk", Actor: "op", At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || r.d.Seq != d.Seq {
		t.Fatalf("WaitForSkip: %+v, %v; want the decision at %d", r.d, r.err, d.Seq)
	}
	if got, err := readAll(t, l); err != nil || len(got) != 3 {
		t.Fatalf("after the decision: %v, %v", seqs(got), err)
	}
}
