package client

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/pquerna/otp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/client/mfacode"
)

// qrCodeSize is the side of the QR code image, in pixels.
const qrCodeSize = 256

// HeaderMFACode carries a TOTP or recovery code where a body does not.
const HeaderMFACode = "mfa-validation-code"

// mfaOps are the MFA operations of the current identity. They read only
// its enrollment (MFAReader), and append through the writer under
// optimistic concurrency on the identity's MFA subject.
type mfaOps struct {
	store   MFAReader
	writer  *api.Writer
	secrets api.Secrets
	limiter *api.Limiter // nil: no limit
	issuer  string       // of provisioning URLs
	budget  *api.Budget  // the identity's writes (nil: no bound)
}

func (a *API) mfa() mfaOps {
	return mfaOps{store: a.Identities, writer: a.Writer, secrets: a.Secrets, limiter: a.limiter(), issuer: a.totpIssuer(), budget: a.Budget}
}

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

// openMFA opens an enrollment's sealed secret and recovery nonce (the clear
// legacy ones of an enrollment from an older log). No enrollment opens to
// the dummy secret, so that checking a code costs the same either way.
func (a mfaOps) openMFA(c echo.Context, m *posture.MFA) (mfacode.Keys, error) {
	if m == nil {
		return mfacode.NoEnrollment(), nil
	}
	ctx := c.Request().Context()
	secret, err := api.Reveal(ctx, a.secrets, m.IdentityID, posture.FieldMFASecret, m.SecretSealed, m.Secret)
	if err != nil {
		return mfacode.Keys{}, fmt.Errorf("MFA secret of %s: %w", m.IdentityID, err)
	}
	nonce, err := api.Reveal(ctx, a.secrets, m.IdentityID, posture.FieldMFARecoveryNonce, m.RecoveryNonceSealed, m.RecoveryNonce)
	if err != nil {
		return mfacode.Keys{}, fmt.Errorf("MFA recovery nonce of %s: %w", m.IdentityID, err)
	}
	return mfacode.Keys{Secret: secret, Nonce: nonce}, nil
}

// mfaOf reads the identity's enrollment; nil when it has none.
func (a mfaOps) of(identityID string) (*posture.MFA, error) {
	m, err := a.store.MFA(identityID)
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
	return &posture.Error{Code: posture.CodeMFAInvalidToken, Message: "the MFA code is missing or not valid (a code is accepted once, and not after a newer one; the API session that used it may read the recovery codes with it again)"}
}

// detailMFA is GET /current-identity/mfa. Until the enrollment is verified
// it shows what is needed to verify it: the provisioning URL and the
// recovery codes.
func (a mfaOps) detailMFA(c echo.Context) error {
	m, err := a.of(api.PrincipalOf(c).Identity.ID)
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
		if v.ProvisioningURL, err = mfacode.ProvisioningURL(*m, keys.Secret); err != nil {
			return err
		}
		v.RecoveryCodes = mfacode.Remaining(*m, keys)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return api.OK(c, v)
}

// enrollMFA is POST /current-identity/mfa: a new, unverified enrollment with
// a fresh secret and recovery codes. An identity that has one (verified or
// not) must remove it first: 409 MFA_EXISTS.
func (a mfaOps) enrollMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	raw := make([]byte, mfacode.SecretSize)
	if _, err := rand.Read(raw); err != nil {
		return err
	}
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw)
	nonce := posture.NewToken()
	ctx := c.Request().Context()
	sealedSecret, err := api.Seal(ctx, a.secrets, p.Identity.ID, posture.FieldMFASecret, secret)
	if err != nil {
		return err
	}
	sealedNonce, err := api.Seal(ctx, a.secrets, p.Identity.ID, posture.FieldMFARecoveryNonce, nonce)
	if err != nil {
		return err
	}
	m := posture.MFA{
		ID:                  posture.NewID(),
		IdentityID:          p.Identity.ID,
		SecretSealed:        sealedSecret,
		Issuer:              a.issuer,
		Account:             p.Identity.Name,
		RecoveryNonceSealed: sealedNonce,
	}
	m.RecoveryCodes = mfacode.RecoveryHashes(m.IdentityID, secret, mfacode.RecoveryCodes(secret, nonce))
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
func (a mfaOps) verifyMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := requiredCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := mfacode.Check(m, keys, code, p.Session.ID, false, now, false)
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
func (a mfaOps) deleteMFA(c echo.Context) error {
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
			_, ok := mfacode.Check(m, keys, code, p.Session.ID, false, now, true)
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
func (a mfaOps) mfaQRCode(c echo.Context) error {
	m, err := a.of(api.PrincipalOf(c).Identity.ID)
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
	u, err := mfacode.ProvisioningURL(*m, keys.Secret)
	if err != nil {
		return err
	}
	key, err := otp.NewKeyFromURL(u)
	if err != nil {
		return fmt.Errorf("MFA QR code: %w", err)
	}
	img, err := key.Image(qrCodeSize, qrCodeSize)
	if err != nil {
		return fmt.Errorf("MFA QR code: %w", err)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("MFA QR code: %w", err)
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	return c.Blob(http.StatusOK, "image/png", buf.Bytes())
}

// detailRecoveryCodes is GET /current-identity/mfa/recovery-codes: the
// unused recovery codes of a verified enrollment, for a current TOTP (in the
// mfa-validation-code header or the body), which it consumes.
func (a mfaOps) detailRecoveryCodes(c echo.Context) error {
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
			used, ok := mfacode.Check(m, keys, code, p.Session.ID, true, now, false)
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
	m, err := a.of(p.Identity.ID)
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
	v.RecoveryCodes = mfacode.Remaining(*m, keys)
	c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
	if v.RecoveryCodes == nil {
		v.RecoveryCodes = []string{}
	}
	return api.OK(c, v)
}

// regenerateRecoveryCodes is POST /current-identity/mfa/recovery-codes with
// a current TOTP or an unused recovery code: twenty new codes replace all
// the old ones.
func (a mfaOps) regenerateRecoveryCodes(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := readCode(c)
	if err != nil {
		return err
	}
	nonce := posture.NewToken()
	sealedNonce, err := api.Seal(c.Request().Context(), a.secrets, p.Identity.ID, posture.FieldMFARecoveryNonce, nonce)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := mfacode.Check(m, keys, code, p.Session.ID, false, now, true)
			if m == nil || !m.Verified {
				return nil, &posture.Error{Code: posture.CodeNotFound, Message: "the current identity has no verified MFA enrollment"}
			}
			if !ok {
				*failed = true
				return nil, invalidToken()
			}
			return []posture.Payload{posture.MFARecoveryCodesReplaced{
				IdentityID: m.IdentityID, RecoveryNonceSealed: sealedNonce,
				RecoveryCodes: mfacode.RecoveryHashes(m.IdentityID, keys.Secret, mfacode.RecoveryCodes(keys.Secret, nonce)), Used: used,
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
func (a mfaOps) authenticateMFA(c echo.Context) error {
	p := api.PrincipalOf(c)
	code, err := requiredCode(c)
	if err != nil {
		return err
	}
	err = a.withCode(c, func(now time.Time, failed *bool) error {
		return a.mfaChange(c, p.Identity.ID, func(m *posture.MFA) ([]posture.Payload, error) {
			keys, err := a.openMFA(c, m)
			if err != nil {
				return nil, err
			}
			used, ok := mfacode.Check(m, keys, code, p.Session.ID, false, now, true)
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
// the source has no failure left, and a wrong code counts as a failure; an
// operation that ends otherwise (no MFA to check against, a conflict)
// counts neither way.
func (a mfaOps) withCode(c echo.Context, run func(now time.Time, failed *bool) error) error {
	limiter := a.limiter
	subject := api.IdentitySubject(api.PrincipalOf(c).Identity.ID)
	if err := limiter.Allow(c, subject); err != nil {
		return err
	}
	failed := false
	err := run(a.writer.Now(), &failed)
	switch {
	case failed:
		limiter.Failed(c, subject)
	case err == nil:
		limiter.Succeeded(c, subject)
	default:
		limiter.Released(c, subject)
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
// returns once the projection has applied the change (api.Writer.ChangeSubject).
func (a mfaOps) mfaChange(c echo.Context, identityID string, decide func(*posture.MFA) ([]posture.Payload, error)) error {
	return a.writer.ChangeSubject(c, posture.SubjectFor(posture.SubjectMFA, identityID), api.Budgeted(c, a.budget, identityID, func() ([]posture.Payload, error) {
		m, err := a.of(identityID)
		if err != nil {
			return nil, err
		}
		return decide(m)
	}))
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

// requiredCode is readCode where the operation's body requires a code: a
// request without one is refused as a schema violation, as the OpenZiti
// controller's validation refuses it, before any code is checked.
func requiredCode(c echo.Context) (string, error) {
	code, err := readCode(c)
	if err == nil && code == "" {
		err = posture.Invalid("code", "is required", nil)
	}
	return code, err
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
