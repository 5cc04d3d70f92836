// Package pki is the controller's certificate authority: it owns the CA key
// and certificate, issues the API server certificate, signs CSRs for
// identities and routers, signs and parses enrollment JWTs, and publishes the
// enrollment key set (JWKS) and the challenge that proves possession of it.
//
// It imports the standard library, github.com/golang-jwt/jwt/v5 and
// github.com/smallstep/pkcs7 only. The clock and the source of randomness come
// in through [Options]; the package never reads the environment or the wall
// clock on its own.
//
// Files live in one directory (see [Open]): ca.pem and ca.key for the CA,
// server.pem and server.key for the API server certificate. Keys are written
// 0600 and the directory is created 0700. Files are written to a temporary
// name and then linked or renamed into place, so a reader never sees half a
// file.
//
// Errors that a caller maps to an API error code are exported sentinels,
// matched with errors.Is:
//
//	ErrMissingCSR, ErrInvalidCSR   MISSING_OR_INVALID_CSR
//	ErrCSRSignature                COULD_NOT_PROCESS_CSR
//	ErrInvalidCertificate          EXPECTED_PEM_CERTIFICATE
//	ErrInvalidCommonName           INVALID_COMMON_NAME
//	ErrCertificateFailedValidation CERTIFICATE_FAILED_VALIDATION
//	ErrTokenExpired                ENROLLMENT_EXPIRED
//	ErrTokenInvalid                INVALID_ENROLLMENT_TOKEN
//	ErrInvalidNonce                COULD_NOT_VALIDATE
//	ErrUnknownKey                  NOT_FOUND
package pki
