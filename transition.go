package posture

import (
	"encoding/json"
	"time"
)

// Transition kinds: what changed in an identity's standing. Each is also
// the last token of the transition's subject in the transitions stream
// (<prefix>.<identityId>.<kind>).
const (
	// TransitionPolicyPassing: a service policy with checks starts passing
	// for an API session.
	TransitionPolicyPassing = "policy-passing"
	// TransitionPolicyFailing: a policy stops passing for an API session;
	// Checks holds its failing checks with actual and expected values.
	TransitionPolicyFailing = "policy-failing"
	// TransitionGraceStarted: a wake or unlock opened the grace window of
	// an MFA check that prompts on it; Until is when it ends.
	TransitionGraceStarted = "grace-started"
	// TransitionGraceEnded: a grace window ended without a new TOTP.
	TransitionGraceEnded = "grace-ended"
	// TransitionMFATimedOut: an MFA check's timeout passed.
	TransitionMFATimedOut = "mfa-timed-out"
	// TransitionEvidenceStale: the evidence a check judges became older
	// than its maxAgeSeconds and the check denies.
	TransitionEvidenceStale = "evidence-stale"
	// TransitionSessionRemoved: a session lost its last passing policy
	// and was removed.
	TransitionSessionRemoved = "session-removed"
	// TransitionWouldDeny: a session was granted only because its failing
	// checks are report-only: enforcement would have denied it. Checks
	// holds the failing checks with actual and expected values.
	TransitionWouldDeny = "report-only-would-deny"
)

// TransitionKinds lists every transition kind.
var TransitionKinds = []string{
	TransitionPolicyPassing, TransitionPolicyFailing, TransitionGraceStarted, TransitionGraceEnded,
	TransitionMFATimedOut, TransitionEvidenceStale, TransitionSessionRemoved, TransitionWouldDeny,
}

// Transition is a change of an identity's standing with its cause. It is
// derived by the projector from the log, deterministically: every node
// derives the same transitions with the same ID from the same event, so
// that the transitions stream keeps one copy of each.
type Transition struct {
	// ID is derived from the cause's event ID, the kind and what changed.
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	IdentityID   string    `json:"identityId"`
	APISessionID string    `json:"apiSessionId,omitempty"`
	At           time.Time `json:"at"` // the cause's event time
	PolicyID     string    `json:"policyId,omitempty"`
	PolicyName   string    `json:"policyName,omitempty"`
	// Checks are the checks concerned: a failing policy's failing checks,
	// the check that timed out, went stale or whose grace started or ended.
	Checks []TransitionCheck `json:"checks,omitempty"`
	// Until is when a grace window ends (grace-started).
	Until       *time.Time `json:"until,omitempty"`
	ServiceID   string     `json:"serviceId,omitempty"`   // session-removed
	ServiceName string     `json:"serviceName,omitempty"` // session-removed
	SessionID   string     `json:"sessionId,omitempty"`   // session-removed
	Reason      string     `json:"reason,omitempty"`
	Cause       Cause      `json:"cause"`
}

// TransitionCheck is a check's verdict in a transition.
type TransitionCheck struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	TypeID        CheckType       `json:"typeId"`
	Pass          bool            `json:"pass"`
	Stale         bool            `json:"stale,omitempty"`
	ActualValue   json.RawMessage `json:"actualValue"`
	ExpectedValue json.RawMessage `json:"expectedValue"`
	Reason        string          `json:"reason,omitempty"`
}

// Cause is the event a transition was derived from.
type Cause struct {
	EventID   string `json:"eventId"`
	EventType string `json:"eventType"`
	Seq       uint64 `json:"seq"`
}

// QueuedTransition is a transition waiting in a projection's outbox, with
// the sequence of its cause in the log.
type QueuedTransition struct {
	Seq        uint64
	N          int // its place among the transitions of that event
	Transition Transition
}

// TransitionID derives a transition's ID from its cause and what it is
// about (API session, policy, check or session ids).
func TransitionID(causeEventID, kind string, about ...string) string {
	return DerivedID(append([]string{"transition", causeEventID, kind}, about...)...)
}
