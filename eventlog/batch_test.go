package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// recorded is a batchable event: identity's n-th posture response.
func recorded(identity string, n int) posture.Event {
	return posture.MustEvent(posture.PostureRecorded{IdentityID: identity, APISessionID: "as-" + identity,
		Responses: []posture.PostureResponse{{ID: "os", TypeID: "OS", Type: "Windows", Version: fmt.Sprintf("10.0.%d", n)}}},
		time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC))
}

// Concurrent appends with group commit share messages: every event is
// read back once, at the sequence its append returned, in the order of
// its message's parts; the identity's filtered read finds its own events
// inside batches; conditional appends and other types stay alone.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: t.TempDir(), GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	const writers, each = 32, 20
	type appended struct {
		id  string
		seq uint64
	}
	results := make(chan appended, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for n := range each {
				e := recorded(fmt.Sprintf("id%02d", w), n)
				seq, err := l.Append(ctx, e)
				if err != nil {
					t.Error(err)
					return
				}
				results <- appended{e.ID, seq}
			}
		})
	}
	wg.Wait()
	close(results)
	want := map[string]uint64{}
	for r := range results {
		want[r.id] = r.seq
	}
	last, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last >= writers*each {
		t.Fatalf("%d appends took %d messages: nothing was batched", writers*each, last)
	}

	got, err := readAll(t, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*each {
		t.Fatalf("read %d events, want %d", len(got), writers*each)
	}
	perIdentity := map[string]int{}
	batches := 0
	for i, e := range got {
		if seq, ok := want[e.ID]; !ok || seq != e.Seq {
			t.Fatalf("event %s read at %d, its append returned %d (found %v)", e.ID, e.Seq, seq, ok)
		}
		delete(want, e.ID)
		if i > 0 {
			prev := got[i-1]
			sameMessage := e.Seq == prev.Seq
			if sameMessage && e.Part != prev.Part+1 || !sameMessage && (e.Seq < prev.Seq || e.Part != 0) {
				t.Fatalf("event %d.%d follows %d.%d", e.Seq, e.Part, prev.Seq, prev.Part)
			}
			if sameMessage && e.Part == 1 {
				batches++
			}
		}
		// Each writer's events are in its order: it waited for each.
		p, err := e.Decode()
		if err != nil {
			t.Fatal(err)
		}
		r := p.(posture.PostureRecorded)
		if v := fmt.Sprintf("10.0.%d", perIdentity[r.IdentityID]); r.Responses[0].Version != v {
			t.Fatalf("%s's events out of order: %s, want %s", r.IdentityID, r.Responses[0].Version, v)
		}
		perIdentity[r.IdentityID]++
	}
	if batches == 0 {
		t.Fatal("no message holds several events")
	}

	// A batch as an operator sees it.
	var batchSeq uint64
	for i := 1; i < len(got); i++ {
		if got[i].Part == 1 {
			batchSeq = got[i].Seq
			break
		}
	}
	m, err := l.Message(ctx, batchSeq)
	if err != nil {
		t.Fatal(err)
	}
	events, err := m.Events()
	if err != nil || len(events) < 2 || m.Subject != "postured.batch" {
		t.Fatalf("message %d: %s, %d events, %v", batchSeq, m.Subject, len(events), err)
	}
	if _, err := l.Get(ctx, batchSeq); err == nil || !strings.Contains(err.Error(), "a batch of") {
		t.Fatalf("get of a batch: %v", err)
	}

	// A filtered read delivers the subject's own messages and every
	// batch whole: each of id07's events once, in order, with the events
	// that share their messages.
	var mine []posture.Event
	if err := l.ReadSubjects(ctx, 1, 0, []string{"posture.id07"}, func(b []posture.Event) error {
		mine = append(mine, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	own := 0
	for i, e := range mine {
		if i > 0 && (e.Seq < mine[i-1].Seq || e.Seq == mine[i-1].Seq && e.Part != mine[i-1].Part+1) {
			t.Fatalf("filtered read: %d.%d after %d.%d", e.Seq, e.Part, mine[i-1].Seq, mine[i-1].Part)
		}
		if e.Subject == "posture.id07" {
			own++
		} else if e.Part == 0 && (i+1 == len(mine) || mine[i+1].Seq != e.Seq) {
			t.Fatalf("filtered read delivered %s alone at %d", e.Subject, e.Seq)
		}
	}
	if own != each {
		t.Fatalf("filtered read found %d of id07's events, want %d", own, each)
	}

	// Read up to a batch's sequence delivers all its events, none after.
	var upTo []posture.Event
	if err := l.Read(ctx, 1, batchSeq, func(b []posture.Event) error {
		upTo = append(upTo, b...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := len(upTo); upTo[n-1].Seq != batchSeq || upTo[n-1].Part != len(events)-1 {
		t.Fatalf("read to %d ended at %d.%d", batchSeq, upTo[n-1].Seq, upTo[n-1].Part)
	}

	// Other types and conditional appends keep a message each.
	model := posture.MustEvent(posture.ConfigChanged{}, time.Now())
	seq, err := l.AppendIfLast(ctx, model, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := l.Message(ctx, seq); err != nil || m.Subject != "postured.model" {
		t.Fatalf("conditional append: %s, %v", m.Subject, err)
	}
}

// rawBatch is a batch's data as group commit writes it.
func rawBatch(events ...posture.Event) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf(`{"id":%q,"type":%q,"schema":1,"subject":%q,"at":"2026-01-01T00:00:00Z","data":%s}`, e.ID, e.Type, e.Subject, e.Data))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// heldGroupCommit opens a log with group commit whose posture lane's
// publishes wait for a value on release (closed: none waits).
func heldGroupCommit(t *testing.T) (*eventlog.Log, chan struct{}) {
	l, err := eventlog.Open(context.Background(), eventlog.Options{Dir: t.TempDir(), GroupCommit: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	release := make(chan struct{})
	eventlog.HoldGroupPublishes(l, release)
	return l, release
}

// An append queued behind a publish in flight leaves the queue when its
// request ends, and is not written; the others queued with it are, in one
// message.
func TestGroupCommitQueuedAppendLeaves(t *testing.T) {
	ctx := context.Background()
	l, release := heldGroupCommit(t)

	first := make(chan error, 1)
	go func() { _, err := l.Append(ctx, recorded("a", 0)); first <- err }()
	// Wait until the first append holds the publish: the next ones queue.
	for l.QueuedForTest() != 0 || !l.PublishingForTest() {
		time.Sleep(time.Millisecond)
	}
	short, cancel := context.WithCancel(ctx)
	gone := recorded("b", 0)
	left := make(chan error, 1)
	go func() { _, err := l.Append(short, gone); left <- err }()
	stay := make(chan uint64, 2)
	for _, id := range []string{"c", "d"} {
		go func() {
			seq, err := l.Append(ctx, recorded(id, 0))
			if err != nil {
				t.Error(err)
			}
			stay <- seq
		}()
	}
	for l.QueuedForTest() != 3 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("the append whose request ended: %v, want canceled", err)
	}
	if n := l.QueuedForTest(); n != 2 {
		t.Fatalf("%d queued after one left, want 2", n)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if a, b := <-stay, <-stay; a != b || a != 2 {
		t.Fatalf("the two queued appends at %d and %d, want both in message 2", a, b)
	}
	got, err := readAll(t, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d events written, want 3", len(got))
	}
	for _, e := range got {
		if e.ID == gone.ID {
			t.Fatal("the append that left was written")
		}
	}
}

// A session decision is published in a lane of its own: it does not wait
// behind a batch of posture responses being published, and is read back
// with the others.
func TestGroupCommitSessionLane(t *testing.T) {
	ctx := context.Background()
	l, release := heldGroupCommit(t)

	held := make(chan uint64, 1)
	go func() {
		seq, err := l.Append(ctx, recorded("a", 0))
		if err != nil {
			t.Error(err)
		}
		held <- seq
	}()
	for !l.PublishingForTest() {
		time.Sleep(time.Millisecond)
	}
	decision := posture.MustEvent(posture.SessionCreated{Session: posture.Session{ID: "s1", IdentityID: "a", APISessionID: "as-a",
		ServiceID: "svc", Type: "Dial", CreatedAt: time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)}, Policies: []string{"p"}},
		time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	seq, err := l.Append(short, decision)
	if err != nil {
		t.Fatalf("the decision waited behind the posture batch's publish: %v", err)
	}
	close(release)
	if after := <-held; after <= seq {
		t.Fatalf("the held posture response at %d, the decision at %d: want the decision first", after, seq)
	}
	got, err := readAll(t, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != decision.ID {
		t.Fatalf("read back %v: want 2 events, the decision (%s) first", got, decision.ID)
	}
}
