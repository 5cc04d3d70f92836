package posture

import (
	"crypto/sha256"
	"encoding/hex"
)

// Secrets never reach an event or a projection value in clear. A secret
// that only has to be matched (a one-time token) is kept as its HashToken;
// one that must be read back (a TOTP secret, a JWT shown to its owner) is
// sealed: AES-GCM under a data key of its owner, bound to the owner and to
// one of the field names below (package secrets; the API layer seals and
// opens, projections store what the event carries).
//
// Logs written before secrets were sealed hold them in clear, in the fields
// marked legacy: those still decode and work (migrate on read), and stay in
// clear until rotated (see docs/security.md).

// Field names of sealed values: the additional data that binds a sealed
// value to its use.
const (
	FieldMFASecret           = "mfa.secret"
	FieldMFARecoveryNonce    = "mfa.recoveryNonce"
	FieldEnrollmentToken     = "enrollment.token"
	FieldEnrollmentJWT       = "enrollment.jwt"
	FieldRouterEnrollToken   = "edge-router.enrollmentToken"
	FieldRouterEnrollJWT     = "edge-router.enrollmentJwt"
	FieldCAVerificationToken = "ca.verificationToken"
	FieldSessionToken        = "session.token"
	FieldPasswordHash        = "authenticator.passwordHash"
)

// HashToken is the stored form of a token that only has to be matched: the
// hex SHA-256 of it. Tokens are random UUIDs (122 bits), so the hash needs
// no salt nor stretching.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
