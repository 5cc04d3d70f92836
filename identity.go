package posture

import "time"

// Identity is an endpoint, a user or a router: the subject of policies.
type Identity struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Type           string   `json:"type"`
	IsAdmin        bool     `json:"isAdmin"`
	IsDefaultAdmin bool     `json:"isDefaultAdmin"`
	RoleAttributes []string `json:"roleAttributes"`
	ExternalID     string   `json:"externalId,omitempty"`
	Disabled       bool     `json:"disabled"`
	// DisabledAt is when the identity was disabled; DisabledUntil, when
	// set, when it is enabled again by itself.
	DisabledAt    *time.Time `json:"disabledAt,omitempty"`
	DisabledUntil *time.Time `json:"disabledUntil,omitempty"`
	Tags          Tags       `json:"tags"`
	// AppData is data for the identity's applications, which its SDKs
	// read, as tags are for admins.
	AppData Tags `json:"appData,omitempty"`
	// The hosting costs and precedences the controller gives the
	// terminators an identity hosts (default, required or failed), by
	// default and per service id. postured has no data plane: they are
	// kept and shown as given.
	DefaultHostingCost        int               `json:"defaultHostingCost,omitempty"`
	DefaultHostingPrecedence  string            `json:"defaultHostingPrecedence,omitempty"`
	ServiceHostingCosts       map[string]int    `json:"serviceHostingCosts,omitempty"`
	ServiceHostingPrecedences map[string]string `json:"serviceHostingPrecedences,omitempty"`
	CreatedAt                 time.Time         `json:"createdAt"`
	UpdatedAt                 time.Time         `json:"updatedAt"`
}

// Hosting precedences.
var HostingPrecedences = []string{"default", "required", "failed"}

// MaxHostingCost is the highest hosting cost.
const MaxHostingCost = 65535

// IsDisabled reports whether the identity is disabled at now: disabled for
// good, or until a later time.
func (i Identity) IsDisabled(now time.Time) bool {
	return i.Disabled && (i.DisabledUntil == nil || now.Before(*i.DisabledUntil))
}

// Identity types.
const (
	IdentityUser    = "User"
	IdentityDevice  = "Device"
	IdentityService = "Service"
	IdentityRouter  = "Router"
	IdentityDefault = "Default"
)

// IdentityTypes lists the identity types.
var IdentityTypes = []string{IdentityUser, IdentityDevice, IdentityService, IdentityRouter, IdentityDefault}

// Authenticator methods.
const (
	MethodPassword = "updb"
	MethodCert     = "cert"
)

// Authenticator is a credential of an identity: a username with a password
// hash (method updb) or a client certificate (method cert). Passwords are
// never stored in clear, not even in the log; their hashes are sealed
// (PasswordHashSealed) so that a reader of the log cannot try guesses
// against them offline.
type Authenticator struct {
	ID                 string `json:"id"`
	IdentityID         string `json:"identityId"`
	Method             string `json:"method"`
	Username           string `json:"username,omitempty"`
	PasswordHashSealed string `json:"passwordHashSealed,omitempty"`
	// PasswordHash is the legacy clear form of the hash, in logs written
	// before hashes were sealed.
	PasswordHash      string `json:"passwordHash,omitempty"`
	CertPEM           string `json:"certPem,omitempty"`
	Fingerprint       string `json:"fingerprint,omitempty"`
	IsIssuedByNetwork bool   `json:"isIssuedByNetwork"`
	// CAID is, for a certificate enrolled with a third-party CA (ottca or
	// CA auto enrollment), that CA: it may have issued it through
	// intermediates, which the authenticator does not keep.
	CAID      string    `json:"caId,omitempty"`
	Tags      Tags      `json:"tags"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// KindAPISession is the kind of API sessions in the projections: not part of
// the model, but stored like its entities.
const KindAPISession = Kind("api-sessions")

// APISession is an authenticated client: the holder of a zt-session token.
// Only the SHA-256 of the token is kept.
type APISession struct {
	ID              string `json:"id"`
	TokenHash       string `json:"tokenHash"`
	IdentityID      string `json:"identityId"`
	AuthenticatorID string `json:"authenticatorId"`
	// CAID is, for a login with a certificate of a third-party CA, the CA
	// that verified its chain: its delete ends the session.
	CAID string `json:"caId,omitempty"`
	// SignerID is, for a login with an external JWT, the signer that
	// verified it: its delete ends the session.
	SignerID string `json:"signerId,omitempty"`
	// CredentialAt is when the authenticator the login checked was last
	// changed, as the login read it: a login recorded after a newer change
	// (a new password, an extended certificate) starts no session.
	CredentialAt time.Time `json:"credentialAt,omitzero"`
	AuthMethod   string    `json:"authMethod"`
	// CertExtendable: opened with a certificate the network issued, which
	// its holder may extend (not one of an external CA).
	CertExtendable bool      `json:"certExtendable,omitempty"`
	IPAddress      string    `json:"ipAddress"`
	ConfigTypes    []string  `json:"configTypes"`
	MFARequired    bool      `json:"isMfaRequired"`
	MFAComplete    bool      `json:"isMfaComplete"`
	SDKInfo        *SDKInfo  `json:"sdkInfo,omitempty"`
	EnvInfo        *EnvInfo  `json:"envInfo,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	LastActivityAt time.Time `json:"lastActivityAt"`
}

// KindIdentityClient is the kind of ClientInfo records, one per identity.
const KindIdentityClient = Kind("identity-clients")

// ClientInfo is what an identity's clients last reported of themselves when
// they authenticated: the real controller keeps it on the identity, so the
// identity's detail shows the latest even after the API session ended.
type ClientInfo struct {
	IdentityID string    `json:"identityId"`
	EnvInfo    *EnvInfo  `json:"envInfo,omitempty"`
	SDKInfo    *SDKInfo  `json:"sdkInfo,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
}
