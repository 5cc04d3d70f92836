package mfacode

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"

	"github.com/seed-0809debe/posture"
)

// TOTP parameters (RFC 6238, as authenticator apps expect them).
const (
	SecretSize      = 10 // bytes
	Period          = 30 // seconds
	Skew            = 2  // periods accepted either side of the current one (the OpenZiti controller's window of 5)
	RecoveryCount   = 20 // recovery codes of an enrollment
	recoveryCodeLen = 6  // base32 characters
	digits          = otp.DigitsSix
)

// ProvisioningURL is the otpauth URL of an enrollment with its opened
// secret, which authenticator apps read (usually from its QR code).
func ProvisioningURL(m posture.MFA, secret string) (string, error) {
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return "", fmt.Errorf("MFA secret of %s: %w", m.IdentityID, err)
	}
	account := m.Account
	if account == "" {
		account = m.IdentityID
	}
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: m.Issuer, AccountName: account, Period: Period, SecretSize: SecretSize,
		Secret: raw, Digits: digits, Algorithm: otp.AlgorithmSHA1,
	})
	if err != nil {
		return "", err
	}
	return key.URL(), nil
}

// dummySecret and dummyRecoveryHash stand in when there is no enrollment, so
// that checking a code costs the same either way.
var (
	dummySecret       = base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(make([]byte, SecretSize))
	dummyRecoveryHash = hashRecoveryCode("", dummySecret, "")
)

// Keys are an enrollment's opened secrets.
type Keys struct {
	Secret string // base32 TOTP secret
	Nonce  string // recovery nonce
}

// NoEnrollment are the keys to check a code with when there is no
// enrollment: a dummy secret, so that the check costs the same.
func NoEnrollment() Keys { return Keys{Secret: dummySecret} }

// Check checks a TOTP (and, when recovery is set, a recovery code)
// against an enrollment (nil: none, which matches nothing), for the API
// session apiSessionID. A TOTP of the current period or two either side is
// accepted if its time step is later than the last accepted one, or, when
// again is set (a read of the recovery codes, which changes nothing), is
// that one and apiSessionID used it: another API session may not replay
// it. A recovery code is accepted if it is unused. It returns what the code
// consumes. Its work does not depend on whether or where the code matches,
// nor on whether there is an enrollment.
func Check(m *posture.MFA, keys Keys, code, apiSessionID string, again bool, now time.Time, recovery bool) (posture.MFACode, bool) {
	secret, last, lastBy, hashes, identityID := keys.Secret, int64(math.MaxInt64), "", []string(nil), ""
	if m != nil {
		last, lastBy, hashes, identityID = m.LastCounter, m.LastCounterAPISession, m.RecoveryCodes, m.IdentityID
	}
	used := posture.MFACode{APISessionID: apiSessionID}
	step := now.Unix() / Period
	for s := step - Skew; s <= step+Skew; s++ {
		want, err := hotp.GenerateCodeCustom(secret, uint64(s), hotp.ValidateOpts{Digits: digits, Algorithm: otp.AlgorithmSHA1})
		match := err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1
		if match && (s > last || again && s == last && apiSessionID != "" && apiSessionID == lastBy) {
			used.Counter = s
		}
	}
	got := hashRecoveryCode(identityID, secret, strings.ToUpper(code))
	gotLegacy := legacyRecoveryHash(identityID, strings.ToUpper(code))
	matched := ""
	for i := range max(len(hashes), RecoveryCount) {
		h := dummyRecoveryHash
		if i < len(hashes) {
			h = hashes[i]
		}
		want := got
		if !strings.HasPrefix(h, recoveryHashPrefix) {
			want = gotLegacy
		}
		if subtle.ConstantTimeCompare([]byte(h), []byte(want)) == 1 && i < len(hashes) {
			matched = h
		}
	}
	switch {
	case code == "":
		return posture.MFACode{}, false
	case used.Counter > 0:
		return used, true
	case recovery && matched != "":
		return posture.MFACode{RecoveryHash: matched}, true
	}
	return posture.MFACode{}, false
}

// RecoveryCodes derives an enrollment's recovery codes from its secret and
// a nonce: twenty codes of six base32 characters.
func RecoveryCodes(secret, nonce string) []string {
	out := make([]string, RecoveryCount)
	for i := range out {
		mac := hmac.New(sha256.New, []byte(secret))
		fmt.Fprintf(mac, "postured recovery code\x00%s\x00%d", nonce, i)
		out[i] = base32.StdEncoding.EncodeToString(mac.Sum(nil))[:recoveryCodeLen]
	}
	return out
}

// recoveryHashPrefix marks the keyed form of a recovery code's hash.
const recoveryHashPrefix = "h2:"

// hashRecoveryCode is the stored form of a recovery code: an HMAC keyed
// with the enrollment's TOTP secret. A code has only 30 bits, so an
// unkeyed hash in the log would give the code away to a brute force; keyed
// with the sealed secret, it gives nothing to a reader of the log.
func hashRecoveryCode(identityID, secret, code string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("postured recovery code hash\x00" + identityID + "\x00" + code))
	return recoveryHashPrefix + hex.EncodeToString(mac.Sum(nil))
}

// legacyRecoveryHash is the unkeyed hash of enrollments made before
// secrets were sealed; such enrollments keep working until they are
// replaced.
func legacyRecoveryHash(identityID, code string) string {
	sum := sha256.Sum256([]byte("postured recovery code\x00" + identityID + "\x00" + code))
	return hex.EncodeToString(sum[:])
}

// RecoveryHashes are the stored forms of recovery codes.
func RecoveryHashes(identityID, secret string, codes []string) []string {
	out := make([]string, len(codes))
	for i, code := range codes {
		out[i] = hashRecoveryCode(identityID, secret, code)
	}
	return out
}

// Remaining are an enrollment's unused recovery codes.
func Remaining(m posture.MFA, keys Keys) []string {
	var out []string
	for _, code := range RecoveryCodes(keys.Secret, keys.Nonce) {
		if slices.Contains(m.RecoveryCodes, hashRecoveryCode(m.IdentityID, keys.Secret, code)) ||
			slices.Contains(m.RecoveryCodes, legacyRecoveryHash(m.IdentityID, code)) {
			out = append(out, code)
		}
	}
	return out
}
