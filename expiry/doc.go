// Package expiry runs the loops that turn the passing of time into facts in
// the event log: a posture verdict's deadline reached and a report-only
// check's enforceAt reached (Deadlines), and an API session idle past its
// timeout (Idle). Every node may run them: each
// event's ID is derived from what it records, so the stream keeps one copy
// when several nodes notice the same moment.
//
// Time, tickers included, comes from one injected clockwork.Clock: tests
// move a fake clock and call Tick, so that a deadline is tested to the
// millisecond without waiting for it.
//
// It imports the root package and clockwork only.
package expiry
