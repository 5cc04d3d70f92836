package eventlog_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

func openLog(t *testing.T, dir string) *eventlog.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func event(subject string, n int) posture.Event {
	return posture.Event{
		ID: posture.NewToken(), Type: posture.TypeConfigChanged, Schema: 1, Subject: subject,
		At: time.Unix(int64(n), 0).UTC(), Data: []byte(fmt.Sprintf(`{"n":%d}`, n)),
	}
}

func collect(t *testing.T, l *eventlog.Log, from, to uint64) []posture.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var got []posture.Event
	if err := l.Read(ctx, from, to, func(b []posture.Event) error {
		got = append(got, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestAppendDedupeResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openLog(t, dir)

	var ids []string
	for i := 1; i <= 5; i++ {
		e := event("a", i)
		seq, err := l.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		if seq != uint64(i) {
			t.Fatalf("append %d: seq %d", i, seq)
		}
		ids = append(ids, e.ID)
	}

	// A retried append (same ID) is stored once and answers the first sequence.
	retry := event("a", 3)
	retry.ID = ids[2]
	seq, err := l.Append(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 3 {
		t.Fatalf("retried append: seq %d, want the original 3", seq)
	}
	if last, _ := l.LastSeq(ctx); last != 5 {
		t.Fatalf("last seq %d after a duplicate, want 5", last)
	}

	// Resume from a sequence: events come in order with their sequences set.
	got := collect(t, l, 3, 0)
	if len(got) != 3 || got[0].Seq != 3 || got[2].Seq != 5 || got[0].ID != ids[2] {
		t.Fatalf("read from 3: %+v", got)
	}
	if got := collect(t, l, 2, 3); len(got) != 2 || got[1].Seq != 3 {
		t.Fatalf("read 2..3: %d events", len(got))
	}

	// The log survives a restart of the embedded server.
	l.Close()
	l = openLog(t, dir)
	defer l.Close()
	if got := collect(t, l, 1, 0); len(got) != 5 || got[4].ID != ids[4] {
		t.Fatalf("after restart: %d events", len(got))
	}
	e, err := l.Get(ctx, 2)
	if err != nil || e.ID != ids[1] || e.Seq != 2 {
		t.Fatalf("get 2: %+v %v", e, err)
	}
}

func TestAppendConflict(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, t.TempDir())
	defer l.Close()

	// The first event on a subject expects "nothing yet" (0).
	seq, err := l.AppendIfLast(ctx, event("model", 1), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, event("other", 2)); err != nil {
		t.Fatal(err)
	}
	// Expecting 0 again loses the race.
	_, err = l.AppendIfLast(ctx, event("model", 3), 0)
	if posture.CodeOf(err) != posture.CodeConflict {
		t.Fatalf("want CONFLICT, got %v", err)
	}
	// Other subjects do not count against the expectation.
	last, err := l.LastSubjectSeq(ctx, "model")
	if err != nil || last != seq {
		t.Fatalf("last on model: %d %v", last, err)
	}
	if _, err := l.AppendIfLast(ctx, event("model", 4), last); err != nil {
		t.Fatalf("append with the right expectation: %v", err)
	}
	if n, _ := l.LastSeq(ctx); n != 3 {
		t.Fatalf("last seq %d: the conflicting append must not be stored", n)
	}
}

func TestConsumeFollowsNewEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l := openLog(t, t.TempDir())
	defer l.Close()

	got := make(chan uint64, 100)
	errc := make(chan error, 1)
	go func() {
		errc <- l.Consume(ctx, 1, func(b []posture.Event) error {
			for _, e := range b {
				got <- e.Seq
			}
			return nil
		})
	}()
	for i := 1; i <= 20; i++ {
		if _, err := l.Append(ctx, event("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	for want := uint64(1); want <= 20; want++ {
		select {
		case seq := <-got:
			if seq != want {
				t.Fatalf("got seq %d, want %d", seq, want)
			}
		case <-ctx.Done():
			t.Fatal("timed out waiting for events")
		}
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("consume ended with %v", err)
	}
}

// The envelope encoder writes what json.Marshal would, and refuses what it
// refuses.
func TestEncodeMatchesMarshal(t *testing.T) {
	base := posture.MustEvent(posture.APISessionTouched{ID: "s", IdentityID: "i", At: time.Unix(5, 0).UTC()}, time.Unix(7, 0))
	for name, change := range map[string]func(e *posture.Event){
		"plain":             func(e *posture.Event) { e.Actor, e.RequestID = "me", "req" },
		"no actor, no id":   func(e *posture.Event) {},
		"escapes":           func(e *posture.Event) { e.Actor, e.RequestID = `a"b\c<d>&e`, "tab\tnew\nline\x01" },
		"html":              func(e *posture.Event) { e.Actor, e.RequestID = "<a&b>", "x>y" },
		"unicode":           func(e *posture.Event) { e.Actor, e.RequestID = "é\u2028€", "bad\xffutf8" },
		"nanoseconds":       func(e *posture.Event) { e.At = time.Date(2026, 11, 27, 10, 32, 1, 123456789, time.UTC) },
		"zone":              func(e *posture.Event) { e.At = time.Date(2026, 11, 27, 10, 32, 1, 5, time.FixedZone("x", 3600)) },
		"schema":            func(e *posture.Event) { e.Schema = 12 },
		"year out of range": func(e *posture.Event) { e.At = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
	} {
		e := base
		change(&e)
		got, err := eventlog.EncodeForTest(e)
		want, werr := json.Marshal(e)
		if (err != nil) != (werr != nil) {
			t.Fatalf("%s: encode error %v, json.Marshal's %v", name, err, werr)
		}
		if string(got) != string(want) {
			t.Fatalf("%s: encode:\n%s\nwant\n%s", name, got, want)
		}
	}
}

// A stream full of consumers (readers may create them and not delete
// them) refuses a read with SERVICE_UNAVAILABLE and what to do, not as an
// unexplained error.
func TestConsumerLimitIsExplained(t *testing.T) {
	ctx := t.Context()
	l := openLog(t, t.TempDir())
	defer l.Close()
	if _, err := l.Append(ctx, event("a", 1)); err != nil {
		t.Fatal(err)
	}
	st, err := l.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		_, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: fmt.Sprintf("left-%d", i), AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true})
		if errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
			break
		}
		if err != nil || i > 100_000 {
			t.Fatalf("consumer %d: %v", i, err)
		}
	}
	for name, read := range map[string]func() error{
		"Read": func() error { return l.Read(ctx, 1, 1, func([]posture.Event) error { return nil }) },
		"ReadSubjects": func() error {
			return l.ReadSubjects(ctx, 1, 1, []string{"a"}, func([]posture.Event) error { return nil })
		},
	} {
		err := read()
		if posture.CodeOf(err) != posture.CodeUnavailable || !strings.Contains(err.Error(), "nats consumer ls") {
			t.Errorf("%s on a stream full of consumers: %v", name, err)
		}
	}
}
