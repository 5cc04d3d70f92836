package posture

import "time"

// KindMFA is the kind of MFA enrollments in the projections: one record per
// identity, keyed by the identity id. Enrollments are not model entities:
// their events go to the identity's MFA subject, not to the model subject.
const KindMFA = Kind("mfa")

// SubjectMFA prefixes the per-identity subject of MFA events
// ("mfa.<identityId>"). Changes of an enrollment are appended under
// optimistic concurrency on that subject, so that a code is accepted once
// even when two nodes see it at the same time.
const SubjectMFA = "mfa"

// Event types of MFA enrollments. The fact that an API session passed MFA is
// mfa.passed (MFAPassed, in session.go), a posture fact.
const (
	TypeMFAEnrolled              = "mfa.enrolled"
	TypeMFAVerified              = "mfa.verified"
	TypeMFACodeUsed              = "mfa.code.used"
	TypeMFARecoveryCodesReplaced = "mfa.recovery-codes.replaced"
	TypeMFARemoved               = "mfa.removed"
)

func init() {
	register(MFAEnrolled{}, MFAVerified{}, MFACodeUsed{}, MFARecoveryCodesReplaced{}, MFARemoved{})
}

// MFA is an identity's TOTP enrollment (RFC 6238: SHA-1, 6 digits, 30 s).
//
// The TOTP secret is sealed (verifying a code needs it back). Recovery
// codes are not kept: they are derived from the secret and the recovery
// nonce (so that the identity can view them again, as the API allows), and
// only a hash of each unused one is stored, which is what a code is checked
// against: an HMAC keyed with the secret ("h2:" prefix; an enrollment of an
// older log has plain SHA-256 hashes).
type MFA struct {
	ID         string `json:"id"`
	IdentityID string `json:"identityId"`
	// SecretSealed is the base32 TOTP secret (10 random bytes), sealed for
	// the identity (FieldMFASecret).
	SecretSealed string `json:"secretSealed,omitempty"`
	// Secret is the legacy clear secret of an enrollment made before
	// secrets were sealed (empty otherwise).
	Secret string `json:"secret,omitempty"`
	// Issuer and Account are the provisioning URL's labels.
	Issuer  string `json:"issuer"`
	Account string `json:"account"`
	// RecoveryNonceSealed, with the secret, derives the current recovery
	// codes (sealed, FieldMFARecoveryNonce); RecoveryNonce is its legacy
	// clear form.
	RecoveryNonceSealed string `json:"recoveryNonceSealed,omitempty"`
	RecoveryNonce       string `json:"recoveryNonce,omitempty"`
	// RecoveryCodes are the hashes of the unused recovery codes.
	RecoveryCodes []string `json:"recoveryCodes"`
	Verified      bool     `json:"isVerified"`
	// LastCounter is the TOTP time step of the last accepted code: a code
	// of that step or an earlier one is refused (each code once only), but
	// that step's code again by LastCounterAPISession, the API session that
	// used it (a client that verifies its enrollment and then reads its
	// recovery codes with the code still shown).
	LastCounter           int64     `json:"lastCounter"`
	LastCounterAPISession string    `json:"lastCounterApiSession,omitempty"`
	CreatedAt             time.Time `json:"createdAt"`
	UpdatedAt             time.Time `json:"updatedAt"`
}

// MFACode is a code that an MFA change consumed: a TOTP time step, or the
// hash of a recovery code. The zero value consumed nothing.
type MFACode struct {
	Counter      int64  `json:"counter,omitempty"`
	RecoveryHash string `json:"recoveryHash,omitempty"`
	// APISessionID is the API session that used a TOTP.
	APISessionID string `json:"apiSessionId,omitempty"`
}

// MFAEnrolled records the start of an enrollment (unverified).
type MFAEnrolled struct {
	MFA MFA `json:"mfa"`
}

func (MFAEnrolled) EventType() string { return TypeMFAEnrolled }
func (p MFAEnrolled) Subject() string { return SubjectFor(SubjectMFA, p.MFA.IdentityID) }

// MFAVerified records that the identity proved its enrollment with a TOTP:
// from then on, logging in needs a code.
type MFAVerified struct {
	IdentityID string  `json:"identityId"`
	Used       MFACode `json:"used"`
}

func (MFAVerified) EventType() string { return TypeMFAVerified }
func (p MFAVerified) Subject() string { return SubjectFor(SubjectMFA, p.IdentityID) }

// MFACodeUsed records a code accepted for an MFA login or to view the
// recovery codes: it cannot be used again.
type MFACodeUsed struct {
	IdentityID string  `json:"identityId"`
	Used       MFACode `json:"used"`
}

func (MFACodeUsed) EventType() string { return TypeMFACodeUsed }
func (p MFACodeUsed) Subject() string { return SubjectFor(SubjectMFA, p.IdentityID) }

// MFARecoveryCodesReplaced records new recovery codes, which replace all
// the old ones, and the code that authorized the change.
type MFARecoveryCodesReplaced struct {
	IdentityID          string   `json:"identityId"`
	RecoveryNonceSealed string   `json:"recoveryNonceSealed,omitempty"`
	RecoveryNonce       string   `json:"recoveryNonce,omitempty"` // legacy, clear
	RecoveryCodes       []string `json:"recoveryCodes"`           // hashes
	Used                MFACode  `json:"used"`
}

func (MFARecoveryCodesReplaced) EventType() string { return TypeMFARecoveryCodesReplaced }
func (p MFARecoveryCodesReplaced) Subject() string { return SubjectFor(SubjectMFA, p.IdentityID) }

// Who removed an enrollment.
const (
	MFARemovedByUser  = "user"
	MFARemovedByAdmin = "admin"
	// MFARemovedByOperator: by an operator holding the log and the keys
	// (postured admin recover), the default admin's break-glass.
	MFARemovedByOperator = "operator"
)

// MFARemoved records the removal of an identity's enrollment, by the
// identity itself or by an administrator. The identity's API sessions lose
// their MFA posture.
type MFARemoved struct {
	IdentityID string `json:"identityId"`
	By         string `json:"by"`
}

func (MFARemoved) EventType() string { return TypeMFARemoved }
func (p MFARemoved) Subject() string { return SubjectFor(SubjectMFA, p.IdentityID) }
