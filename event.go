package posture

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Event is one fact in the log. Events are immutable once appended.
//
// ID is minted at the edge and doubles as the JetStream message id, so a
// retried append is deduplicated by the stream. Seq and Part are set by the
// log when an event is read back and are never part of what is written: Seq
// is the sequence of the message that holds the event, Part its index in
// that message (0 but in a batch of several events, which share their
// message's sequence). Events are ordered by (Seq, Part).
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Schema    int             `json:"schema"`
	Subject   string          `json:"subject"`
	At        time.Time       `json:"at"`
	Actor     string          `json:"actor,omitempty"`
	RequestID string          `json:"requestId,omitempty"`
	Data      json.RawMessage `json:"data"`
	Seq       uint64          `json:"-"`
	Part      int             `json:"-"`

	payload Payload // set by DecodedWith
}

// Payload is the typed body of an event. Each payload type names its event
// type (a past-tense fact such as "posture.recorded") and the log subject it
// is appended to.
type Payload interface {
	EventType() string
	Subject() string
}

// Log subjects. Management changes share one subject so that optimistic
// concurrency on it orders every change of the model (uniqueness of names
// holds across nodes); high-rate facts are spread per identity.
const (
	SubjectModel = "model"
	SubjectNode  = "node"
)

// SubjectFor returns the subject of a per-identity stream of facts, such as
// "posture.<identityId>".
func SubjectFor(prefix, identityID string) string { return prefix + "." + identityID }

// NewEvent wraps a payload in an envelope with a fresh ID. The time comes from
// the caller's clock: events never read the wall clock themselves.
func NewEvent(p Payload, at time.Time) (Event, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s: %w", p.EventType(), err)
	}
	return Event{
		ID:      NewToken(),
		Type:    p.EventType(),
		Schema:  1,
		Subject: p.Subject(),
		At:      at.UTC(),
		Data:    data,
	}, nil
}

// MustEvent is NewEvent for payloads that cannot fail to encode (every
// registered payload is plain data).
func MustEvent(p Payload, at time.Time) Event {
	e, err := NewEvent(p, at)
	if err != nil {
		panic(err)
	}
	return e
}

// Decode returns the typed payload of the event. An unknown type or a body
// that does not decode is an error: consumers stop rather than skip a fact.
func (e Event) Decode() (Payload, error) {
	if e.payload != nil {
		return e.payload, nil
	}
	return e.decode(json.Unmarshal)
}

// DecodedWith returns the event with its payload decoded by unmarshal (a
// faster decoder of the same JSON than encoding/json), so that Decode costs
// nothing afterwards: a reader decodes on its own goroutine what its
// consumer then applies. An event that does not decode is returned as it
// is, and Decode reports why.
func (e Event) DecodedWith(unmarshal func(data []byte, v any) error) Event {
	if p, err := e.decode(unmarshal); err == nil {
		e.payload = p
	}
	return e
}

func (e Event) decode(unmarshal func(data []byte, v any) error) (Payload, error) {
	t, ok := registry[e.Type]
	if !ok {
		return nil, fmt.Errorf("event %d (%s): unknown event type %q", e.Seq, e.ID, e.Type)
	}
	p := reflect.New(t)
	if err := unmarshal(e.Data, p.Interface()); err != nil {
		return nil, fmt.Errorf("event %d (%s): decode %s: %w", e.Seq, e.ID, e.Type, err)
	}
	return p.Elem().Interface().(Payload), nil
}

// Validator is implemented by payloads with rules beyond their JSON shape.
// The log checks them when it reads an event back: a message whose payload
// breaks them is not an event, as one whose body is not JSON.
type Validator interface {
	Validate() error
}

// CheckEnvelope reports an event without the envelope fields every event
// has: an ID, a Type, a Subject and a time.
func (e Event) CheckEnvelope() error {
	var missing []string
	for _, f := range []struct{ name, v string }{{"id", e.ID}, {"type", e.Type}, {"subject", e.Subject}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if e.At.IsZero() {
		missing = append(missing, "at")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the envelope has no %s", strings.Join(missing, ", "))
	}
	return nil
}

var registry = map[string]reflect.Type{}

// register records a payload type. Each event type is registered once, at
// init, from the table in events.go.
func register(payloads ...Payload) {
	for _, p := range payloads {
		typ := p.EventType()
		if _, dup := registry[typ]; dup {
			panic("posture: event type registered twice: " + typ)
		}
		registry[typ] = reflect.TypeOf(p)
	}
}

// EventTypes lists every registered event type, sorted.
func EventTypes() []string {
	out := make([]string, 0, len(registry))
	for t := range registry {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// EndOf is t, read from s, as the end of a range ("at", "until"): a time
// stands for the whole of its last written digit, so 10:32:00Z includes the
// events of 10:32:00.5, and 10:32:00.464Z (a time as the API shows it, in
// milliseconds) those of 10:32:00.464381. The fraction may follow a comma,
// as RFC 3339's parsers take it. The API, the console and the command line
// read moments the same way.
func EndOf(s string, t time.Time) time.Time {
	digits := 0
	if i := strings.IndexAny(s, ".,"); i >= 0 {
		for _, c := range s[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			digits++
		}
	}
	if digits >= 9 {
		return t
	}
	unit := time.Second
	for range digits {
		unit /= 10
	}
	return t.Add(unit - time.Nanosecond)
}
