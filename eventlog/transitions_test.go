package eventlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// checkAuditorTransitions proves that the auditor reads the transitions
// stream, keeps a durable consumer of its own on it and acknowledges, and
// cannot publish to it: w is a postured writer.
func checkAuditorTransitions(t *testing.T, w, auditor *eventlog.Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wt, err := w.OpenTransitions(ctx, eventlog.TransitionsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := posture.Transition{ID: posture.NewToken(), Kind: posture.TransitionPolicyFailing, IdentityID: "ident1", At: time.Unix(10, 0).UTC()}
	if err := wt.Publish(ctx, tr, 42); err != nil {
		t.Fatal(err)
	}
	// A copy (another node) is dropped.
	if err := wt.Publish(ctx, tr, 42); err != nil {
		t.Fatal(err)
	}
	if last, err := wt.LastSource(ctx); err != nil || last != 42 {
		t.Fatalf("last source %d %v, want 42", last, err)
	}

	at, err := auditor.OpenTransitions(ctx, eventlog.TransitionsOptions{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []posture.Transition
	if err := at.Read(ctx, 1, func(_ uint64, tr posture.Transition) error {
		got = append(got, tr)
		return nil
	}); err != nil || len(got) != 1 || got[0].ID != tr.ID {
		t.Fatalf("auditor read %+v %v, want the one transition", got, err)
	}
	cons, err := at.Stream().CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Durable: "siem", AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubject: at.Subjects() + "*." + posture.TransitionPolicyFailing})
	if err != nil {
		t.Fatalf("auditor durable consumer: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for m := range batch.Messages() {
		if m.Subject() != "postured-transitions.ident1.policy-failing" {
			t.Errorf("subject %s", m.Subject())
		}
		if err := m.DoubleAck(ctx); err != nil {
			t.Errorf("auditor ack: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("auditor's consumer delivered %d, want 1", n)
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	defer pcancel()
	if err := at.Publish(pctx, posture.Transition{ID: "forged", Kind: "policy-passing", IdentityID: "ident1"}, 43); err == nil {
		t.Fatal("the auditor published a transition")
	}
}
