package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// BadEventError reports a message of the stream that is not an event: its
// data is not JSON, its envelope lacks an id, a type or a subject, its
// subject is not the one it was published on, its type is unknown, or its
// payload does not decode or is invalid.
//
// Consume stops at such a message (after delivering the events before it)
// unless the log holds an operator's decision to skip it (see Skip).
type BadEventError struct {
	Seq     uint64    // the message's sequence
	Subject string    // the subject it was published on
	Stored  time.Time // when the stream stored it
	Reason  string    // why it is not an event
	Data    []byte    // the message's data as stored
}

func (e *BadEventError) Error() string {
	return fmt.Sprintf("eventlog: message %d on %s is not an event: %s", e.Seq, e.Subject, e.Reason)
}

// DataSHA256 is the hex SHA-256 of the message's data, which a decision to
// skip it names.
func (e *BadEventError) DataSHA256() string { return dataSHA256(e.Data) }

func dataSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// maxReason bounds a BadEventError's reason, which may quote the message
// (an unknown type, say) and ends up in logs and probes.
const maxReason = 300

// decodeStored decodes the message stored at seq on subject, or reports
// why it is not an event (a *BadEventError). A batch (see batch.go) is not
// one event: decodeMessage reads both.
func decodeStored(prefix, subject string, data []byte, seq uint64, stored time.Time) (posture.Event, error) {
	bad := func(reason string) (posture.Event, error) {
		return posture.Event{}, newBadEvent(seq, subject, stored, reason, data)
	}
	if subject == prefix+batchSubject {
		return bad("a batch of events, not one event")
	}
	e, err := decode(data, seq)
	if err != nil {
		return bad("not JSON: " + err.Error())
	}
	if err := e.CheckEnvelope(); err != nil {
		return bad(err.Error())
	}
	if subject != prefix+e.Subject {
		return bad(fmt.Sprintf("the event's subject %q is not the subject it was published on", e.Subject))
	}
	if err := checkPayload(e); err != nil {
		return bad(err.Error())
	}
	return e, nil
}

// decodeMessage decodes the events of the message stored at seq: one, or
// a batch's.
func decodeMessage(prefix, subject string, data []byte, seq uint64, stored time.Time) ([]posture.Event, error) {
	if subject == prefix+batchSubject {
		return decodeBatch(subject, data, seq, stored)
	}
	e, err := decodeStored(prefix, subject, data, seq, stored)
	if err != nil {
		return nil, err
	}
	return []posture.Event{e}, nil
}

// checkPayload reports a payload that does not decode or breaks its rules.
func checkPayload(e posture.Event) error {
	p, err := e.Decode() // decoded by decode: only a failure costs here
	if err != nil {
		return err
	}
	if v, ok := p.(posture.Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("invalid %s payload: %v", e.Type, err)
		}
	}
	return nil
}

func newBadEvent(seq uint64, subject string, stored time.Time, reason string, data []byte) *BadEventError {
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "") + "..."
	}
	return &BadEventError{Seq: seq, Subject: subject, Stored: stored.UTC(), Reason: reason, Data: data}
}

// Message is a message of the stream as it is stored, for an operator to
// inspect.
type Message struct {
	Seq     uint64
	Subject string
	Time    time.Time // when the stream stored it
	Header  map[string][]string
	Data    []byte

	prefix string
}

// Events returns the message's events (one, or a batch's), or a
// *BadEventError saying why it holds none.
func (m Message) Events() ([]posture.Event, error) {
	return decodeMessage(m.prefix, m.Subject, m.Data, m.Seq, m.Time)
}

// errNoMessage is wrapped by Message for a sequence the stream does not
// hold.
var errNoMessage = errors.New("no such message")

// Message reads the message stored at seq as it is. A sequence beyond the
// end of the log, or one whose message was deleted, is a NOT_FOUND error
// that says which.
func (l *Log) Message(ctx context.Context, seq uint64) (Message, error) {
	last, err := l.LastSeq(ctx)
	if err != nil {
		return Message{}, err
	}
	if seq == 0 || seq > last {
		return Message{}, &posture.Error{Code: posture.CodeNotFound,
			Message: fmt.Sprintf("sequence %d is not in the log (its last sequence is %d)", seq, last), Err: errNoMessage}
	}
	var m *jetstream.RawStreamMsg
	err = retry(ctx, func(ctx context.Context) error {
		var err error
		m, err = l.stream.GetMsg(ctx, seq)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return Message{}, &posture.Error{Code: posture.CodeNotFound,
			Message: fmt.Sprintf("the log holds no message at sequence %d (it was deleted)", seq), Err: errNoMessage}
	}
	if err != nil {
		return Message{}, fmt.Errorf("eventlog: read message %d: %w", seq, err)
	}
	return Message{Seq: m.Sequence, Subject: m.Subject, Time: m.Time.UTC(), Header: m.Header, Data: m.Data, prefix: l.prefix}, nil
}

// SkipRequest is an operator's decision to skip the message at Seq.
type SkipRequest struct {
	Seq    uint64
	Reason string
	Actor  string    // who decides (required)
	At     time.Time // when, from the caller's clock
}

// Skip records in the log the decision to pass over the message at
// req.Seq, so that every consumer of the log, on every node and in every
// later replay, skips that message and no other. It refuses a sequence the
// log does not hold, a message that is an event, and a message already
// skipped. It returns the decision as appended, with its sequence.
func (l *Log) Skip(ctx context.Context, req SkipRequest) (posture.Event, error) {
	if strings.TrimSpace(req.Reason) == "" {
		return posture.Event{}, posture.Invalid("reason", "a reason is required", "")
	}
	if req.Actor == "" {
		return posture.Event{}, posture.Invalid("actor", "who decides is required", "")
	}
	m, err := l.Message(ctx, req.Seq)
	if err != nil {
		return posture.Event{}, err
	}
	events, err := m.Events()
	var bad *BadEventError
	if !errors.As(err, &bad) {
		what := "a valid " + events[0].Type + " event"
		if len(events) > 1 {
			what = fmt.Sprintf("a valid batch of %d events", len(events))
		}
		return posture.Event{}, &posture.Error{Code: posture.CodeCouldNotValidate,
			Message: fmt.Sprintf("the message at sequence %d is %s: only a message that is not an event can be skipped", req.Seq, what)}
	}
	prev, err := l.lastOn(ctx, posture.SkipSubject(req.Seq))
	if err != nil {
		return posture.Event{}, err
	}
	if d, ok := l.matchSkip(prev, bad); ok {
		p := skipPayload(d)
		return posture.Event{}, &posture.Error{Code: posture.CodeConflict,
			Message: fmt.Sprintf("the message at sequence %d is already skipped: by %s at %s (sequence %d): %s",
				req.Seq, d.Actor, d.At.Format(time.RFC3339), d.Seq, p.Reason)}
	}
	d, err := posture.NewEvent(posture.EventSkipped{Seq: req.Seq, Reason: req.Reason, Problem: bad.Reason, DataSHA256: bad.DataSHA256()}, req.At)
	if err != nil {
		return posture.Event{}, err
	}
	d.Actor = req.Actor
	// Expecting the subject as it was read: of two operators deciding at
	// once, one is refused.
	d.Seq, err = l.AppendIfLast(ctx, d, prev.seq)
	if err != nil {
		return posture.Event{}, err
	}
	return d, nil
}

// stored is the last message on a subject (seq 0: none).
type stored struct {
	seq uint64
	msg *jetstream.RawStreamMsg
}

func (l *Log) lastOn(ctx context.Context, subject string) (stored, error) {
	var s stored
	err := retry(ctx, func(ctx context.Context) error {
		m, err := l.stream.GetLastMsgForSubject(ctx, l.prefix+subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			s = stored{}
			return nil
		}
		if err != nil {
			return err
		}
		s = stored{seq: m.Sequence, msg: m}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("eventlog: last message on %s: %w", subject, err)
	}
	return s, nil
}

// matchSkip returns the decision in s if it is one about bad: a valid
// event.skipped appended after the message, naming its sequence and its
// data's hash.
func (l *Log) matchSkip(s stored, bad *BadEventError) (posture.Event, bool) {
	if s.msg == nil || s.seq <= bad.Seq {
		return posture.Event{}, false
	}
	d, err := decodeStored(l.prefix, s.msg.Subject, s.msg.Data, s.seq, s.msg.Time)
	if err != nil || d.Type != posture.TypeEventSkipped {
		return posture.Event{}, false
	}
	p := skipPayload(d)
	return d, p.Seq == bad.Seq && p.DataSHA256 == bad.DataSHA256()
}

func skipPayload(d posture.Event) posture.EventSkipped {
	p, _ := d.Decode()
	s, _ := p.(posture.EventSkipped)
	return s
}

// SkipFor returns the decision to skip the bad message, if the log holds
// one.
func (l *Log) SkipFor(ctx context.Context, bad *BadEventError) (posture.Event, bool, error) {
	s, err := l.lastOn(ctx, posture.SkipSubject(bad.Seq))
	if err != nil {
		return posture.Event{}, false, err
	}
	d, ok := l.matchSkip(s, bad)
	return d, ok, nil
}

// skipPoll is how often WaitForSkip looks for a decision.
const skipPoll = time.Second

// WaitForSkip waits until the log holds a decision to skip the bad message
// (looking every second), and returns it; or returns ctx's error.
func (l *Log) WaitForSkip(ctx context.Context, bad *BadEventError) (posture.Event, error) {
	tick := time.NewTicker(skipPoll)
	defer tick.Stop()
	for {
		d, ok, err := l.SkipFor(ctx, bad)
		if ok {
			return d, nil
		}
		if err != nil && ctx.Err() == nil {
			l.log.Warn("eventlog: looking for a decision to skip a message", "seq", bad.Seq, "err", err)
		}
		select {
		case <-ctx.Done():
			return posture.Event{}, ctx.Err()
		case <-tick.C:
		}
	}
}

// passOver is what a consumer delivers in place of the bad message: the
// decision to skip it, with the message's sequence, stored time and
// subject, or the
// *BadEventError itself when the log holds no decision.
func (l *Log) passOver(ctx context.Context, bad *BadEventError) (posture.Event, error) {
	d, ok, err := l.SkipFor(ctx, bad)
	if err != nil {
		return posture.Event{}, fmt.Errorf("eventlog: looking for a decision to skip message %d: %w", bad.Seq, err)
	}
	if !ok {
		return posture.Event{}, bad
	}
	// The stand-in takes the message's place in full: its sequence, the
	// time and the subject it was stored with. So a skipped message on the
	// model subject still counts as the model's last change, which the next
	// change must name (AppendIfLast) to be accepted.
	d.Seq, d.At, d.Subject = bad.Seq, bad.Stored, strings.TrimPrefix(bad.Subject, l.prefix)
	return d, nil
}

// Skips lists the decisions to skip a message the log holds, by skipped
// sequence. Each is returned as appended (Seq is the decision's).
func (l *Log) Skips(ctx context.Context) ([]posture.Event, error) {
	var subjects map[string]uint64
	err := retry(ctx, func(ctx context.Context) error {
		info, err := l.stream.Info(ctx, jetstream.WithSubjectFilter(l.prefix+posture.SubjectSkip+".>"))
		if err != nil {
			return err
		}
		subjects = info.State.Subjects
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: list skip decisions: %w", err)
	}
	var out []posture.Event
	for subject := range subjects {
		s, err := l.lastOn(ctx, strings.TrimPrefix(subject, l.prefix))
		if err != nil {
			return nil, err
		}
		if s.msg == nil {
			continue
		}
		d, err := decodeStored(l.prefix, s.msg.Subject, s.msg.Data, s.seq, s.msg.Time)
		if err != nil || d.Type != posture.TypeEventSkipped {
			continue // not a decision: nothing was skipped for it
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return skipPayload(out[i]).Seq < skipPayload(out[j]).Seq })
	return out, nil
}
