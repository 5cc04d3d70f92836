package eventlog

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/seed-0809debe/posture"
)

// Group commit. While one publish of a lane (see lane) waits for its
// acknowledgement, the appends that come in meanwhile queue; the next
// publish carries them all, in one message of the stream on the batch
// subject. A message of the log is therefore either one event, on the
// event's own subject, or a batch: a JSON array of events as a single
// message would hold them, several of them, in the order they were queued. Each event of a batch
// has the message's sequence (Seq) and its index in it (Part). A message is
// applied whole or not at all, so the sequences of the stream stay the
// positions of the log (cursors, snapshots, checkpoints, WaitFor) and a
// batch's acknowledgement acknowledges every event in it.
//
// Only the facts no write conditions on are batched (batchable): they are
// on per-identity subjects no AppendIfLast names and their ids are fresh,
// so they need neither their subject's last sequence nor their own message
// id for deduplication. A batch's message id is derived from its first
// event's, so that a retried publish is deduplicated as a single event's
// is.

// batchSubject is the subject of a batch, after the stream's prefix. No
// event's subject is it.
const batchSubject = "batch"

// batchable are the types of the events group commit may batch.
var batchable = map[string]bool{
	posture.TypePostureRecorded:   true,
	posture.TypeSessionCreated:    true,
	posture.TypeSessionDenied:     true,
	posture.TypeAPISessionTouched: true,
}

// lane is the group commit that appends events of type typ. Session
// decisions have a lane of their own, beside that of posture responses and
// activity: a request for a session is published at once, or after the
// publish in flight of other decisions, rather than after the posture
// batch being published (under load, one nearly always is) and then with
// the next. It is still stored after a batch published before it. No order
// between the lanes matters: their events are on per-identity subjects no
// write conditions on, concurrent requests have no order of their own, and
// a session is created only if its grant holds when the projection applies
// the decision, in whatever order the log has.
func (l *Log) lane(typ string) *committer {
	if typ == posture.TypeSessionCreated || typ == posture.TypeSessionDenied {
		return l.sessions
	}
	return l.group
}

// Bounds of a batch: at most maxBatchEvents events, and at most
// maxBatchBytes of JSON (or the server's or the stream's largest message,
// if smaller) unless it is one event (which fits alone, fits having
// checked it).
const (
	maxBatchEvents = 256
	maxBatchBytes  = 256 << 10
)

// committer is a lane of a log's group commit: at most one publish in
// flight, the appends that arrive meanwhile queued for the next.
type committer struct {
	l     *Log
	limit int64 // the most bytes of a batch (see maxBatchBytes)
	// beforePublish, when set (tests), runs before each publish.
	beforePublish func()
	mu            sync.Mutex
	busy          bool       // a publish is in flight
	queue         []*pending // appends waiting for the next publish
}

// pending is an append waiting in a committer.
type pending struct {
	e        posture.Event
	body     []byte
	deadline time.Time     // maxAppendWait after it came: it fails then
	wake     chan struct{} // closed once: with the result, or to lead
	lead     []*pending    // set before wake: this append publishes these
	seq      uint64
	err      error
}

// append queues e (encoded as body) and returns its sequence once a publish
// carrying it was acknowledged. The append that finds no publish in flight
// publishes at once, alone; one that finds one waits, and the first of
// those waiting publishes them together once it ends. Leading is handed on
// rather than kept, so that no request waits for others' publishes. An
// append fails after maxAppendWait, queued or publishing, and leaves the
// queue when ctx ends before a publish took it.
func (c *committer) append(ctx context.Context, e posture.Event, body []byte) (uint64, error) {
	p := &pending{e: e, body: body, deadline: time.Now().Add(maxAppendWait), wake: make(chan struct{})}
	c.mu.Lock()
	if c.busy {
		c.queue = append(c.queue, p)
		c.mu.Unlock()
		select {
		case <-p.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if i := slices.Index(c.queue, p); i >= 0 {
				c.queue = slices.Delete(c.queue, i, i+1)
				c.mu.Unlock()
				return 0, fmt.Errorf("eventlog: append %s: %w", e.Type, ctx.Err())
			}
			c.mu.Unlock()
			<-p.wake // taken: its publish is under way, and bounded
		}
		if p.lead == nil {
			return p.seq, p.err
		}
	} else {
		c.busy = true
		c.mu.Unlock()
		p.lead = []*pending{p}
	}
	c.commit(p.lead)
	return p.seq, p.err
}

// commit publishes batch (whose first append is the caller's), hands the
// lead to the first of the appends queued meanwhile, and wakes the others
// of batch with their results.
func (c *committer) commit(batch []*pending) {
	seq, err := c.publish(batch)
	for _, p := range batch {
		p.seq, p.err = seq, err
	}
	c.mu.Lock()
	next := c.take(time.Now())
	if len(next) == 0 {
		c.busy = false
	}
	c.mu.Unlock()
	if len(next) > 0 {
		next[0].lead = next
		close(next[0].wake)
	}
	for _, p := range batch[1:] {
		close(p.wake)
	}
}

// take removes the next batch from the queue, failing the appends that
// waited past their deadline. Locked.
func (c *committer) take(now time.Time) []*pending {
	live := c.queue[:0]
	for _, p := range c.queue {
		if now.After(p.deadline) {
			p.err = fmt.Errorf("eventlog: append %s: %w (waited %s for the log)", p.e.Type, context.DeadlineExceeded, maxAppendWait)
			close(p.wake)
			continue
		}
		live = append(live, p)
	}
	clear(c.queue[len(live):])
	c.queue = live
	n, size := 0, 1 // the brackets, and a comma between events
	for n < len(c.queue) && n < maxBatchEvents {
		size += len(c.queue[n].body) + 1
		if n > 0 && int64(size) > c.limit {
			break
		}
		n++
	}
	next := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	return next
}

// publish writes batch: one event as a message of its own, several as a
// batch.
func (c *committer) publish(batch []*pending) (uint64, error) {
	if c.beforePublish != nil {
		c.beforePublish()
	}
	first := batch[0]
	// Not a request's ctx: the publish is the batch's. The oldest append
	// of the batch comes first: its deadline bounds the others'.
	ctx, cancel := context.WithDeadline(context.Background(), first.deadline)
	defer cancel()
	if len(batch) == 1 {
		return c.l.publish(ctx, &nats.Msg{Subject: c.l.prefix + first.e.Subject, Data: first.body}, first.e.ID, first.e)
	}
	size := 1
	for _, p := range batch {
		size += len(p.body) + 1
	}
	data := make([]byte, 0, size)
	data = append(data, '[')
	for i, p := range batch {
		if i > 0 {
			data = append(data, ',')
		}
		data = append(data, p.body...)
	}
	data = append(data, ']')
	seq, err := c.l.publish(ctx, &nats.Msg{Subject: c.l.prefix + batchSubject, Data: data}, first.e.ID+".batch", first.e)
	if err != nil {
		return 0, fmt.Errorf("%w (a batch of %d events)", err, len(batch))
	}
	return seq, nil
}

// decodeBatch reads the events of a batch stored at seq. Anything but an
// array of at least two valid events of batchable types is not a batch:
// a *BadEventError, as for any message that is not an event.
func decodeBatch(subject string, data []byte, seq uint64, stored time.Time) ([]posture.Event, error) {
	bad := func(reason string) ([]posture.Event, error) {
		return nil, newBadEvent(seq, subject, stored.UTC(), reason, data)
	}
	var raw []json.RawMessage
	if err := unmarshal(data, &raw); err != nil {
		return bad("a batch that is not a JSON array: " + err.Error())
	}
	if len(raw) < 2 {
		return bad(fmt.Sprintf("a batch holds at least 2 events, this one %d", len(raw)))
	}
	events := make([]posture.Event, len(raw))
	for i, r := range raw {
		if len(bytes.TrimSpace(r)) == 0 || r[0] != '{' {
			return bad(fmt.Sprintf("event %d of the batch is not a JSON object", i))
		}
		e, err := decode(r, seq)
		if err != nil {
			return bad(fmt.Sprintf("event %d of the batch: %v", i, err))
		}
		if err := e.CheckEnvelope(); err != nil {
			return bad(fmt.Sprintf("event %d of the batch: %v", i, err))
		}
		if !batchable[e.Type] {
			return bad(fmt.Sprintf("event %d of the batch is of type %s, which is never batched", i, e.Type))
		}
		if err := checkPayload(e); err != nil {
			return bad(fmt.Sprintf("event %d of the batch: %v", i, err))
		}
		e.Part = i
		events[i] = e
	}
	return events, nil
}

// newCommitter is the group commit of l, whose stream is open.
func newCommitter(l *Log) *committer {
	limit := min(maxBatchBytes, l.nc.MaxPayload()-headerRoom)
	if info := l.stream.CachedInfo(); info != nil && info.Config.MaxMsgSize > 0 {
		limit = min(limit, int64(info.Config.MaxMsgSize)-headerRoom)
	}
	return &committer{l: l, limit: limit}
}
