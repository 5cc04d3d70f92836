package posture

import (
	"encoding/json"
	"time"
)

// Kinds of the PKI and enrollment records. CAs and enrollments are model
// entities (created, updated and deleted by administrators, events on the
// model subject); session certificates and pending certificate extensions
// are stored like entities but change through their own events.
const (
	KindCA                 = Kind("cas")
	KindEnrollment         = Kind("enrollments")
	KindSessionCertificate = Kind("session-certificates")
	KindCertExtension      = Kind("cert-extensions")
)

// Enrollment methods: the em claim of an enrollment JWT and the method of
// POST /enroll.
const (
	EnrollOTT   = "ott"   // one-time token and a CSR: a certificate issued by postured
	EnrollOTTCA = "ottca" // one-time token and a certificate of a verified CA
	EnrollUPDB  = "updb"  // one-time token and a password for a preset username
	EnrollEROTT = "erott" // an edge router's one-time token and two CSRs
	EnrollCA    = "ca"    // CA auto enrollment: a certificate of a verified CA, no token
)

// DefaultEnrollmentDuration is how long an enrollment token is valid unless
// the request says otherwise (OpenZiti's default for identities and routers).
const DefaultEnrollmentDuration = 180 * time.Minute

// Enrollment is an identity's pending one-time enrollment: a token (a UUID)
// and the JWT that carries it. Using the token consumes the enrollment; it
// works once, until ExpiresAt. The token is matched by its hash; it and
// the JWT are sealed for the identity, so that an administrator can read
// them again (as OpenZiti's enrollment detail shows them).
type Enrollment struct {
	ID          string `json:"id"`
	Method      string `json:"method"` // ott, ottca or updb
	IdentityID  string `json:"identityId"`
	TokenHash   string `json:"tokenHash,omitempty"`
	TokenSealed string `json:"tokenSealed,omitempty"`
	JWTSealed   string `json:"jwtSealed,omitempty"`
	// Token and JWT are the legacy clear forms (logs written before
	// secrets were sealed).
	Token string `json:"token,omitempty"`
	JWT   string `json:"jwt,omitempty"`
	// CAID is the CA whose certificates an ottca enrollment accepts.
	CAID string `json:"caId,omitempty"`
	// Username is the preset username of a updb enrollment.
	Username  string    `json:"username,omitempty"`
	ExpiresAt time.Time `json:"expiresAt"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// CA is a certificate authority an administrator added. Once verified
// (proof of possession of its key: a certificate it signed whose common
// name is VerificationToken), its certificates may authenticate
// (IsAuthEnabled), create identities (IsAutoCaEnrollmentEnabled) or
// complete ottca enrollments (IsOttCaEnrollmentEnabled).
type CA struct {
	ID                        string   `json:"id"`
	Name                      string   `json:"name"`
	CertPEM                   string   `json:"certPem"`
	Fingerprint               string   `json:"fingerprint"`
	IdentityRoles             []string `json:"identityRoles"`
	IsAuthEnabled             bool     `json:"isAuthEnabled"`
	IsAutoCaEnrollmentEnabled bool     `json:"isAutoCaEnrollmentEnabled"`
	IsOttCaEnrollmentEnabled  bool     `json:"isOttCaEnrollmentEnabled"`
	// IdentityNameFormat names identities made by CA auto enrollment, with
	// the placeholders [caName], [caId], [commonName] and [identityId].
	IdentityNameFormat string          `json:"identityNameFormat"`
	ExternalIDClaim    json.RawMessage `json:"externalIdClaim,omitempty"`
	IsVerified         bool            `json:"isVerified"`
	// VerificationTokenSealed is the token sealed for the CA
	// (FieldCAVerificationToken); VerificationToken its legacy clear form.
	VerificationTokenSealed string    `json:"verificationTokenSealed,omitempty"`
	VerificationToken       string    `json:"verificationToken,omitempty"`
	Tags                    Tags      `json:"tags"`
	CreatedAt               time.Time `json:"createdAt"`
	UpdatedAt               time.Time `json:"updatedAt"`
}

// DefaultIdentityNameFormat names identities made by CA auto enrollment.
const DefaultIdentityNameFormat = "[caName]-[commonName]"

// RouterEnrollment is an edge router's enrollment state, part of its
// record: the one-time token until the router enrolls, then the
// fingerprints of its current certificates. A router extension replaces
// them, so that the previous client certificate no longer identifies it.
// The token is matched by its hash; it and its JWT are sealed for the
// router, so that an administrator can read them again.
type RouterEnrollment struct {
	EnrollmentTokenHash   string `json:"enrollmentTokenHash,omitempty"`
	EnrollmentTokenSealed string `json:"enrollmentTokenSealed,omitempty"`
	EnrollmentJWTSealed   string `json:"enrollmentJwtSealed,omitempty"`
	// EnrollmentToken and EnrollmentJWT are the legacy clear forms.
	EnrollmentToken     string    `json:"enrollmentToken,omitempty"`
	EnrollmentJWT       string    `json:"enrollmentJwt,omitempty"`
	EnrollmentCreatedAt time.Time `json:"enrollmentCreatedAt,omitzero"`
	EnrollmentExpiresAt time.Time `json:"enrollmentExpiresAt,omitzero"`
	IsVerified          bool      `json:"isVerified,omitempty"`
	// Fingerprint is the SHA-1 fingerprint of the current client
	// certificate; CertPEM is that certificate.
	Fingerprint       string `json:"fingerprint,omitempty"`
	CertPEM           string `json:"certPem,omitempty"`
	ServerFingerprint string `json:"serverFingerprint,omitempty"`
}

// SessionCertificate is an ephemeral client certificate bound to an API
// session: issued from a CSR for a short time, gone when the session ends.
type SessionCertificate struct {
	ID           string    `json:"id"`
	APISessionID string    `json:"apiSessionId"`
	IdentityID   string    `json:"identityId"`
	Subject      string    `json:"subject"`
	Fingerprint  string    `json:"fingerprint"`
	CertPEM      string    `json:"certPem"`
	ValidFrom    time.Time `json:"validFrom"`
	ValidTo      time.Time `json:"validTo"`
	CreatedAt    time.Time `json:"createdAt"`
}

// CertExtension is a certificate issued to extend a cert authenticator and
// not yet verified: the authenticator keeps its old certificate until the
// identity proves it received the new one.
type CertExtension struct {
	AuthenticatorID string    `json:"authenticatorId"`
	IdentityID      string    `json:"identityId"`
	CertPEM         string    `json:"certPem"`
	Fingerprint     string    `json:"fingerprint"`
	CreatedAt       time.Time `json:"createdAt"`
}

// LookupHash is the hash an enrollment is found by: TokenHash, or the hash
// of the legacy clear token.
func (e Enrollment) LookupHash() string {
	if e.TokenHash == "" && e.Token != "" {
		return HashToken(e.Token)
	}
	return e.TokenHash
}

// LookupHash is the hash a pending router enrollment is found by.
func (r RouterEnrollment) LookupHash() string {
	if r.EnrollmentTokenHash == "" && r.EnrollmentToken != "" {
		return HashToken(r.EnrollmentToken)
	}
	return r.EnrollmentTokenHash
}

// LookupHash is the hash of the token a router enrolled with.
func (p RouterEnrolled) LookupHash() string {
	if p.TokenHash == "" && p.Token != "" {
		return HashToken(p.Token)
	}
	return p.TokenHash
}

func (e Enrollment) EntityKind() Kind { return KindEnrollment }
func (e Enrollment) EntityID() string { return e.ID }
func (e CA) EntityKind() Kind         { return KindCA }
func (e CA) EntityID() string         { return e.ID }

// Event types of enrollment and certificates. CA and enrollment records
// also change through the generic entity events (ca.created, ...).
const (
	TypeIdentityEnrolled          = "identity.enrolled"
	TypeCertExtended              = "authenticator.cert.extended"
	TypeCertExtensionVerified     = "authenticator.cert.extension-verified"
	TypeCAVerified                = "ca.verified"
	TypeRouterEnrolled            = "edge-router.enrolled"
	TypeRouterCertificatesRenewed = "edge-router.certificates.renewed"
	TypeSessionCertificateCreated = "session-certificate.created"
	TypeSessionCertificateDeleted = "session-certificate.deleted"
)

func init() {
	register(
		IdentityEnrolled{}, CertExtended{}, CertExtensionVerified{}, CAVerified{},
		RouterEnrolled{}, RouterCertificatesRenewed{},
		SessionCertificateCreated{}, SessionCertificateDeleted{},
	)
}

// SubjectCertificate prefixes the per-identity subject of session
// certificate events ("certificate.<identityId>").
const SubjectCertificate = "certificate"

// IdentityEnrolled records a completed enrollment, in one event so that it
// happens whole or not at all: the enrollment (its one-time token) is
// consumed and the identity gets its authenticator. A CA auto enrollment
// has no enrollment and creates the identity too. It is a model change:
// appended under optimistic concurrency, so a token is used once even when
// two requests (on two nodes) race.
type IdentityEnrolled struct {
	EnrollmentID  string        `json:"enrollmentId,omitempty"`
	Method        string        `json:"method"`
	Identity      *Identity     `json:"identity,omitempty"`
	Authenticator Authenticator `json:"authenticator"`
}

func (IdentityEnrolled) EventType() string { return TypeIdentityEnrolled }
func (IdentityEnrolled) Subject() string   { return SubjectModel }

// CertExtended records a certificate issued to extend a cert authenticator;
// the authenticator keeps its current certificate until the extension is
// verified.
type CertExtended struct {
	Extension CertExtension `json:"extension"`
}

func (CertExtended) EventType() string { return TypeCertExtended }
func (CertExtended) Subject() string   { return SubjectModel }

// CertExtensionVerified records that the identity showed the extended
// certificate: it replaces the authenticator's certificate, and the old one
// no longer authenticates.
type CertExtensionVerified struct {
	AuthenticatorID string `json:"authenticatorId"`
	Fingerprint     string `json:"fingerprint"`
}

func (CertExtensionVerified) EventType() string { return TypeCertExtensionVerified }
func (CertExtensionVerified) Subject() string   { return SubjectModel }

// CAVerified records the proof of possession of a CA's key.
type CAVerified struct {
	ID string `json:"id"`
}

func (CAVerified) EventType() string { return TypeCAVerified }
func (CAVerified) Subject() string   { return SubjectModel }

// RouterEnrolled records an edge router's enrollment with its one-time
// token (by its hash; Token is the legacy clear form): the token is
// consumed and the router's certificates are recorded.
type RouterEnrolled struct {
	RouterID          string `json:"routerId"`
	TokenHash         string `json:"tokenHash,omitempty"`
	Token             string `json:"token,omitempty"`
	Fingerprint       string `json:"fingerprint"`
	CertPEM           string `json:"certPem"`
	ServerFingerprint string `json:"serverFingerprint"`
}

func (RouterEnrolled) EventType() string { return TypeRouterEnrolled }
func (RouterEnrolled) Subject() string   { return SubjectModel }

// RouterCertificatesRenewed records an edge router's extension: new
// certificates replace those with the previous client certificate
// PreviousFingerprint, which no longer identifies the router.
type RouterCertificatesRenewed struct {
	RouterID            string `json:"routerId"`
	PreviousFingerprint string `json:"previousFingerprint"`
	Fingerprint         string `json:"fingerprint"`
	CertPEM             string `json:"certPem"`
	ServerFingerprint   string `json:"serverFingerprint"`
}

func (RouterCertificatesRenewed) EventType() string { return TypeRouterCertificatesRenewed }
func (RouterCertificatesRenewed) Subject() string   { return SubjectModel }

// SessionCertificateCreated records an ephemeral certificate issued to an
// API session.
type SessionCertificateCreated struct {
	Certificate SessionCertificate `json:"certificate"`
}

func (SessionCertificateCreated) EventType() string { return TypeSessionCertificateCreated }
func (p SessionCertificateCreated) Subject() string {
	return SubjectFor(SubjectCertificate, p.Certificate.IdentityID)
}

// SessionCertificateDeleted records the removal of an ephemeral certificate
// by its API session.
type SessionCertificateDeleted struct {
	ID           string `json:"id"`
	APISessionID string `json:"apiSessionId"`
	IdentityID   string `json:"identityId"`
}

func (SessionCertificateDeleted) EventType() string { return TypeSessionCertificateDeleted }
func (p SessionCertificateDeleted) Subject() string {
	return SubjectFor(SubjectCertificate, p.IdentityID)
}
