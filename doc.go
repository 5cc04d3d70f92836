// Package posture is the shared vocabulary of postured: the event envelope and
// its typed payloads, the entity records that the projections keep, and the
// error codes that the APIs answer with.
//
// It imports the standard library and github.com/google/uuid (ids) only, and
// nothing of HTTP: the API maps its error codes to statuses. arch_test.go
// holds this list as an allow-list. Every other package speaks in these
// types; none of them is allowed to define a second name for the same thing.
package posture
