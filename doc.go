// Package posture is the shared vocabulary of postured: the event envelope and
// its typed payloads, the entity records that the projections keep, and the
// error codes that the APIs answer with.
//
// It imports the standard library only. Every other package speaks in these
// types; none of them is allowed to define a second name for the same thing.
package posture
