package posture

import "time"

// Event types, one per payload struct below. Types are past-tense facts.
const (
	TypeConfigChanged        = "config.changed"
	TypeIdentityCreated      = "identity.created"
	TypeIdentityUpdated      = "identity.updated"
	TypeIdentityDeleted      = "identity.deleted"
	TypeAuthenticatorCreated = "authenticator.created"
	TypeAuthenticatorUpdated = "authenticator.updated"
	TypeAuthenticatorDeleted = "authenticator.deleted"
	TypeAPISessionCreated    = "apisession.created"
	TypeAPISessionTouched    = "apisession.touched"
	TypeAPISessionDeleted    = "apisession.deleted"
)

func init() {
	register(
		ConfigChanged{},
		IdentityCreated{}, IdentityUpdated{}, IdentityDeleted{},
		AuthenticatorCreated{}, AuthenticatorUpdated{}, AuthenticatorDeleted{},
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

// IdentityCreated records a new identity.
type IdentityCreated struct {
	Identity Identity `json:"identity"`
}

func (IdentityCreated) EventType() string { return TypeIdentityCreated }
func (IdentityCreated) Subject() string   { return SubjectModel }

// IdentityUpdated records the whole new state of an identity.
type IdentityUpdated struct {
	Identity Identity `json:"identity"`
}

func (IdentityUpdated) EventType() string { return TypeIdentityUpdated }
func (IdentityUpdated) Subject() string   { return SubjectModel }

// IdentityDeleted records the removal of an identity, with its
// authenticators, API sessions, sessions and posture data.
type IdentityDeleted struct {
	ID string `json:"id"`
}

func (IdentityDeleted) EventType() string { return TypeIdentityDeleted }
func (IdentityDeleted) Subject() string   { return SubjectModel }

// AuthenticatorCreated records a new credential.
type AuthenticatorCreated struct {
	Authenticator Authenticator `json:"authenticator"`
}

func (AuthenticatorCreated) EventType() string { return TypeAuthenticatorCreated }
func (AuthenticatorCreated) Subject() string   { return SubjectModel }

// AuthenticatorUpdated records the whole new state of a credential.
type AuthenticatorUpdated struct {
	Authenticator Authenticator `json:"authenticator"`
}

func (AuthenticatorUpdated) EventType() string { return TypeAuthenticatorUpdated }
func (AuthenticatorUpdated) Subject() string   { return SubjectModel }

// AuthenticatorDeleted records the removal of a credential.
type AuthenticatorDeleted struct {
	ID string `json:"id"`
}

func (AuthenticatorDeleted) EventType() string { return TypeAuthenticatorDeleted }
func (AuthenticatorDeleted) Subject() string   { return SubjectModel }

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
