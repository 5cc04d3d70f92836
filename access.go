package posture

import (
	"encoding/json"
	"time"
)

// Grant is a service an identity may reach and the policies that grant it.
type Grant struct {
	ServiceID string
	Policies  []string // sorted
}

// CheckResult is one posture check evaluated for an API session.
type CheckResult struct {
	Check            Check
	Pass             bool
	Actual           json.RawMessage
	Expected         json.RawMessage
	Criteria         json.RawMessage
	Semantic         string
	ValidUntil       time.Time // zero: no deadline
	Timeout          int64     // MFA: timeoutSeconds or -1; others -1
	TimeoutRemaining int64     // MFA: seconds left, -1 for none
	Stale            bool      // the evidence is older than the check's maxAgeSeconds
	StaleAfter       time.Time // with maxAgeSeconds: the last instant the evidence is fresh (zero: none)
	ReportOnly       bool      // the check only reports at the evaluated time: a failure does not deny
}

// PolicyResult is a service policy evaluated for an API session: passing
// when every enforced check passes (a policy without checks always passes);
// Strict when every check passes, report-only ones included.
type PolicyResult struct {
	PolicyID   string
	PolicyName string
	Type       string
	Passing    bool
	Strict     bool
	Checks     []CheckResult
}

// FailedServiceRequest is a session request refused for posture, as admins
// read it.
type FailedServiceRequest struct {
	APISessionID   string          `json:"apiSessionId"`
	ServiceID      string          `json:"serviceId"`
	ServiceName    string          `json:"serviceName"`
	SessionType    string          `json:"sessionType"`
	When           time.Time       `json:"when"`
	PolicyFailures []PolicyFailure `json:"policyFailures"`
}

// MaxFailedRequests is how many failed service requests are kept per
// identity (the seed's 50; the oldest is dropped).
const MaxFailedRequests = 50

// FleetFailedRequest is a failed service request and the identity it was
// refused to: an entry of the fleet-wide index of recent failures.
type FleetFailedRequest struct {
	IdentityID string `json:"identityId"`
	FailedServiceRequest
}

// MaxFleetFailedRequests is how many failed service requests the fleet-wide
// index keeps, the newest across all identities (the oldest is dropped).
const MaxFleetFailedRequests = 500

// HistoryEntry is one line of an identity's audit timeline: a posture fact,
// an access change or a session decision, with the event that caused it.
type HistoryEntry struct {
	Seq          uint64          `json:"seq"`
	Part         int             `json:"part,omitempty"` // the event's index in a batch of the log's
	At           time.Time       `json:"at"`
	Kind         string          `json:"kind"`
	Event        string          `json:"event"`
	APISessionID string          `json:"apiSessionId,omitempty"`
	Summary      string          `json:"summary"`
	Detail       json.RawMessage `json:"detail,omitempty"`
}

// History kinds.
const (
	HistoryPosture    = "posture"
	HistoryEndpoint   = "endpoint"
	HistoryMFA        = "mfa"
	HistoryDeadline   = "deadline"
	HistoryAccess     = "access"
	HistorySession    = "session"
	HistoryAPISession = "api-session"
	HistoryModel      = "model"
	HistoryWouldDeny  = "would-deny"
	// HistoryCredential: a change of the identity's credentials (an
	// authenticator created, changed or deleted, MFA enrolled, verified,
	// its recovery codes replaced or removed), naming who made it.
	HistoryCredential = "credential"
)

// Explanation is an access decision as it stood at a moment: for each API
// session of the identity, each granting policy with each check's actual
// and expected values and deadlines, and the history entries that explain
// the outcome.
type Explanation struct {
	IdentityID  string               `json:"identityId"`
	ServiceID   string               `json:"serviceId"`
	ServiceName string               `json:"serviceName"`
	Type        string               `json:"type"`
	At          time.Time            `json:"at"`
	Decision    string               `json:"decision"` // granted, denied, no-permission, no-api-session
	APISessions []SessionExplanation `json:"apiSessions"`
	// Warning, when set, says why the answer may be wrong or incomplete:
	// messages are missing from the log it was rebuilt from, or the
	// identity's history was read back only so far.
	Warning string `json:"warning,omitempty"`
}

// Decisions of an Explanation.
const (
	DecisionGranted      = "granted"
	DecisionDenied       = "denied"
	DecisionNoPermission = "no-permission"
	DecisionNoAPISession = "no-api-session"
)

// SessionExplanation is the decision for one API session.
type SessionExplanation struct {
	APISessionID string              `json:"apiSessionId"`
	Granted      bool                `json:"granted"`
	Policies     []PolicyExplanation `json:"policies"`
	// LastChange is the history entry that last changed a granting
	// policy's outcome before the moment (nil if none did).
	LastChange *HistoryEntry `json:"lastChange,omitempty"`
	// Related are the facts behind the outcome, oldest first: those the
	// checks' deadlines hang on (the last MFA pass, wake and unlock) and
	// the last report each failing check judged.
	Related []HistoryEntry `json:"related,omitempty"`
}

// PolicyExplanation is one granting policy.
type PolicyExplanation struct {
	PolicyID   string             `json:"policyId"`
	PolicyName string             `json:"policyName"`
	Passing    bool               `json:"passing"`
	Checks     []CheckExplanation `json:"checks"`
}

// CheckExplanation is one check of a policy.
type CheckExplanation struct {
	PostureCheckID   string          `json:"postureCheckId"`
	PostureCheckName string          `json:"postureCheckName"`
	PostureCheckType CheckType       `json:"postureCheckType"`
	Passing          bool            `json:"passing"`
	ActualValue      json.RawMessage `json:"actualValue"`
	ExpectedValue    json.RawMessage `json:"expectedValue"`
	Criteria         json.RawMessage `json:"criteria,omitempty"`
	// Stale: the evidence is older than the check's maxAgeSeconds;
	// StaleAfter: the last instant it is fresh.
	Stale      bool       `json:"stale,omitempty"`
	StaleAfter *time.Time `json:"staleAfter,omitempty"`
	// ReportOnly: the check only reports at the moment, so that its
	// failure does not deny.
	ReportOnly bool `json:"reportOnly,omitempty"`
	// Deadlines: when a passing check stops passing (ValidUntil), and for
	// MFA the timeout and the wake/unlock grace ends.
	ValidUntil      *time.Time `json:"validUntil,omitempty"`
	TimeoutEndsAt   *time.Time `json:"timeoutEndsAt,omitempty"`
	WakeGraceEnds   *time.Time `json:"wakeGraceEndsAt,omitempty"`
	UnlockGraceEnds *time.Time `json:"unlockGraceEndsAt,omitempty"`
}

// Failures lists each evaluated policy with its failing checks (report-only
// ones marked), as a failed service request or a would-deny records them.
func Failures(results []PolicyResult) []PolicyFailure {
	out := make([]PolicyFailure, 0, len(results))
	for _, r := range results {
		f := PolicyFailure{PolicyID: r.PolicyID, PolicyName: r.PolicyName, Checks: []CheckFailure{}}
		for _, cr := range r.Checks {
			if cr.Pass {
				continue
			}
			f.Checks = append(f.Checks, CheckFailure{
				PostureCheckID: cr.Check.ID, PostureCheckName: cr.Check.Name, PostureCheckType: cr.Check.TypeID,
				ActualValue: cr.Actual, ExpectedValue: cr.Expected, Criteria: cr.Criteria, Semantic: cr.Semantic, Stale: cr.Stale,
				ReportOnly: cr.ReportOnly,
			})
		}
		out = append(out, f)
	}
	return out
}
