package posture

import "time"

// FleetCount is how many identities pass, fail or are stale (failing only
// for stale evidence) on a policy (Kind "p") or a check (Kind "c"). An
// identity's standing is the best over its API sessions.
type FleetCount struct {
	Kind  string `json:"-"`
	ID    string `json:"-"`
	Pass  int64  `json:"pass"`
	Fail  int64  `json:"fail"`
	Stale int64  `json:"stale"`
}

// TimedIdentity is an identity (and API session) with an instant: the end
// of a grace window, a known deadline, the time of its oldest evidence.
type TimedIdentity struct {
	IdentityID   string
	APISessionID string
	At           time.Time
}
