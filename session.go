package posture

import (
	"encoding/json"
	"errors"
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
	TypeCheckEnforced   = "check.enforced"
)

func init() {
	register(PostureRecorded{}, MFAPassed{}, DeadlineReached{}, SessionCreated{}, SessionDenied{}, SessionDeleted{}, CheckEnforced{})
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

// Validate refuses a posture fact that names no identity or no API
// session: the API never appended one.
func (p PostureRecorded) Validate() error {
	switch {
	case p.IdentityID == "":
		return errors.New("identityId is required")
	case p.APISessionID == "":
		return errors.New("apiSessionId is required")
	}
	return nil
}

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

// KindSession is the kind of sessions in the projections.
const KindSession = Kind("sessions")

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
	// WouldDeny holds, when the session was granted only because failing
	// checks are report-only, every granting policy with its failing
	// checks: the request a full enforcement would have denied. It is part
	// of the event, so that replay records the same would-deny.
	WouldDeny []PolicyFailure `json:"wouldDeny,omitempty"`
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
	// ReportOnly: the check fails but only reports (Check.ReportOnly).
	ReportOnly bool `json:"reportOnly,omitempty"`
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

// CheckEnforced records that a report-only posture check's enforceAt was
// reached: from then on the check enforces, and every API session it
// concerns is re-evaluated (sessions that then fail are removed). Its ID is
// derived from the check and the instant, so nodes that notice it together
// record it once; its time is the enforceAt. An event for an enforceAt the
// check no longer has (it was changed meanwhile) changes nothing.
type CheckEnforced struct {
	CheckID   string    `json:"checkId"`
	EnforceAt time.Time `json:"enforceAt"`
}

func (CheckEnforced) EventType() string { return TypeCheckEnforced }

// Subject is the model's: the switch changes a check, ordered with every
// other change of the model.
func (CheckEnforced) Subject() string { return SubjectModel }

// WouldDeny is a session request granted only because its failing checks
// are report-only, as admins read it: the request enforcement would have
// refused, with the same detail as a failed service request.
type WouldDeny struct {
	SessionID      string          `json:"sessionId"`
	APISessionID   string          `json:"apiSessionId"`
	ServiceID      string          `json:"serviceId"`
	ServiceName    string          `json:"serviceName"`
	SessionType    string          `json:"sessionType"`
	When           time.Time       `json:"when"`
	PolicyFailures []PolicyFailure `json:"policyFailures"`
}
