package posture

import "time"

// FleetCount is how many identities pass, fail or are stale (failing only
// for stale evidence) on a policy (Kind "p") or a check (Kind "c"), and how
// many fail it only for report-only checks (ReportOnlyFailing: a check that
// fails while it only reports; a policy that passes only because its
// failing checks report). An identity's standing is the best over its API
// sessions.
type FleetCount struct {
	Kind              string `json:"-"`
	ID                string `json:"-"`
	Pass              int64  `json:"pass"`
	Fail              int64  `json:"fail"`
	Stale             int64  `json:"stale"`
	ReportOnlyFailing int64  `json:"reportOnlyFailing"`
}

// TimedIdentity is an identity (and API session) with an instant: the end
// of a grace window, a known deadline, the time of its oldest evidence.
type TimedIdentity struct {
	IdentityID   string
	APISessionID string
	At           time.Time
}

// ServiceAccess is a service and a session type (Dial or Bind).
type ServiceAccess struct {
	ServiceID string `json:"serviceId"`
	Type      string `json:"type"`
}

// CheckImpact is one identity that fails a report-only check: since when,
// and what it would lose when the check enforces if nothing changes.
type CheckImpact struct {
	IdentityID string
	Since      time.Time
	// Loses are the services (and types) no policy would grant it any more.
	Loses []ServiceAccess
	// SessionsRemoved counts its sessions that would be removed.
	SessionsRemoved int
}
