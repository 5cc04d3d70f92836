// Package mfacode checks and derives the codes of an MFA enrollment: TOTPs
// (RFC 6238: SHA-1, six digits, 30-second periods, two periods of skew, each
// time step accepted once) and recovery codes (derived from the secret and a
// nonce, stored as keyed hashes, each used once). It is pure: the caller
// opens the sealed secrets and gives the time.
//
// It imports the root package and pquerna/otp only.
package mfacode
