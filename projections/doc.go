// Package projections keeps the read models of postured in Pebble, derived
// from the event log and nothing else.
//
// One consumer applies events in order. Each Pebble batch holds the state
// changes of one or more events together with the cursor (the sequence of
// the last event applied), so state and cursor always move together: after a
// crash the projection resumes at cursor+1, and an event at or below the
// cursor is a no-op. Batches are not fsynced; the log is the durable copy and
// replays whatever suffix a crash lost. Applying the same events from an
// empty store always gives byte-for-byte the same keys and values, because
// apply reads nothing but the events and the store (never a clock).
//
// WaitFor is the barrier of read-your-writes: a handler that appended event
// seq waits for it, then answers from the store.
//
// Reads see committed state only: the hot-key cache publishes a batch's
// values after its commit, and queries that read several keys read them at
// one cursor (Store.view).
//
// It imports the root package, the evaluator, pebble, Masterminds/semver
// (OS version ranges) and goccy/go-json (encoding/json's output, faster; see
// tx.go) only.
package projections
