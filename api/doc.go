// Package api holds what the client and management APIs share: the response
// envelope, the one error handler and the HTTP status of each error code,
// API-session authentication, paging and filters, rate limits, metrics, the
// write path (append, wait for the projection, answer; Writer.Change for
// optimistic concurrency) and password hashing.
//
// It imports the root package, api/filter, echo, the Prometheus client,
// golang.org/x/crypto/argon2 and golang.org/x/time/rate. It declares the small
// interfaces it needs (Log, Barrier, Sessions) and cmd passes in the real
// implementations; it reaches neither NATS nor Pebble (arch_test.go).
package api
