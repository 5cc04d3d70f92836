package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/makiuchi-d/gozxing"
	gozxingqr "github.com/makiuchi-d/gozxing/qrcode"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// stepClock is a clock that tests move by hand (safe for concurrent use).
type stepClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStepClock(t time.Time) *stepClock { return &stepClock{now: t} }

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// useFakeClock gives the node to be started a fake clock, its one clock
// (event times, TOTP checks, session expiry, timers), which the test moves:
// a test needs no sleep to get a fresh TOTP period.
func useFakeClock(cfg *serveCmd) *clockwork.FakeClock {
	clk := clockwork.NewFakeClockAt(time.Now())
	cfg.clock = clk
	return clk
}

// testClock is a clock a test moves (stepClock, clockwork.FakeClock).
type testClock interface {
	Now() time.Time
	Advance(time.Duration)
}

// totpAt is the TOTP of a secret at a time, computed as an authenticator app
// does.
func totpAt(t testing.TB, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: 30, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// wrongCode is a six-digit code that no period near the time accepts.
func wrongCode(t testing.TB, secret string, at time.Time) string {
	valid := map[string]bool{}
	for d := -2; d <= 2; d++ {
		valid[totpAt(t, secret, at.Add(time.Duration(d)*30*time.Second))] = true
	}
	for _, c := range []string{"000000", "111111", "222222", "333333", "444444", "555555"} {
		if !valid[c] {
			return c
		}
	}
	t.Fatal("no wrong code")
	return ""
}

type mfaDetail struct {
	ID              string   `json:"id"`
	IsVerified      bool     `json:"isVerified"`
	ProvisioningURL string   `json:"provisioningUrl"`
	RecoveryCodes   []string `json:"recoveryCodes"`
}

func (n *testNode) mfaDetail(t testing.TB, tok string) mfaDetail {
	t.Helper()
	r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET mfa: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var d mfaDetail
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// enrollMFA starts an enrollment for the token's identity and returns it
// with its TOTP secret.
func (n *testNode) enrollMFA(t testing.TB, tok string) (mfaDetail, string) {
	t.Helper()
	r := n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa", tok, nil)
	if r.Status != http.StatusCreated {
		t.Fatalf("enroll: %d %s", r.Status, r.Body)
	}
	d := n.mfaDetail(t, tok)
	key, err := otp.NewKeyFromURL(d.ProvisioningURL)
	if err != nil {
		t.Fatalf("provisioning URL %q: %v", d.ProvisioningURL, err)
	}
	return d, key.Secret()
}

// enrollAndVerifyMFA enrolls the identity and verifies the enrollment, then
// moves the clock to the next TOTP period.
func (n *testNode) enrollAndVerifyMFA(t testing.TB, tok string, clk testClock) (mfaDetail, string) {
	t.Helper()
	d, secret := n.enrollMFA(t, tok)
	if r := n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	clk.Advance(30 * time.Second)
	return d, secret
}

// loginSession logs in with a password and returns the token and the API
// session the response shows.
func (n *testNode) loginSession(t testing.TB, username, password string) (string, api.APISessionView) {
	t.Helper()
	r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate?method=password", "", map[string]string{"username": username, "password": password})
	if r.Status != http.StatusOK {
		t.Fatalf("login %s: %d %s", username, r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var s api.APISessionView
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return r.Header.Get(api.HeaderSession), s
}

var base32Code = regexp.MustCompile(`^[A-Z2-7]{6}$`)

// TestMFALifecycle walks an identity's MFA from enrollment to removal over
// HTTPS: enroll, QR code, verify, login needing MFA (a partial session gets
// 401 elsewhere), replayed and wrong codes, recovery codes used once,
// regeneration invalidating the old codes, disabling, and an admin's
// removal.
func TestMFALifecycle(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	tok := n.createUser(t, "mfa-user", "mfa-password", false)
	var me struct {
		ID           string `json:"id"`
		IsMfaEnabled bool   `json:"isMfaEnabled"`
	}
	readMe := func(tok string) {
		t.Helper()
		r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity", tok, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("current-identity: %d %s", r.Status, r.Body)
		}
		data, _ := r.envelope(t)
		if err := json.Unmarshal(data, &me); err != nil {
			t.Fatal(err)
		}
	}
	readMe(tok)
	if me.IsMfaEnabled {
		t.Fatal("MFA enabled before enrollment")
	}

	// Nothing to show before enrollment.
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa/qr-code", tok, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": "123456"}), 404, posture.CodeNotFound, "")

	// Enroll: the provisioning URL and twenty recovery codes are shown
	// until the enrollment is verified. Enrolling twice is a conflict.
	enrolled, secret := n.enrollMFA(t, tok)
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa", tok, nil), 409, posture.CodeMFAExists, "")
	key, _ := otp.NewKeyFromURL(enrolled.ProvisioningURL)
	if key.Type() != "totp" || key.Issuer() != "127.0.0.1" || key.AccountName() != "mfa-user" || key.Period() != 30 ||
		key.Digits() != otp.DigitsSix || key.Algorithm() != otp.AlgorithmSHA1 || len(secret) != 16 {
		t.Fatalf("provisioning URL %q", enrolled.ProvisioningURL)
	}
	if enrolled.IsVerified || len(enrolled.RecoveryCodes) != 20 {
		t.Fatalf("enrollment %+v", enrolled)
	}
	for _, c := range enrolled.RecoveryCodes {
		if !base32Code.MatchString(c) {
			t.Fatalf("recovery code %q is not six base32 characters", c)
		}
	}

	// The QR code is a PNG that decodes to the provisioning URL.
	r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa/qr-code", tok, nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("qr-code: %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	if got := decodeQR(t, r.Body); got != enrolled.ProvisioningURL {
		t.Fatalf("QR code holds %q, want %q", got, enrolled.ProvisioningURL)
	}

	// Verify: a wrong code and a recovery code are refused, a TOTP is
	// accepted; then the secret and the codes are no longer shown.
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": wrongCode(t, secret, clk.Now())}), 400, posture.CodeMFAInvalidToken, "")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": enrolled.RecoveryCodes[0]}), 400, posture.CodeMFAInvalidToken, "")
	verifyCode := totpAt(t, secret, clk.Now())
	if r := n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": verifyCode}); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	if d := n.mfaDetail(t, tok); !d.IsVerified || d.ProvisioningURL != "" || d.RecoveryCodes != nil {
		t.Fatalf("verified enrollment shows %+v", d)
	}
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa/qr-code", tok, nil), 404, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa", tok, nil), 409, posture.CodeMFAExists, "")
	readMe(tok)
	if !me.IsMfaEnabled {
		t.Fatal("current-identity: isMfaEnabled is false after verification")
	}
	if d := n.detail(t, admin, "identities", me.ID); d["isMfaEnabled"] != true {
		t.Fatalf("management identity: isMfaEnabled = %v", d["isMfaEnabled"])
	}

	// Login now needs MFA: the session is partial, with an authQueries
	// entry, and only the partial-session operations work.
	partial, s := n.loginSession(t, "mfa-user", "mfa-password")
	if !s.IsMFARequired || s.IsMFAComplete || len(s.AuthQueries) != 1 || s.AuthQueries[0] != api.MFAAuthQuery {
		t.Fatalf("partial session %+v", s)
	}
	for _, rt := range []struct{ method, path string }{
		{http.MethodGet, api.ClientBase + "/current-identity"},
		{http.MethodGet, api.ClientBase + "/current-identity/authenticators"},
		{http.MethodDelete, api.ClientBase + "/current-identity/mfa"},
		{http.MethodGet, api.ClientBase + "/current-identity/mfa/recovery-codes"},
		{http.MethodGet, mgmt + "/identities"},
	} {
		expectError(t, n.do(t, rt.method, rt.path, partial, nil), 401, posture.CodeUnauthorized, "")
	}
	for _, path := range []string{"/current-api-session", "/current-identity/mfa"} {
		if r := n.do(t, http.MethodGet, api.ClientBase+path, partial, nil); r.Status != http.StatusOK {
			t.Fatalf("partial session: GET %s: %d %s", path, r.Status, r.Body)
		}
	}

	// A wrong code is 400 MFA_INVALID_TOKEN; the TOTP that verified the
	// enrollment, replayed in the same period, is refused too.
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": wrongCode(t, secret, clk.Now())}), 400, posture.CodeMFAInvalidToken, "")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": verifyCode}), 400, posture.CodeMFAInvalidToken, "")

	// A recovery code completes the session, once.
	recovery := enrolled.RecoveryCodes[3]
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": recovery}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa with a recovery code: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity", partial, nil); r.Status != http.StatusOK {
		t.Fatalf("completed session: current-identity %d %s", r.Status, r.Body)
	}
	other, _ := n.loginSession(t, "mfa-user", "mfa-password")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", other, map[string]string{"code": recovery}), 400, posture.CodeMFAInvalidToken, "")

	// A TOTP of the next period completes the other session.
	clk.Advance(30 * time.Second)
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", other, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa with a TOTP: %d %s", r.Status, r.Body)
	}
	cur := n.do(t, http.MethodGet, api.ClientBase+"/current-api-session", other, nil)
	if data, _ := cur.envelope(t); !bytes.Contains(data, []byte(`"isMfaComplete":true`)) || !bytes.Contains(data, []byte(`"authQueries":[]`)) {
		t.Fatalf("completed session: %s", data)
	}

	// Recovery codes are viewed with a TOTP (header or body): the used one
	// is gone.
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa/recovery-codes", tok, nil), 400, posture.CodeMFAInvalidToken, "")
	clk.Advance(30 * time.Second)
	codes := n.recoveryCodes(t, tok, totpAt(t, secret, clk.Now()))
	if len(codes) != 19 || slices.Contains(codes, recovery) || !slices.Contains(codes, enrolled.RecoveryCodes[0]) {
		t.Fatalf("recovery codes after one use: %v", codes)
	}

	// Regenerating (here with a recovery code) replaces every code.
	if r := n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/recovery-codes", tok, map[string]string{"code": codes[0]}); r.Status != http.StatusOK {
		t.Fatalf("regenerate: %d %s", r.Status, r.Body)
	}
	clk.Advance(30 * time.Second)
	fresh := n.recoveryCodes(t, tok, totpAt(t, secret, clk.Now()))
	if len(fresh) != 20 {
		t.Fatalf("regenerated codes: %v", fresh)
	}
	for _, c := range fresh {
		if slices.Contains(enrolled.RecoveryCodes, c) {
			t.Fatalf("regenerated codes keep %q", c)
		}
	}
	third, _ := n.loginSession(t, "mfa-user", "mfa-password")
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", third, map[string]string{"code": codes[5]}), 400, posture.CodeMFAInvalidToken, "")
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", third, map[string]string{"code": fresh[7]}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa with a regenerated code: %d %s", r.Status, r.Body)
	}

	// Disabling needs a valid code; then login needs no MFA.
	expectError(t, n.do(t, http.MethodDelete, api.ClientBase+"/current-identity/mfa", tok, nil), 400, posture.CodeMFAInvalidToken, "")
	clk.Advance(30 * time.Second)
	if r := n.doHeader(t, http.MethodDelete, api.ClientBase+"/current-identity/mfa", tok, "mfa-validation-code", totpAt(t, secret, clk.Now())); r.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil), 404, posture.CodeNotFound, "")
	if _, s := n.loginSession(t, "mfa-user", "mfa-password"); s.IsMFARequired {
		t.Fatal("login needs MFA after it was disabled")
	}

	// An unverified enrollment is removed with an empty code.
	n.enrollMFA(t, tok)
	if r := n.do(t, http.MethodDelete, api.ClientBase+"/current-identity/mfa", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("remove an unverified enrollment: %d %s", r.Status, r.Body)
	}

	// An administrator removes a verified enrollment; removing none is
	// also a success.
	n.enrollAndVerifyMFA(t, tok, clk)
	if _, s := n.loginSession(t, "mfa-user", "mfa-password"); !s.IsMFARequired {
		t.Fatal("login needs no MFA after re-enrollment")
	}
	for range 2 {
		if r := n.do(t, http.MethodDelete, mgmt+"/identities/"+me.ID+"/mfa", admin, nil); r.Status != http.StatusOK {
			t.Fatalf("admin removal: %d %s", r.Status, r.Body)
		}
	}
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity/mfa", tok, nil), 404, posture.CodeNotFound, "")
	if d := n.detail(t, admin, "identities", me.ID); d["isMfaEnabled"] != false {
		t.Fatalf("management identity after removal: isMfaEnabled = %v", d["isMfaEnabled"])
	}
	if _, s := n.loginSession(t, "mfa-user", "mfa-password"); s.IsMFARequired {
		t.Fatal("login needs MFA after the admin removed it")
	}
	expectError(t, n.do(t, http.MethodDelete, mgmt+"/identities/nosuchid0/mfa", admin, nil), 404, posture.CodeNotFound, "")
	// The identity's history names who removed it, once (the second
	// removal removed nothing), and that it removed the others itself.
	history, err := n.store.History(me.ID, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	byAdmin, byItself := 0, 0
	for _, h := range history {
		switch {
		case h.Kind != posture.HistoryCredential:
		case h.Summary == `MFA removed, by admin "admin"`:
			byAdmin++
		case h.Summary == "MFA removed, by the identity itself":
			byItself++
		}
	}
	if byAdmin != 1 || byItself == 0 {
		t.Fatalf("MFA removals in the history: %d by the admin, %d by the identity\n%v", byAdmin, byItself, history)
	}
}

// TestMFACodeAcceptedOnce races two partial sessions with the same TOTP:
// exactly one completes.
func TestMFACodeAcceptedOnce(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	tok := n.createUser(t, "race-user", "race-password", false)
	// A client verifies its enrollment, then reads its recovery codes with
	// the code it still shows.
	_, secret := n.enrollMFA(t, tok)
	verify := totpAt(t, secret, clk.Now())
	if r := n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": verify}); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	if codes := n.recoveryCodes(t, tok, verify); len(codes) != 20 {
		t.Fatalf("recovery codes with the verifying code: %v", codes)
	}
	clk.Advance(30 * time.Second)
	const sessions = 6
	toks := make([]string, sessions)
	for i := range toks {
		toks[i], _ = n.loginSession(t, "race-user", "race-password")
	}
	code := totpAt(t, secret, clk.Now())
	statuses := make([]int, sessions)
	var wg sync.WaitGroup
	for i := range toks {
		wg.Go(func() {
			statuses[i] = n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", toks[i], map[string]string{"code": code}).Status
		})
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusBadRequest:
		default:
			t.Fatalf("status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d sessions accepted one TOTP (statuses %v)", ok, statuses)
	}
	// The API session that used it may use it again (to read its recovery
	// codes, say); another still may not (one other: each refusal counts
	// towards the identity's limit of failed codes).
	winner := slices.Index(statuses, http.StatusOK)
	n.recoveryCodes(t, toks[winner], code)
	loser := (winner + 1) % sessions
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", toks[loser], map[string]string{"code": code}), 400, posture.CodeMFAInvalidToken, "")
	// A code of an earlier period than the last accepted one is refused
	// as well, though still within the skew window.
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", toks[0], map[string]string{"code": totpAt(t, secret, clk.Now().Add(-30*time.Second))}), 400, posture.CodeMFAInvalidToken, "")
}

func (n *testNode) recoveryCodes(t testing.TB, tok, code string) []string {
	t.Helper()
	r := n.doHeader(t, http.MethodGet, api.ClientBase+"/current-identity/mfa/recovery-codes", tok, "mfa-validation-code", code)
	if r.Status != http.StatusOK {
		t.Fatalf("recovery codes: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var d mfaDetail
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d.RecoveryCodes
}

// doHeader is do without a body and with one extra header.
func (n *testNode) doHeader(t testing.TB, method, path, token, header, value string) response {
	t.Helper()
	req, err := http.NewRequest(method, n.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderSession, token)
	req.Header.Set(header, value)
	resp, err := n.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}
}

// decodeQR reads the text of a QR code PNG.
func decodeQR(t testing.TB, data []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("QR code: not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 256 || b.Dy() != 256 {
		t.Fatalf("QR code is %v, want 256x256", b)
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := gozxingqr.NewQRCodeReader().Decode(bmp, nil)
	if err != nil {
		t.Fatalf("QR code does not decode: %v", err)
	}
	return res.GetText()
}

// An admin enrolls MFA and logs in with it on the management API alone, as
// the ziti CLI does: the password gives a partial API session whose
// authQuery points at ./authenticate/mfa, which the management API serves;
// until then the admin's operations are refused, after it they are
// allowed, and /current-identity names the admin.
func TestManagementLoginWithMFA(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	tok := n.createUser(t, "mfa-admin", "mfa-admin-password", true)
	if r := n.do(t, http.MethodPost, mgmt+"/current-identity/mfa", tok, nil); r.Status != http.StatusCreated {
		t.Fatalf("enroll MFA on the management API: %d %s", r.Status, r.Body)
	}
	var enrolled mfaDetail
	n.getJSON(t, mgmt+"/current-identity/mfa", tok, &enrolled)
	key, err := otp.NewKeyFromURL(enrolled.ProvisioningURL)
	if err != nil {
		t.Fatalf("provisioning URL %q: %v", enrolled.ProvisioningURL, err)
	}
	secret := key.Secret()
	if r := n.do(t, http.MethodPost, mgmt+"/current-identity/mfa/verify", tok, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("verify MFA on the management API: %d %s", r.Status, r.Body)
	}
	clk.Advance(30 * time.Second) // the next code

	r := n.do(t, http.MethodPost, mgmt+"/authenticate?method=password", "", map[string]string{"username": "mfa-admin", "password": "mfa-admin-password"})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"httpUrl":"./authenticate/mfa"`) {
		t.Fatalf("password login on the management API: %d %s", r.Status, r.Body)
	}
	partial := r.Header.Get(api.HeaderSession)
	expectError(t, n.do(t, http.MethodGet, mgmt+"/identities", partial, nil), 401, posture.CodeUnauthorized, "")
	// The half-finished login can be read (and ended) there too.
	if r := n.do(t, http.MethodGet, mgmt+"/current-api-session", partial, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"isMfaRequired":true`) {
		t.Fatalf("current-api-session of a partial session on the management API: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticate/mfa", partial, map[string]string{"code": wrongCode(t, secret, clk.Now())}), 400, posture.CodeMFAInvalidToken, "")
	if r := n.do(t, http.MethodPost, mgmt+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("authenticate/mfa on the management API: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/identities", partial, nil); r.Status != http.StatusOK {
		t.Fatalf("an admin operation after MFA: %d %s", r.Status, r.Body)
	}
	var me struct {
		Name    string `json:"name"`
		IsAdmin bool   `json:"isAdmin"`
	}
	data, _ := n.do(t, http.MethodGet, mgmt+"/current-identity", partial, nil).envelope(t)
	if err := json.Unmarshal(data, &me); err != nil || me.Name != "mfa-admin" || !me.IsAdmin {
		t.Fatalf("current-identity on the management API: %s (%v)", data, err)
	}
	// Not an admin: the management API's current identity is refused.
	user := n.createUser(t, "plain-user", "plain-password", false)
	if r := n.do(t, http.MethodGet, mgmt+"/current-identity", user, nil); r.Status != http.StatusForbidden && r.Status != http.StatusUnauthorized {
		t.Fatalf("a non-admin's current-identity on the management API: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/current-identity/mfa", user, nil), 401, posture.CodeUnauthorized, "")
}
