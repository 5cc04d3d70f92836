package webhooks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// testStream is a transitions-like stream ("t.<identity>.<kind>") on an
// embedded JetStream server.
func testStream(t *testing.T) jetstream.Stream {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"t.i1.a", "t.i1.b", "t.i2.a", "t.i2.b", "t.i3.a", "t.i3.b"} {
		if _, err := js.Publish(t.Context(), subj, []byte(subj)); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// next fetches the consumer's next message and acknowledges it.
func next(t *testing.T, c jetstream.Consumer) string {
	t.Helper()
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := <-batch.Messages()
	if !ok {
		t.Fatalf("no message: %v", batch.Error())
	}
	if err := m.DoubleAck(t.Context()); err != nil {
		t.Fatal(err)
	}
	return m.Subject()
}

// A webhook's consumer is named with the key, not after the webhook's id
// (which the log shows to every reader): a reader of the stream cannot
// find it to take its deliveries. A consumer under the legacy name is
// moved, from the first message it had not acknowledged, and deleted. An
// existing consumer whose filter was changed gets the webhook's kinds back
// and keeps its place.
func TestConsumerNamesAreKeyed(t *testing.T) {
	ctx := context.Background()
	st := testStream(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	h := posture.Webhook{ID: "h1", Name: "siem", Kinds: []string{"a"}, CreatedAt: time.Now().Add(-time.Hour)}

	name := ConsumerName(key, h.ID)
	if !strings.HasPrefix(name, "webhook-") || strings.Contains(name, h.ID) || name == ConsumerName([]byte("another key of thirty-two bytes!"), h.ID) || name == ConsumerName(key, "h2") {
		t.Fatalf("consumer name %q", name)
	}

	// A consumer left by an earlier version, which delivered t.i1.a.
	legacy, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: legacyConsumerName(h.ID), FilterSubject: "t.*.a",
		DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if got := next(t, legacy); got != "t.i1.a" {
		t.Fatalf("legacy consumer's first message %s", got)
	}

	d := New(Options{Stream: st, Subjects: "t.", NameKey: key})
	c, err := d.consumer(ctx, h, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.CachedInfo().Name != name {
		t.Fatalf("consumer %q, want %q", c.CachedInfo().Name, name)
	}
	if _, err := st.Consumer(ctx, legacyConsumerName(h.ID)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the legacy consumer is still there: %v", err)
	}
	if got := next(t, c); got != "t.i2.a" {
		t.Fatalf("after the move the next message is %s, want t.i2.a", got)
	}

	// Someone changes its filter; the dispatcher's next start restores it
	// where the consumer stands.
	cfg := c.CachedInfo().Config
	cfg.FilterSubject = "t.nobody.nothing"
	if _, err := st.UpdateConsumer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if c, err = d.consumer(ctx, h, 0); err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.FilterSubject; got != "t.*.a" {
		t.Fatalf("filter %q after a restart, want t.*.a", got)
	}
	if got := next(t, c); got != "t.i3.a" {
		t.Fatalf("next message %s, want t.i3.a", got)
	}

	// A consumer lost while a node delivered is made again where that node
	// saw it stand, not at the webhook's creation.
	if err := st.DeleteConsumer(ctx, name); err != nil {
		t.Fatal(err)
	}
	if c, err = d.consumer(ctx, h, 5); err != nil {
		t.Fatal(err)
	}
	if got := next(t, c); got != "t.i3.a" {
		t.Fatalf("made again from sequence 5, the next message is %s, want t.i3.a", got)
	}

	// A fresh webhook starts at its creation.
	fresh := posture.Webhook{ID: "h2", CreatedAt: time.Now().Add(-time.Hour)}
	if c, err = d.consumer(ctx, fresh, 0); err != nil {
		t.Fatal(err)
	}
	if got := next(t, c); got != "t.i1.a" {
		t.Fatalf("a new webhook's first message %s, want t.i1.a", got)
	}

	// A webhook created since the dispatcher started had no legacy
	// consumer: one made under its legacy name (by a reader of the log,
	// ahead of the dispatcher) does not move its start.
	planted := posture.Webhook{ID: "h3", CreatedAt: time.Now()}
	plant, err := st.CreateConsumer(ctx, jetstream.ConsumerConfig{Durable: legacyConsumerName(planted.ID),
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: 5, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	next(t, plant) // its acknowledgement floor: 5

	if c, err = d.consumer(ctx, planted, 0); err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.Config.DeliverPolicy != jetstream.DeliverByStartTimePolicy || info.Config.OptStartSeq != 0 {
		t.Fatalf("a planted legacy consumer moved a new webhook's start: %+v", info.Config)
	}
}
