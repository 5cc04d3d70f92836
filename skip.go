package posture

import (
	"errors"
	"strconv"
)

// TypeEventSkipped is the event type of an operator's decision to skip a
// message of the log that is not an event.
const TypeEventSkipped = "event.skipped"

// SkipSubject is the log subject of the decision about the message at seq,
// "skip.<seq>": a consumer stopped at seq looks the decision up directly
// (the last message on the subject), and a second decision about the same
// sequence is refused (it is appended expecting the subject to be empty).
func SkipSubject(seq uint64) string { return SubjectFor(SubjectSkip, strconv.FormatUint(seq, 10)) }

// SubjectSkip is the prefix of the subjects of skip decisions.
const SubjectSkip = "skip"

func init() { register(EventSkipped{}) }

// EventSkipped records that the message at Seq, which does not decode, has
// an unknown type or an invalid payload, is not part of the model: every
// consumer of the log (every node, every later replay) passes over it. The
// event's Actor says who decided and Reason why.
//
// A consumer sees the decision twice: in place of the skipped message (with
// the event's Seq, At and Subject set to the skipped message's sequence,
// stored time and subject), and where it was appended. Projections apply
// neither: a skip changes no state (but a skipped message on the model
// subject is still the model's last change).
type EventSkipped struct {
	// Seq is the sequence of the skipped message. The decision comes after
	// it in the log.
	Seq uint64 `json:"seq"`
	// Reason is the operator's explanation.
	Reason string `json:"reason"`
	// Problem is why the message is not an event, as the log reported it
	// when the decision was taken.
	Problem string `json:"problem,omitempty"`
	// DataSHA256 is the hex SHA-256 of the skipped message's data: the
	// decision is about those bytes, and about no other message a rewrite
	// of the stream might put at Seq.
	DataSHA256 string `json:"dataSha256"`
}

func (EventSkipped) EventType() string { return TypeEventSkipped }
func (p EventSkipped) Subject() string { return SkipSubject(p.Seq) }

// Validate reports a decision that names no sequence or gives no reason.
func (p EventSkipped) Validate() error {
	switch {
	case p.Seq == 0:
		return errors.New("seq is required")
	case p.Reason == "":
		return errors.New("reason is required")
	case len(p.DataSHA256) != 64:
		return errors.New("dataSha256 must be a hex SHA-256")
	}
	return nil
}
