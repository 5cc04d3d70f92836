// Package eventlog is postured's source of truth: an append-only log of
// posture.Event kept in a NATS JetStream stream.
//
// The log runs on an embedded nats-server (file storage in the data
// directory, in-process connection, no TCP port) unless URLs name an external
// server or cluster. Appends are synchronous: Append returns once the stream
// has acknowledged the event, with the event's sequence. The event ID is the
// JetStream message id, so a retried append of the same event is stored once.
// Consumers read in sequence order from any sequence.
//
// The log's history is verifiable: a Checkpointer appends signed
// checkpoints that hash the stored messages in order, chained to each
// other, and Verify recomputes them from the stream and names the first
// sequence that was deleted, altered or inserted (see checkpoint.go).
//
// It imports nats.go and nats-server and the root package only.
package eventlog
