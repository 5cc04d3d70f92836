// Package eventlog is postured's source of truth: an append-only log of
// posture.Event kept in a NATS JetStream stream.
//
// The log runs on an embedded nats-server (file storage in the data
// directory, in-process connection, no TCP port) unless URLs name an external
// server or cluster. Appends are synchronous: Append returns once the stream
// has acknowledged the event, with the event's sequence. The event ID is the
// JetStream message id, so a retried append of the same event is stored once.
// Consumers read in sequence order from any sequence. A message that is not
// an event stops them (a *BadEventError) until an operator's decision to
// skip it is in the log (Skip); then they get the decision in its place.
//
// Connections are authenticated (ClientAuth: a credentials file, a user and
// password, or an nkey seed; TLS with a CA and a client certificate). The
// embedded server opens a port only with Options.Listen, and then requires
// TLS and one of the nkey users it generates (LoadOrCreateCredentials), with
// the permissions of their role (Permissions): postured appends and
// consumes, auditor reads and follows. Its own log goes to slog.
//
// The log's history is verifiable: a Checkpointer appends signed
// checkpoints that hash the stored messages in order, chained to each
// other, and Verify recomputes them from the stream and names the first
// sequence that was deleted, altered or inserted (see checkpoint.go).
//
// It imports nats.go and nats-server and the root package only.
package eventlog
