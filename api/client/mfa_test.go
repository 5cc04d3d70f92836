package client

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pquerna/otp/totp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
	"github.com/seed-0809debe/posture/api/client/mfacode"
)

// The laptop's TOTP secret and recovery nonce in the MFA tests.
const (
	mfaSecret = "JBSWY3DPEHPK3PXP"
	mfaNonce  = "nonce-1"
)

// withMFA gives the laptop an MFA enrollment, verified or not, whose
// secrets are sealed; lastCounter is the time step of the last code used.
func withMFA(verified bool, lastCounter int64) func(t *testing.T, s *memStore) {
	return func(t *testing.T, s *memStore) {
		s.mfa["ident1"] = posture.MFA{ID: "mfa1", IdentityID: "ident1", Issuer: "ctrl.example", Account: "laptop",
			SecretSealed:        "sealed:ident1:" + posture.FieldMFASecret + ":" + mfaSecret,
			RecoveryNonceSealed: "sealed:ident1:" + posture.FieldMFARecoveryNonce + ":" + mfaNonce,
			RecoveryCodes:       mfacode.RecoveryHashes("ident1", mfaSecret, mfacode.RecoveryCodes(mfaSecret, mfaNonce)),
			Verified:            verified, LastCounter: lastCounter, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	}
}

// code is the laptop's TOTP at handlerNow.
func code(t *testing.T) string {
	t.Helper()
	c, err := totp.GenerateCode(mfaSecret, handlerNow)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestMFAHandlers: enrolling, verifying, reading the QR code and the
// recovery codes, removing, and completing a partial API session with a
// code; each code is accepted once, and the secret never leaves sealed.
func TestMFAHandlers(t *testing.T) {
	totpCode := code(t)
	step := handlerNow.Unix() / mfacode.Period
	recovery := mfacode.RecoveryCodes(mfaSecret, mfaNonce)[3]
	var (
		enrolled  = posture.MFAEnrolled{}.EventType()
		verified  = posture.MFAVerified{}.EventType()
		passed    = posture.MFAPassed{}.EventType()
		removed   = posture.MFARemoved{}.EventType()
		used      = posture.MFACodeUsed{}.EventType()
		replaced  = posture.MFARecoveryCodesReplaced{}.EventType()
		header    = map[string]string{HeaderMFACode: totpCode}
		withCode  = `{"code":"` + totpCode + `"}`
		noMFA     = func(*testing.T, *memStore) {}
		waiting   = withMFA(false, 0)
		confirmed = withMFA(true, 0)
	)
	runClientCases(t, caller, []clientCase{
		{noMFA, apitest.Case{Name: "detailMFA: none", Method: http.MethodGet, Path: "/current-identity/mfa", Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{waiting, apitest.Case{Name: "detailMFA: waiting for verification shows what verifies it", Method: http.MethodGet, Path: "/current-identity/mfa", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v mfaView
				r.DataInto(t, &v)
				if !strings.HasPrefix(v.ProvisioningURL, "otpauth://totp/") || !strings.Contains(v.ProvisioningURL, "secret="+mfaSecret) ||
					len(v.RecoveryCodes) != mfacode.RecoveryCount || v.IsVerified || r.Header.Get("Cache-Control") != "no-store" {
					t.Fatalf("mfa %s %v", r.Data, r.Header)
				}
			}}},
		{confirmed, apitest.Case{Name: "detailMFA: verified shows no secret", Method: http.MethodGet, Path: "/current-identity/mfa", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if s := string(r.Data); strings.Contains(s, "provisioningUrl") || strings.Contains(s, "recoveryCodes") || strings.Contains(s, mfaSecret) {
					t.Fatalf("mfa %s", s)
				}
			}}},
		{noMFA, apitest.Case{Name: "enrollMFA: a sealed secret and hashed recovery codes", Method: http.MethodPost, Path: "/current-identity/mfa",
			Status: http.StatusCreated, Appended: []string{enrolled},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				m := payload[posture.MFAEnrolled](t, log).MFA
				if m.IdentityID != "ident1" || m.Secret != "" || !strings.HasPrefix(m.SecretSealed, "sealed:ident1:"+posture.FieldMFASecret+":") ||
					len(m.RecoveryCodes) != mfacode.RecoveryCount || m.Issuer != "ctrl.example" || m.Account != "laptop" || m.Verified {
					t.Fatalf("enrolled %+v", m)
				}
			}}},
		{waiting, apitest.Case{Name: "enrollMFA: one exists", Method: http.MethodPost, Path: "/current-identity/mfa", Status: http.StatusConflict, Code: posture.CodeMFAExists}},
		{waiting, apitest.Case{Name: "verifyMFA: the current code", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: withCode,
			Status: http.StatusOK, Appended: []string{verified, passed},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if p := log.Payload(t, 0).(posture.MFAVerified); p.Used.Counter != step {
					t.Fatalf("verified with %+v, want the step %d", p.Used, step)
				}
				if p := payload[posture.MFAPassed](t, log); p.APISessionID != "apis1" {
					t.Fatalf("passed %+v", p)
				}
			}}},
		{waiting, apitest.Case{Name: "verifyMFA: a wrong code", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: `{"code":"000000"}`,
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{withMFA(false, step), apitest.Case{Name: "verifyMFA: a code used before", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: withCode,
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{waiting, apitest.Case{Name: "verifyMFA: a recovery code does not verify", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: `{"code":"` + recovery + `"}`,
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{confirmed, apitest.Case{Name: "verifyMFA: already verified", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: withCode,
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{waiting, apitest.Case{Name: "verifyMFA: a code of the wrong type", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: `{"code":123456}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody}},
		{waiting, apitest.Case{Name: "verifyMFA: no code", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: `{}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "code"}},
		{confirmed, apitest.Case{Name: "authenticateMFA: no code", Method: http.MethodPost, Path: "/authenticate/mfa", Body: `{"code":"  "}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "code"}},
		{waiting, apitest.Case{Name: "verifyMFA: malformed JSON", Method: http.MethodPost, Path: "/current-identity/mfa/verify", Body: `{"code":`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody}},
		{waiting, apitest.Case{Name: "deleteMFA: an unverified one needs no code", Method: http.MethodDelete, Path: "/current-identity/mfa", Status: http.StatusOK, Appended: []string{removed}}},
		{confirmed, apitest.Case{Name: "deleteMFA: a verified one needs a code", Method: http.MethodDelete, Path: "/current-identity/mfa",
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{confirmed, apitest.Case{Name: "deleteMFA: with a recovery code in the header", Method: http.MethodDelete, Path: "/current-identity/mfa",
			Header: map[string]string{HeaderMFACode: strings.ToLower(recovery)}, Status: http.StatusOK, Appended: []string{removed}}},
		{noMFA, apitest.Case{Name: "deleteMFA: none", Method: http.MethodDelete, Path: "/current-identity/mfa", Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{waiting, apitest.Case{Name: "mfaQRCode: a PNG while waiting for verification", Method: http.MethodGet, Path: "/current-identity/mfa/qr-code", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if r.Header.Get("Content-Type") != "image/png" || !strings.HasPrefix(string(r.Body), "\x89PNG") {
					t.Fatalf("QR code %v %q", r.Header, r.Body[:min(8, len(r.Body))])
				}
			}}},
		{confirmed, apitest.Case{Name: "mfaQRCode: none once verified", Method: http.MethodGet, Path: "/current-identity/mfa/qr-code", Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{confirmed, apitest.Case{Name: "detailRecoveryCodes: for the current code, which it consumes", Method: http.MethodGet, Path: "/current-identity/mfa/recovery-codes",
			Header: header, Status: http.StatusOK, Appended: []string{used},
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v mfaView
				r.DataInto(t, &v)
				if len(v.RecoveryCodes) != mfacode.RecoveryCount || v.RecoveryCodes[3] != recovery {
					t.Fatalf("codes %s", r.Data)
				}
			}}},
		{confirmed, apitest.Case{Name: "detailRecoveryCodes: no code", Method: http.MethodGet, Path: "/current-identity/mfa/recovery-codes",
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{waiting, apitest.Case{Name: "detailRecoveryCodes: not verified", Method: http.MethodGet, Path: "/current-identity/mfa/recovery-codes", Header: header,
			Status: http.StatusNotFound, Code: posture.CodeNotFound}},
		{confirmed, apitest.Case{Name: "regenerateRecoveryCodes: with a recovery code", Method: http.MethodPost, Path: "/current-identity/mfa/recovery-codes",
			Body: `{"code":"` + recovery + `"}`, Status: http.StatusOK, Appended: []string{replaced},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				p := payload[posture.MFARecoveryCodesReplaced](t, log)
				if p.Used.RecoveryHash == "" || len(p.RecoveryCodes) != mfacode.RecoveryCount || !strings.HasPrefix(p.RecoveryNonceSealed, "sealed:ident1:") {
					t.Fatalf("replaced %+v", p)
				}
			}}},
		{confirmed, apitest.Case{Name: "authenticateMFA: the current code completes the API session", Method: http.MethodPost, Path: "/authenticate/mfa", Body: withCode,
			Status: http.StatusOK, Appended: []string{used, passed}}},
		{confirmed, apitest.Case{Name: "authenticateMFA: a recovery code", Method: http.MethodPost, Path: "/authenticate/mfa", Body: `{"code":"` + recovery + `"}`,
			Status: http.StatusOK, Appended: []string{used, passed}}},
		{confirmed, apitest.Case{Name: "authenticateMFA: a wrong code", Method: http.MethodPost, Path: "/authenticate/mfa", Body: `{"code":"123456"}`,
			Status: http.StatusBadRequest, Code: posture.CodeMFAInvalidToken}},
		{waiting, apitest.Case{Name: "authenticateMFA: not verified", Method: http.MethodPost, Path: "/authenticate/mfa", Body: withCode,
			Status: http.StatusConflict, Code: posture.CodeMFANotEnrolled}},
	})
}
