package client

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"
	qrcode "github.com/skip2/go-qrcode"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TOTP parameters (RFC 6238, as authenticator apps expect them).
const (
	mfaSecretSize     = 10 // bytes
	mfaPeriod         = 30 // seconds
	mfaDigits         = otp.DigitsSix
	mfaSkew           = 1 // periods accepted either side of the current one
	recoveryCodeCount = 20
	recoveryCodeLen   = 6 // base32 characters
	qrCodeSize        = 256
)

// HeaderMFACode carries a TOTP or recovery code where a body does not.
const HeaderMFACode = "mfa-validation-code"

// mfaMaxConflicts bounds the retries of an MFA change that keeps losing the
// race for the identity's MFA subject.
const mfaMaxConflicts = 20

type mfaView struct {
	ID              string       `json:"id"`
	IsVerified      bool         `json:"isVerified"`
	ProvisioningURL string       `json:"provisioningUrl,omitempty"`
	RecoveryCodes   []string     `json:"recoveryCodes,omitempty"`
	CreatedAt       api.Time     `json:"createdAt"`
	UpdatedAt       api.Time     `json:"updatedAt"`
	Tags            posture.Tags `json:"tags"`
	Links           api.Links    `json:"_links"`
}

func newMFAView(m posture.MFA) mfaView {
	return mfaView{
		ID: m.ID, IsVerified: m.Verified, CreatedAt: api.Time(m.CreatedAt), UpdatedAt: api.Time(m.UpdatedAt),
		Tags: posture.Tags{}, Links: api.Links{"self": {Href: "./current-identity/mfa"}},
	}
}

// mfaKeys are an enrollment's opened secrets.
type mfaKeys struct {
	secret string // base32 TOTP secret
	nonce  string // recovery nonce
}

// openMFA opens an enrollment's sealed secret and recovery nonce (the clear
// legacy ones of an enrollment from an older log). No enrollment opens to
// the dummy secret, so that checking a code costs the same either way.
func (a *API) openMFA(c echo.Context, m *posture.MFA) (mfaKeys, error) {
	if m == nil {
		return mfaKeys{secret: dummySecret}, nil
	}
	ctx := c.Request().Context()
	secret, err := api.Reveal(ctx, a.Secrets, m.IdentityID, posture.FieldMFASecret, m.SecretSealed, m.Secret)
	if err != nil {
		return mfaKeys{}, fmt.Errorf("MFA secret of %s: %w", m.IdentityID, err)
	}
	nonce, err := api.Reveal(ctx, a.Secrets, m.IdentityID, posture.FieldMFARecoveryNonce, m.RecoveryNonceSealed, m.RecoveryNonce)
	if err != nil {
		return mfaKeys{}, fmt.Errorf("MFA recovery nonce of %s: %w", m.IdentityID, err)
	}
	return mfaKeys{secret: secret, nonce: nonce}, nil
}

// mfaOf reads the identity's enrollment; nil when it has none.
func (a *API) mfaOf(identityID string) (*posture.MFA, error) {
	m, err := a.Identities.MFA(identityID)
	if errors.Is(err, posture.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func noEnrollment() error {
	return &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no MFA enrollment"}
}

func invalidToken() error {
	return &posture.Error{Code: posture.CodeMFAInvalidToken, Message: "the MFA code is not valid (codes are accepted once)"}
}

// detailMFA is GET /current-identity/mfa. Until the enrollment is verified
// it shows what is needed to verify it: the provisioning URL and the
// recovery codes.
func (a *API) detailMFA(c echo.Context) error {
	m, err := a.mfaOf(api.PrincipalOf(c).Identity.ID)
	if err != nil {
		return err
	}
	if m == nil {
		return noEnrollment()
	}
	v := newMFAView(*m)
	if !m.Verified {
		keys, err := a.openMFA(c, m)
		if err != nil {
			return err
		}
		if v.ProvisioningURL, err = provisioningURL(*m, keys.secret); err != nil {
			return err
		}
		v.RecoveryCodes = remainingRecoveryCodes(*m, keys)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return api.OK(c, v)
}

// enrollMFA is POST /current-identity/mfa: a new, unverified enrollment with
// a fresh secret and recovery codes. An identity that has one (verified or
// not) must remove it first: 409 MFA_EXISTS.
func (a *API) enrollMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	raw := make([]byte, mfaSecretSize)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw)
	nonce := posture.NewToken()
	ctx := c.Request().Context()
	sealedSecret, err := api.Seal(ctx, a.Secrets, p.Identity.ID, posture.FieldMFASecret, secret)
	if err != nil {
		return err
	}
	sealedNonce, err := api.Seal(ctx, a.Secrets, p.Identity.ID, posture.FieldMFARecoveryNonce, nonce)
	if err != nil {
		return err
	}
	m := posture.MFA{
		ID:                  posture.NewID(),
		IdentityID:          p.Identity.ID,
		SecretSealed:        sealedSecret,
		Issuer:              a.totpIssuer(),
		Account:             p.Identity.Name,
		RecoveryNonceSealed: sealedNonce,
	}
	m.RecoveryCodes = recoveryHashes(m.IdentityID, secret, recoveryCodes(secret, nonce))
	err = a.mfaChange(c, p.Identity.ID, func(cur *posture.MFA) ([]posture.Payload, error) {
		if cur != nil {
			return nil, &posture.Error{Code: posture.CodeMFAExists, Message: "the current identity already has an MFA enrollment; remove it first"}
		}
		return []posture.Payload{posture.MFAEnrolled{MFA: m}}, nil
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.Envelope{Data: api.Created{ID: m.ID, Links: api.Links{"self": {Href: "./current-identity/mfa"}}}})
}

// verifyMFA is POST /current-identity/mfa/verify with {code}: a TOTP proves
// the enrollment, which completes it, and marks the current API session as
// having passed MFA.
func (a *API) verifyMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := checkCode(m, keys, code, now, false)
			if m == nil || m.Verified {
				return nil, &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no MFA enrollment waiting for verification"}
			}
			if !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{
				posture.MFAVerified{IdentityID: m.IdentityID, Used: used},
				posture.MFAPassed{IdentityID: m.IdentityID, APISessionID: p.Session.ID},
			}, nil
		})
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// deleteMFA is DELETE /current-identity/mfa. A verified enrollment needs a
// current TOTP or an unused recovery code in the mfa-validation-code header;
// an unverified one is removed with an empty code.
func (a *API) deleteMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			_, ok := checkCode(m, keys, code, now, true)
			if m == nil {
				return nil, noEnrollment()
			}
			if m.Verified && !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{posture.MFARemoved{IdentityID: m.IdentityID, By: posture.MFARemovedByUser}}, nil
		})
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// mfaQRCode is GET /current-identity/mfa/qr-code: the provisioning URL as a
// QR code (PNG) while the enrollment waits for verification; 404 otherwise.
func (a *API) mfaQRCode(c echo.Context) error {
	m, err := a.mfaOf(api.PrincipalOf(c).Identity.ID)
	if err != nil {
		return err
	}
	if m == nil || m.Verified {
		return &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no MFA enrollment waiting for verification"}
	}
	keys, err := a.openMFA(c, m)
	if err != nil {
		return err
	}
	u, err := provisioningURL(*m, keys.secret)
	if err != nil {
		return err
	}
	png, err := qrcode.Encode(u, qrcode.Medium, qrCodeSize)
	if err != nil {
		return err
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.Blob(http.StatusOK, "image/png", png)
}

// detailRecoveryCodes is GET /current-identity/mfa/recovery-codes: the
// unused recovery codes of a verified enrollment, for a current TOTP (in the
// mfa-validation-code header or the body), which it consumes.
func (a *API) detailRecoveryCodes(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := checkCode(m, keys, code, now, false)
			if m == nil || !m.Verified {
				return nil, &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no verified MFA enrollment"}
			}
			if !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{posture.MFACodeUsed{IdentityID: m.IdentityID, Used: used}}, nil
		})
	})
	if err != nil {
		return err
	}
	m, err := a.mfaOf(p.Identity.ID)
	if err != nil {
		return err
	}
	if m == nil {
		return noEnrollment()
	}
	keys, err := a.openMFA(c, m)
	if err != nil {
		return err
	}
	v := newMFAView(*m)
	v.RecoveryCodes = remainingRecoveryCodes(*m, keys)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	if v.RecoveryCodes == nil {
		v.RecoveryCodes = []string{}
	}
	return api.OK(c, v)
}

// regenerateRecoveryCodes is POST /current-identity/mfa/recovery-codes with
// a current TOTP or an unused recovery code: twenty new codes replace all
// the old ones.
func (a *API) regenerateRecoveryCodes(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	nonce := posture.NewToken()
	sealedNonce, err := api.Seal(c.Request().Context(), a.Secrets, p.Identity.ID, posture.FieldMFARecoveryNonce, nonce)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := checkCode(m, keys, code, now, true)
			if m == nil || !m.Verified {
				return nil, &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no verified MFA enrollment"}
			}
			if !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{posture.MFARecoveryCodesReplaced{
				IdentityID: m.IdentityID, RecoveryNonceSealed: sealedNonce,
				RecoveryCodes: recoveryHashes(m.IdentityID, keys.secret, recoveryCodes(keys.secret, nonce)), Used: used,
			}}, nil
		})
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// authenticateMFA is POST /authenticate/mfa with {code}: a TOTP or an unused
// recovery code completes a partial API session and marks it as having
// passed MFA (a posture fact).
func (a *API) authenticateMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := checkCode(m, keys, code, now, true)
			if m == nil || !m.Verified {
				return nil, &posture.Error{Code: posture.CodeMFANotEnrolled}
			}
			if !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{
				posture.MFACodeUsed{IdentityID: m.IdentityID, Used: used},
				posture.MFAPassed{IdentityID: m.IdentityID, APISessionID: p.Session.ID},
			}, nil
		})
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// limiter is the failure limiter of logins and codes (nil, which limits
// nothing, without a login).
func (a *API) limiter() *api.Limiter {
	if a.Login == nil {
		return nil
	}
	return a.Login.Limiter
}

// withCode runs an operation that checks an MFA code of the caller's
// identity under the failure limiter: refused (429) while the identity or
// the source has no failure left, and a wrong code counts as a failure.
func (a *API) withCode(c echo.Context, run func(now time.Time, failed *bool) error) error {
	limiter := a.limiter()
	subject := api.IdentitySubject(api.PrincipalOf(c).Identity.ID)
	if err := limiter.Allow(c, subject); err != nil {
		return err
	}
	failed := false
	err := run(a.Writer.Now(), &failed)
	switch {
	case failed:
		limiter.Failed(c, subject)
	case err == nil:
		limiter.Succeeded(c, subject)
	}
	return err
}

// mfaChange makes a change of an identity's MFA enrollment under optimistic
// concurrency on its MFA subject: decide sees the enrollment as of the
// subject's last event (nil: none) and returns the events of the change; the
// first must be on the MFA subject and is appended only if no other MFA
// event of the identity came in between, the others (mfa.passed) follow.
// On a lost race decide runs again on the newer state, so that a code is
// accepted once even when two requests (or two nodes) race with it. It
// returns once the projection has applied the change.
func (a *API) mfaChange(c echo.Context, identityID string, decide func(*posture.MFA) ([]posture.Payload, error)) error {
	ctx := c.Request().Context()
	w := a.Writer
	st := api.StampOf(c)
	subject := posture.SubjectFor(posture.SubjectMFA, identityID)
	for range mfaMaxConflicts {
		last, err := w.Log.LastSubjectSeq(ctx, subject)
		if err != nil {
			return err
		}
		if err := w.Barrier.WaitFor(ctx, last); err != nil {
			return err
		}
		m, err := a.mfaOf(identityID)
		if err != nil {
			return err
		}
		payloads, err := decide(m)
		if err != nil || len(payloads) == 0 {
			return err
		}
		if payloads[0].Subject() != subject {
			return fmt.Errorf("an MFA change must start with an event on %s, not %s", subject, payloads[0].Subject())
		}
		var seq uint64
		for i, p := range payloads {
			e, err := w.Event(st, p)
			if err != nil {
				return err
			}
			if i == 0 {
				seq, err = w.Log.AppendIfLast(ctx, e, last)
			} else {
				seq, err = w.Log.Append(ctx, e)
			}
			if i == 0 && posture.CodeOf(err) == posture.CodeConflict {
				break
			}
			if err != nil {
				return err
			}
		}
		if seq == 0 {
			continue // lost the race: decide again on the newer state
		}
		return w.Barrier.WaitFor(ctx, seq)
	}
	return &posture.Error{Code: posture.CodeConflict, Message: fmt.Sprintf("the MFA change lost %d races; retry", mfaMaxConflicts)}
}

type codeRequest struct {
	Code *string `json:"code"`
}

// readCode reads an MFA code from the body ({code}) or, failing that, from
// the mfa-validation-code header.
func readCode(c echo.Context) (string, error) {
	var req codeRequest
	if err := api.Decode(c, &req); err != nil {
		return "", err
	}
	if req.Code != nil {
		return strings.TrimSpace(*req.Code), nil
	}
	return strings.TrimSpace(c.Request().Header.Get(HeaderMFACode)), nil
}

// totpIssuer is the provisioning URL's issuer: the advertised host.
func (a *API) totpIssuer() string {
	if a.Info != nil && a.Info.Advertise != "" {
		if host, _, err := net.SplitHostPort(a.Info.Advertise); err == nil && host != "" {
			return host
		}
		return a.Info.Advertise
	}
	return "postured"
}

// provisioningURL is the otpauth URL of an enrollment with its opened
// secret, which authenticator apps read (usually from its QR code).
func provisioningURL(m posture.MFA, secret string) (string, error) {
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return "", fmt.Errorf("MFA secret of %s: %w", m.IdentityID, err)
	}
	account := m.Account
	if account == "" {
		account = m.IdentityID
	}
	key, err := totp.Generate(totp.GenerateOpts{
		Issuer: m.Issuer, AccountName: account, Period: mfaPeriod, SecretSize: mfaSecretSize,
		Secret: raw, Digits: mfaDigits, Algorithm: otp.AlgorithmSHA1,
	})
	if err != nil {
		return "", err
	}
	return key.URL(), nil
}

// dummySecret and dummyRecoveryHash stand in when there is no enrollment, so
// that checking a code costs the same either way.
var (
	dummySecret       = base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(make([]byte, mfaSecretSize))
	dummyRecoveryHash = hashRecoveryCode("", dummySecret, "")
)

// checkCode checks a TOTP (and, when recovery is set, a recovery code)
// against an enrollment (nil: none, which matches nothing). A TOTP of the
// current period or one either side is accepted if its time step is later
// than the last accepted one; a recovery code if it is unused. It returns
// what the code consumes. Its work does not depend on whether or where the
// code matches, nor on whether there is an enrollment.
func checkCode(m *posture.MFA, keys mfaKeys, code string, now time.Time, recovery bool) (posture.MFACode, bool) {
	secret, last, hashes, identityID := keys.secret, int64(math.MaxInt64), []string(nil), ""
	if m != nil {
		last, hashes, identityID = m.LastCounter, m.RecoveryCodes, m.IdentityID
	}
	var used posture.MFACode
	step := now.Unix() / mfaPeriod
	for s := step - mfaSkew; s <= step+mfaSkew; s++ {
		want, err := hotp.GenerateCodeCustom(secret, uint64(s), hotp.ValidateOpts{Digits: mfaDigits, Algorithm: otp.AlgorithmSHA1})
		match := err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1
		if match && s > last {
			used.Counter = s
		}
	}
	got := hashRecoveryCode(identityID, secret, strings.ToUpper(code))
	gotLegacy := legacyRecoveryHash(identityID, strings.ToUpper(code))
	matched := ""
	for i := range max(len(hashes), recoveryCodeCount) {
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

// recoveryCodes derives an enrollment's recovery codes from its secret and
// a nonce: twenty codes of six base32 characters.
func recoveryCodes(secret, nonce string) []string {
	out := make([]string, recoveryCodeCount)
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

func recoveryHashes(identityID, secret string, codes []string) []string {
	out := make([]string, len(codes))
	for i, code := range codes {
		out[i] = hashRecoveryCode(identityID, secret, code)
	}
	return out
}

// remainingRecoveryCodes are an enrollment's unused recovery codes.
func remainingRecoveryCodes(m posture.MFA, keys mfaKeys) []string {
	var out []string
	for _, code := range recoveryCodes(keys.secret, keys.nonce) {
		if slices.Contains(m.RecoveryCodes, hashRecoveryCode(m.IdentityID, keys.secret, code)) ||
			slices.Contains(m.RecoveryCodes, legacyRecoveryHash(m.IdentityID, code)) {
			out = append(out, code)
		}
	}
	return out
}
