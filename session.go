package posture

import (
	"encoding/json"
	"time"
)

// Event types of posture facts and sessions.
const (
	TypePostureRecorded = "posture.recorded"
	TypeMFAPassed       = "mfa.passed"
	TypeDeadlineReached = "deadline.reached"
	TypeSessionCreated  = "session.created"
	TypeSessionDenied   = "session.denied"
	TypeSessionDeleted  = "session.deleted"
)

func init() {
	register(PostureRecorded{}, MFAPassed{}, DeadlineReached{}, SessionCreated{}, SessionDenied{}, SessionDeleted{})
}

// Per-identity subjects of posture facts and sessions.
const (
	SubjectPosture = "posture"
	SubjectSession = "session"
)

// PostureRecorded records the posture responses an endpoint submitted
// (one, or a bulk submission) on one of its API sessions.
type PostureRecorded struct {
	IdentityID   string            `json:"identityId"`
	APISessionID string            `json:"apiSessionId"`
	Responses    []PostureResponse `json:"responses"`
}

func (PostureRecorded) EventType() string { return TypePostureRecorded }
func (p PostureRecorded) Subject() string { return SubjectFor(SubjectPosture, p.IdentityID) }

// MFAPassed records a valid TOTP (or recovery code) on an API session: at
// MFA login, or when MFA enrollment was verified on it.
type MFAPassed struct {
	IdentityID   string `json:"identityId"`
	APISessionID string `json:"apiSessionId"`
}

func (MFAPassed) EventType() string { return TypeMFAPassed }
func (p MFAPassed) Subject() string { return SubjectFor(SubjectPosture, p.IdentityID) }

// DeadlineReached records that a posture verdict's ValidUntil passed (an MFA
// timeout, the end of a wake or unlock grace). Its event ID is derived from
// the identity, the API session and the deadline, so nodes that notice it
// together record it once; its time is just after the deadline.
type DeadlineReached struct {
	IdentityID   string    `json:"identityId"`
	APISessionID string    `json:"apiSessionId"`
	Deadline     time.Time `json:"deadline"`
}

func (DeadlineReached) EventType() string { return TypeDeadlineReached }
func (p DeadlineReached) Subject() string { return SubjectFor(SubjectPosture, p.IdentityID) }

// Session is a client's permission to Dial or Bind one service, tied to an
// API session. Its token (a JWT) is sealed for the identity
// (FieldSessionToken), which reads it back; Token is its legacy clear form.
type Session struct {
	ID           string    `json:"id"`
	TokenSealed  string    `json:"tokenSealed,omitempty"`
	Token        string    `json:"token,omitempty"`
	IdentityID   string    `json:"identityId"`
	APISessionID string    `json:"apiSessionId"`
	ServiceID    string    `json:"serviceId"`
	Type         string    `json:"type"`
	Tags         Tags      `json:"tags"`
	CreatedAt    time.Time `json:"createdAt"`
}

// SessionCreated records a granted session.
type SessionCreated struct {
	Session Session `json:"session"`
	// Policies are the passing policies that granted it.
	Policies []string `json:"policies"`
}

func (SessionCreated) EventType() string { return TypeSessionCreated }
func (p SessionCreated) Subject() string { return SubjectFor(SubjectSession, p.Session.IdentityID) }

// CheckFailure is one failing posture check of a denied request, with the
// values the admin sees.
type CheckFailure struct {
	PostureCheckID   string          `json:"postureCheckId"`
	PostureCheckName string          `json:"postureCheckName"`
	PostureCheckType CheckType       `json:"postureCheckType"`
	ActualValue      json.RawMessage `json:"actualValue"`
	ExpectedValue    json.RawMessage `json:"expectedValue"`
	Criteria         json.RawMessage `json:"criteria,omitempty"`
	Semantic         string          `json:"semantic,omitempty"`
	Stale            bool            `json:"stale,omitempty"`
}

// PolicyFailure is a failing policy of a denied request and its failing
// checks.
type PolicyFailure struct {
	PolicyID   string         `json:"policyId"`
	PolicyName string         `json:"policyName"`
	Checks     []CheckFailure `json:"checks"`
}

// SessionDenied records a session request refused for posture: the failed
// service request that admins read.
type SessionDenied struct {
	IdentityID     string          `json:"identityId"`
	APISessionID   string          `json:"apiSessionId"`
	ServiceID      string          `json:"serviceId"`
	ServiceName    string          `json:"serviceName"`
	Type           string          `json:"sessionType"`
	PolicyFailures []PolicyFailure `json:"policyFailures"`
}

func (SessionDenied) EventType() string { return TypeSessionDenied }
func (p SessionDenied) Subject() string { return SubjectFor(SubjectSession, p.IdentityID) }

// SessionDeleted records a session ended by its client.
type SessionDeleted struct {
	ID         string `json:"id"`
	IdentityID string `json:"identityId"`
}

func (SessionDeleted) EventType() string { return TypeSessionDeleted }
func (p SessionDeleted) Subject() string { return SubjectFor(SubjectSession, p.IdentityID) }
