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
}

// PolicyResult is a service policy evaluated for an API session: passing
// when every check passes (a policy without checks always passes).
type PolicyResult struct {
	PolicyID   string
	PolicyName string
	Type       string
	Passing    bool
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

// HistoryEntry is one line of an identity's audit timeline: a posture fact,
// an access change or a session decision, with the event that caused it.
type HistoryEntry struct {
	Seq          uint64          `json:"seq"`
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
)
