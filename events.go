package posture

import "time"

// Event types, one per payload struct below (entity events are in
// entity.go). Types are past-tense facts.
const (
	TypeConfigChanged     = "config.changed"
	TypeAPISessionCreated = "apisession.created"
	TypeAPISessionTouched = "apisession.touched"
	TypeAPISessionDeleted = "apisession.deleted"
	TypeAPISessionsEnded  = "apisession.all-ended"

	TypeIdentityServiceConfigsSet = "identity.service-configs.set"
)

func init() {
	register(
		ConfigChanged{},
		APISessionCreated{}, APISessionTouched{}, APISessionDeleted{}, APISessionsEnded{},
		IdentityServiceConfigsSet{},
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

// APISessionsEnded records the end of every API session the identity has
// at this point of the log: an operator's recovery, which must also end
// the sessions of logins recorded while it read the log (one
// apisession.deleted per session it saw would leave those).
type APISessionsEnded struct {
	IdentityID string `json:"identityId"`
	Reason     string `json:"reason"`
}

func (APISessionsEnded) EventType() string { return TypeAPISessionsEnded }
func (p APISessionsEnded) Subject() string { return SubjectFor("apisession", p.IdentityID) }

// KindIdentityServiceConfigs is the kind of identities' own service
// configs in the projections: one record per identity that has some, keyed
// by the identity id.
const KindIdentityServiceConfigs = Kind("identity-service-configs")

// MaxIdentityServiceConfigs bounds the service configs of one identity.
const MaxIdentityServiceConfigs = 1000

// IdentityServiceConfigsSet records an identity's own service configs as
// they now are: for a service and a config type, the config that the
// identity's clients get instead of the service's own of that type (the
// controller's service config overrides). Configs maps a service id to a
// config type id to a config id; empty, the identity has none.
type IdentityServiceConfigsSet struct {
	IdentityID string                       `json:"identityId"`
	Configs    map[string]map[string]string `json:"configs"`
}

func (IdentityServiceConfigsSet) EventType() string { return TypeIdentityServiceConfigsSet }
func (IdentityServiceConfigsSet) Subject() string   { return SubjectModel }
