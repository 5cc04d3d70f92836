package posture

import "time"

// Event types, one per payload struct below (entity events are in
// entity.go). Types are past-tense facts.
const (
	TypeConfigChanged     = "config.changed"
	TypeAPISessionCreated = "apisession.created"
	TypeAPISessionTouched = "apisession.touched"
	TypeAPISessionDeleted = "apisession.deleted"
)

func init() {
	register(
		ConfigChanged{},
		APISessionCreated{}, APISessionTouched{}, APISessionDeleted{},
	)
}

// ConfigChanged records the settings that evaluation depends on, so that a
// replay evaluates with the settings in force at the time.
type ConfigChanged struct {
	MFAGraceSeconds          int64 `json:"mfaGraceSeconds"`
	APISessionTimeoutSeconds int64 `json:"apiSessionTimeoutSeconds"`
}

func (ConfigChanged) EventType() string { return TypeConfigChanged }
func (ConfigChanged) Subject() string   { return SubjectModel }

// APISessionCreated records a successful authentication.
type APISessionCreated struct {
	APISession APISession `json:"apiSession"`
}

func (APISessionCreated) EventType() string { return TypeAPISessionCreated }
func (p APISessionCreated) Subject() string {
	return SubjectFor("apisession", p.APISession.IdentityID)
}

// APISessionTouched records activity on an API session, which moves its idle
// expiry. Activity is recorded at most once per a fraction of the timeout.
type APISessionTouched struct {
	ID         string    `json:"id"`
	IdentityID string    `json:"identityId"`
	At         time.Time `json:"at"`
}

func (APISessionTouched) EventType() string { return TypeAPISessionTouched }
func (p APISessionTouched) Subject() string { return SubjectFor("apisession", p.IdentityID) }

// APISession end reasons.
const (
	EndLogout  = "logout"
	EndExpired = "expired"
	EndRemoved = "removed"
)

// APISessionDeleted records the end of an API session (logout, idle expiry).
type APISessionDeleted struct {
	ID         string `json:"id"`
	IdentityID string `json:"identityId"`
	Reason     string `json:"reason"`
}

func (APISessionDeleted) EventType() string { return TypeAPISessionDeleted }
func (p APISessionDeleted) Subject() string { return SubjectFor("apisession", p.IdentityID) }
