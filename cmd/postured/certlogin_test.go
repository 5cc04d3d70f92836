package main

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

type caDetail struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	Fingerprint       string   `json:"fingerprint"`
	IsVerified        bool     `json:"isVerified"`
	VerificationToken string   `json:"verificationToken"`
	IdentityRoles     []string `json:"identityRoles"`
	IsAuthEnabled     bool     `json:"isAuthEnabled"`
	CertPEM           string   `json:"certPem"`
}

func (n *testNode) caDetail(t testing.TB, admin, id string) caDetail {
	t.Helper()
	r := n.do(t, http.MethodGet, mgmt+"/cas/"+id, admin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("CA detail: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var d caDetail
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// addCA adds a test CA with every use enabled and returns its id.
func (n *testNode) addCA(t testing.TB, admin, name string, ca *testCA) string {
	t.Helper()
	return n.create(t, admin, "cas", map[string]any{
		"name": name, "certPem": ca.pem, "identityRoles": []string{"from-ca"}, "isAuthEnabled": true,
		"isAutoCaEnrollmentEnabled": true, "isOttCaEnrollmentEnabled": true,
	})
}

// verifyCA proves possession of the CA's key.
func (n *testNode) verifyCA(t testing.TB, admin, id string, ca *testCA) response {
	t.Helper()
	_, proof := ca.issue(t, n.caDetail(t, admin, id).VerificationToken)
	return n.send(t, request{method: http.MethodPost, path: mgmt + "/cas/" + id + "/verify", token: admin, contentType: "text/plain", body: []byte(proof)})
}

// TestCALifecycleAndVerify: CAs are created, read, listed, updated,
// verified with a certificate whose CN is the verification token, and
// deleted; wrong proofs are refused.
func TestCALifecycleAndVerify(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ext := newTestCA(t, "corp root")
	id := n.addCA(t, admin, "corp", ext)
	d := n.caDetail(t, admin, id)
	if d.IsVerified || !posture.IsToken(d.VerificationToken) || d.Fingerprint != pki.Fingerprint(ext.cert) || d.IdentityRoles[0] != "from-ca" {
		t.Fatalf("CA %+v", d)
	}
	create := func(body map[string]any) response { return n.do(t, http.MethodPost, mgmt+"/cas", admin, body) }
	base := func(name, pem string) map[string]any {
		return map[string]any{"name": name, "certPem": pem, "isAuthEnabled": true, "isAutoCaEnrollmentEnabled": false, "isOttCaEnrollmentEnabled": false}
	}
	expectError(t, create(base("corp", newTestCA(t, "x").pem)), http.StatusBadRequest, posture.CodeCouldNotValidate, "name")
	expectError(t, create(base("again", ext.pem)), http.StatusBadRequest, posture.CodeCouldNotValidate, "certPem")
	_, leafPEM := ext.issue(t, "not a CA")
	expectError(t, create(base("leaf", leafPEM)), http.StatusBadRequest, posture.CodeCouldNotValidate, "certPem")
	expectError(t, create(map[string]any{"name": "nobool", "certPem": newTestCA(t, "y").pem}), http.StatusBadRequest, posture.CodeCouldNotValidate, "isAuthEnabled")

	verify := func(body string) response {
		return n.send(t, request{method: http.MethodPost, path: mgmt + "/cas/" + id + "/verify", token: admin, contentType: "text/plain", body: []byte(body)})
	}
	_, wrongCN := ext.issue(t, "not the token")
	expectError(t, verify(wrongCN), http.StatusBadRequest, posture.CodeInvalidCommonName, "")
	_, otherSigner := newTestCA(t, "other").issue(t, d.VerificationToken)
	expectError(t, verify(otherSigner), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	expectError(t, verify("not a certificate"), http.StatusBadRequest, posture.CodeExpectedPEMCertificate, "")
	if n.caDetail(t, admin, id).IsVerified {
		t.Fatal("a refused proof verified the CA")
	}
	if r := n.verifyCA(t, admin, id, ext); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	if !n.caDetail(t, admin, id).IsVerified {
		t.Fatal("not verified")
	}
	expectError(t, n.verifyCA(t, admin, id, ext), http.StatusConflict, posture.CodeCAAlreadyVerified, "")

	// Update and patch keep the certificate and the verification.
	if r := n.do(t, http.MethodPatch, mgmt+"/cas/"+id, admin, map[string]any{"isAuthEnabled": false, "identityRoles": []string{"a", "b"}}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if d := n.caDetail(t, admin, id); d.IsAuthEnabled || !d.IsVerified || len(d.IdentityRoles) != 2 || d.CertPEM == "" {
		t.Fatalf("after patch %+v", d)
	}
	put := map[string]any{"name": "corp-renamed", "isAuthEnabled": true, "isAutoCaEnrollmentEnabled": true, "isOttCaEnrollmentEnabled": true}
	if r := n.do(t, http.MethodPut, mgmt+"/cas/"+id, admin, put); r.Status != http.StatusOK {
		t.Fatalf("put: %d %s", r.Status, r.Body)
	}
	put["certPem"] = newTestCA(t, "z").pem
	expectError(t, n.do(t, http.MethodPut, mgmt+"/cas/"+id, admin, put), http.StatusBadRequest, posture.CodeCouldNotValidate, "certPem")
	if ids, total := n.listIDs(t, admin, "/cas", `name = "corp-renamed"`); total != 1 || ids[0] != id {
		t.Fatalf("list: %v %d", ids, total)
	}

	// The CA's JWT: em "ca", signed with the served certificate's key.
	r := n.do(t, http.MethodGet, mgmt+"/cas/"+id+"/jwt", admin, nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/jwt" {
		t.Fatalf("jwt: %d %v %s", r.Status, r.Header, r.Body)
	}
	if claims := n.verifyEnrollmentJWT(t, string(r.Body)); claims["em"] != "ca" || claims["sub"] != id {
		t.Errorf("CA JWT claims %v", claims)
	}

	// Deleting the CA drops its pending ottca enrollments.
	_, enr := n.enrolledIdentity(t, admin, "ottca-user", map[string]any{"ottca": id})
	if r := n.do(t, http.MethodDelete, mgmt+"/cas/"+id, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/cas/"+id, admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	if _, err := n.store.EnrollmentByToken(enr.Token); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("ottca enrollment of a deleted CA: %v", err)
	}
}

// TestCAAutoEnrollmentThenCertLogin: a certificate of an unverified CA is
// refused and creates nothing; once the CA is verified it creates an
// identity that logs in with it, once.
func TestCAAutoEnrollmentThenCertLogin(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ext := newTestCA(t, "partner root")
	id := n.addCA(t, admin, "partner", ext)
	kp, _ := ext.issue(t, "device-7")
	enrollCA := func(cert tls.Certificate) response {
		return n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ca", cert: &cert})
	}
	seq := n.lastSeq(t)
	expectError(t, enrollCA(kp), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	expectError(t, n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ca"}), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	expectError(t, n.certLogin(t, kp), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	if got := n.lastSeq(t); got != seq {
		t.Fatalf("refused CA enrollment appended events: %d -> %d", seq, got)
	}

	if r := n.verifyCA(t, admin, id, ext); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	if r := enrollCA(kp); r.Status != http.StatusOK {
		t.Fatalf("enroll ca: %d %s", r.Status, r.Body)
	}
	identity, err := n.store.IdentityByName("partner-device-7")
	if err != nil || len(identity.RoleAttributes) != 1 || identity.RoleAttributes[0] != "from-ca" {
		t.Fatalf("auto-enrolled identity %+v %v", identity, err)
	}
	expectError(t, enrollCA(kp), http.StatusConflict, posture.CodeCertInUse, "")
	tok, sess := n.certSession(t, kp)
	if sess.IdentityID != identity.ID || sess.IsCertExtendable {
		t.Fatalf("session %+v (a certificate of an external CA is not extendable)", sess)
	}
	var auths []struct {
		IsIssuedByNetwork bool `json:"isIssuedByNetwork"`
	}
	data, _ := n.do(t, http.MethodGet, clientAPI+"/current-identity/authenticators", tok, nil).envelope(t)
	if err := json.Unmarshal(data, &auths); err != nil || len(auths) != 1 || auths[0].IsIssuedByNetwork {
		t.Fatalf("authenticators %s", data)
	}
	// A second certificate with the same CN gets a numbered name; the
	// original still works via the unified /enroll.
	kp2, _ := ext.issue(t, "device-7")
	if r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ca", cert: &kp2}); r.Status != http.StatusOK {
		t.Fatalf("enroll method=ca: %d %s", r.Status, r.Body)
	}
	if _, err := n.store.IdentityByName("partner-device-7000001"); err != nil {
		t.Fatalf("second identity: %v", err)
	}
	// A name the client asks for fills the format's [requestedName], as
	// the OpenZiti SDKs send it; one that does not read as written is
	// refused.
	if r := n.do(t, http.MethodPatch, mgmt+"/cas/"+id, admin, map[string]any{"identityNameFormat": "[caName]-[requestedName]"}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	kp3, _ := ext.issue(t, "device-9")
	named := func(body string) response {
		return n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ca", cert: &kp3, contentType: "application/json", body: []byte(body)})
	}
	expectError(t, named(`{"name":"laptop\u200b42"}`), http.StatusBadRequest, posture.CodeCouldNotValidate, "name")
	if r := named(`{"name":"laptop-42"}`); r.Status != http.StatusOK {
		t.Fatalf("enroll with a requested name: %d %s", r.Status, r.Body)
	}
	if _, err := n.store.IdentityByName("partner-laptop-42"); err != nil {
		t.Fatalf("the requested name: %v", err)
	}
	// A certificate of a CA nobody added is refused.
	stray, _ := newTestCA(t, "stray").issue(t, "device-8")
	expectError(t, enrollCA(stray), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	expectError(t, n.certLogin(t, stray), http.StatusUnauthorized, posture.CodeInvalidAuth, "")

	// Authentication can be switched off on the CA.
	if r := n.do(t, http.MethodPatch, mgmt+"/cas/"+id, admin, map[string]any{"isAuthEnabled": false}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	expectError(t, n.certLogin(t, kp), http.StatusUnauthorized, posture.CodeInvalidAuth, "")

	// Deleting the CA ends the API sessions its certificates opened, and
	// only those.
	other := n.createUser(t, "ca-bystander", "bystander-password", false)
	if r := n.do(t, http.MethodGet, clientAPI+"/current-api-session", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("the CA's session before the delete: %d", r.Status)
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/cas/"+id, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete CA: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/current-api-session", tok, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	if r := n.do(t, http.MethodGet, clientAPI+"/current-api-session", other, nil); r.Status != http.StatusOK {
		t.Fatalf("another identity's session after the CA's delete: %d", r.Status)
	}
}

// TestCADeleteEndsSessionsThroughIntermediates: a root CA added to the
// network verifies certificates an issuing CA under it signed (presented
// with that CA); deleting the root ends the sessions they opened, as it
// ends those of certificates it signed itself.
func TestCADeleteEndsSessionsThroughIntermediates(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	root := newTestCA(t, "enterprise root")
	id := n.addCA(t, admin, "enterprise", root)
	if r := n.verifyCA(t, admin, id, root); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	kp, _ := root.intermediate(t, "issuing CA").issue(t, "laptop-3")
	if r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ca", cert: &kp}); r.Status != http.StatusOK {
		t.Fatalf("enroll with a certificate of an issuing CA: %d %s", r.Status, r.Body)
	}
	tok, _ := n.certSession(t, kp)
	if r := n.do(t, http.MethodDelete, mgmt+"/cas/"+id, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete CA: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/current-api-session", tok, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	expectError(t, n.certLogin(t, kp), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
}

// TestEnrollOTTCAThenCertLogin: a pre-created identity with an ottca
// enrollment enrolls with a certificate of its verified CA.
func TestEnrollOTTCAThenCertLogin(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ext := newTestCA(t, "ottca root")
	caID := n.addCA(t, admin, "ottca", ext)
	id, enr := n.enrolledIdentity(t, admin, "kiosk", map[string]any{"ottca": caID})
	if enr.CAID != caID {
		t.Fatalf("enrollment %+v", enr)
	}
	if claims := n.verifyEnrollmentJWT(t, enr.JWT); claims["em"] != "ottca" {
		t.Errorf("claims %v", claims)
	}
	kp, _ := ext.issue(t, "kiosk")
	enroll := func(cert *tls.Certificate, token string) response {
		return n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ottca?token=" + token, cert: cert})
	}
	// Unverified CA, no certificate, another CA's certificate: refused,
	// and the token stays usable.
	expectError(t, enroll(&kp, enr.Token), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	if r := n.verifyCA(t, admin, caID, ext); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	expectError(t, enroll(nil, enr.Token), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	other, _ := newTestCA(t, "other").issue(t, "kiosk")
	expectError(t, enroll(&other, enr.Token), http.StatusBadRequest, posture.CodeCertFailedValidation, "")
	expectError(t, enroll(&kp, posture.NewToken()), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	if enrollments, auths := n.identityEnrollments(t, admin, id); len(enrollments) != 1 || len(auths) != 0 {
		t.Fatalf("after refusals: %v %v", enrollments, auths)
	}
	if r := n.send(t, request{method: http.MethodPost, path: "/edge/client/v1/enroll?method=ottca&token=" + enr.Token, cert: &kp}); r.Status != http.StatusOK {
		t.Fatalf("enroll method=ottca: %d %s", r.Status, r.Body)
	}
	if _, s := n.certSession(t, kp); s.IdentityID != id || s.IsCertExtendable {
		t.Fatalf("session %+v", s)
	}
	expectError(t, enroll(&kp, enr.Token), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
}

type ownAuth struct {
	ID          string `json:"id"`
	Method      string `json:"method"`
	Fingerprint string `json:"fingerprint"`
	CertPEM     string `json:"certPem"`
}

// TestCertExtensionAndVerify: extension needs the current certificate;
// the old certificate stays valid until extend-verify, then the new one is
// in force and the old one no longer logs in.
func TestCertExtensionAndVerify(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id, enr := n.enrolledIdentity(t, admin, "extender", map[string]any{"ott": true})
	_, oldKP := n.enrollOTT(t, enr.Token)
	tok, _ := n.certSession(t, oldKP)
	var auths []ownAuth
	data, _ := n.do(t, http.MethodGet, clientAPI+"/current-identity/authenticators", tok, nil).envelope(t)
	if err := json.Unmarshal(data, &auths); err != nil || len(auths) != 1 {
		t.Fatalf("authenticators %s", data)
	}
	au := auths[0]
	path := clientAPI + "/current-identity/authenticators/" + au.ID
	newKeyPair := newKey(t)
	extend := func(cert *tls.Certificate, body any) response {
		return n.send(t, request{method: http.MethodPost, path: path + "/extend", token: tok, contentType: "application/json", body: jsonBody(t, body), cert: cert})
	}
	csr := map[string]string{"clientCertCsr": csrPEM(t, newKeyPair, "extended")}
	expectError(t, extend(nil, csr), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	expectError(t, extend(&oldKP, map[string]string{}), http.StatusBadRequest, posture.CodeCouldNotValidate, "clientCertCsr")
	expectError(t, extend(&oldKP, map[string]string{"clientCertCsr": badCSR(t, newKeyPair)}), http.StatusBadRequest, posture.CodeCouldNotProcessCSR, "")
	r := extend(&oldKP, csr)
	if r.Status != http.StatusOK {
		t.Fatalf("extend: %d %s", r.Status, r.Body)
	}
	data, _ = r.envelope(t)
	var out struct {
		ClientCert string `json:"clientCert"`
		CA         string `json:"ca"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.CA != string(n.ca.PEM()) {
		t.Fatalf("extend answer %s", data)
	}
	newKP := keyPair(t, out.ClientCert, newKeyPair)
	// Pending: the old certificate works, the new one not yet.
	n.certSession(t, oldKP)
	expectError(t, n.certLogin(t, newKP), http.StatusUnauthorized, posture.CodeInvalidAuth, "")

	verify := func(cert string) response {
		return n.send(t, request{method: http.MethodPost, path: path + "/extend-verify", token: tok, contentType: "application/json", body: jsonBody(t, map[string]string{"clientCert": cert})})
	}
	expectError(t, verify(string(pki.EncodePEM(oldKP.Leaf))), http.StatusBadRequest, posture.CodeCouldNotValidate, "clientCert")
	_, otherPEM, err := n.ca.SignCSR([]byte(csrPEM(t, newKey(t), "other")), pki.SignRequest{})
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, verify(string(otherPEM)), http.StatusBadRequest, posture.CodeCouldNotValidate, "clientCert")
	if r := verify(out.ClientCert); r.Status != http.StatusOK {
		t.Fatalf("extend-verify: %d %s", r.Status, r.Body)
	}
	expectError(t, n.certLogin(t, oldKP), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	tok2, _ := n.certSession(t, newKP)
	var detail ownAuth
	data, _ = n.do(t, http.MethodGet, path, tok2, nil).envelope(t)
	if err := json.Unmarshal(data, &detail); err != nil || detail.Fingerprint != pki.Fingerprint(parseCertPEM(t, out.ClientCert)) {
		t.Fatalf("authenticator after verify %s", data)
	}
	expectError(t, verify(out.ClientCert), http.StatusBadRequest, posture.CodeCouldNotValidate, "id")
	// The identity's history has both changes of its credentials.
	history, err := n.store.History(id, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, h := range history {
		if h.Kind == posture.HistoryCredential {
			changes = append(changes, h.Summary)
		}
	}
	want := []string{"cert authenticator " + au.ID + " created by enrollment (ott)", "cert authenticator " + au.ID + " changed: certificate extended, by the identity itself"}
	if !slices.Equal(changes, want) {
		t.Fatalf("credential changes %q, want %q", changes, want)
	}

	// Only certificates issued by postured can be extended.
	ext := newTestCA(t, "third party")
	caID := n.addCA(t, admin, "third", ext)
	if r := n.verifyCA(t, admin, caID, ext); r.Status != http.StatusOK {
		t.Fatal(r.Status)
	}
	kp, _ := ext.issue(t, "third-device")
	if r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ca", cert: &kp}); r.Status != http.StatusOK {
		t.Fatalf("enroll ca: %d %s", r.Status, r.Body)
	}
	tok3, _ := n.certSession(t, kp)
	data, _ = n.do(t, http.MethodGet, clientAPI+"/current-identity/authenticators", tok3, nil).envelope(t)
	if err := json.Unmarshal(data, &auths); err != nil || len(auths) != 1 {
		t.Fatalf("authenticators %s", data)
	}
	r = n.send(t, request{method: http.MethodPost, path: clientAPI + "/current-identity/authenticators/" + auths[0].ID + "/extend", token: tok3,
		contentType: "application/json", body: jsonBody(t, csr), cert: &kp})
	expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "id")
}

type sessionCert struct {
	ID          string   `json:"id"`
	Certificate string   `json:"certificate"`
	CAs         string   `json:"cas"`
	Fingerprint string   `json:"fingerprint"`
	ValidTo     api.Time `json:"validTo"`
}

// TestCertEphemeralSessionCertificates: ephemeral certificates are issued
// to the current API session for 12 hours, listed, read and deleted by it
// alone, and gone when it ends.
func TestCertEphemeralSessionCertificates(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	tok := n.createUser(t, "ephemeral", "ephemeral-pw", false)
	other := n.createUser(t, "bystander", "bystander-pw", false)
	base := clientAPI + "/current-api-session/certificates"
	key := newKey(t)
	expectError(t, n.do(t, http.MethodPost, base, tok, map[string]string{}), http.StatusBadRequest, posture.CodeCouldNotValidate, "csr")
	expectError(t, n.do(t, http.MethodPost, base, tok, map[string]string{"csr": badCSR(t, key)}), http.StatusBadRequest, posture.CodeCouldNotProcessCSR, "")
	r := n.do(t, http.MethodPost, base, tok, map[string]string{"csr": csrPEM(t, key, "session")})
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var created sessionCert
	if err := json.Unmarshal(data, &created); err != nil || created.CAs != string(n.ca.PEM()) {
		t.Fatalf("created %s", data)
	}
	cert := parseCertPEM(t, created.Certificate)
	if life := time.Until(cert.NotAfter); life < 11*time.Hour || life > 12*time.Hour+time.Minute {
		t.Errorf("certificate valid for %s, want 12h", life)
	}
	if err := n.ca.Verify(cert, pki.UsageClient); err != nil {
		t.Error(err)
	}
	var list []sessionCert
	data, _ = n.do(t, http.MethodGet, base, tok, nil).envelope(t)
	if err := json.Unmarshal(data, &list); err != nil || len(list) != 1 || list[0].ID != created.ID || list[0].Fingerprint != pki.Fingerprint(cert) {
		t.Fatalf("list %s", data)
	}
	if r := n.do(t, http.MethodGet, base+"/"+created.ID, tok, nil); r.Status != http.StatusOK {
		t.Fatalf("detail: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, base+"/"+created.ID, other, nil), http.StatusNotFound, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodDelete, base+"/"+created.ID, other, nil), http.StatusNotFound, posture.CodeNotFound, "")
	if r := n.do(t, http.MethodDelete, base+"/"+created.ID, tok, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, base+"/"+created.ID, tok, nil), http.StatusNotFound, posture.CodeNotFound, "")

	// A certificate does not outlive its API session.
	r = n.do(t, http.MethodPost, base, tok, map[string]string{"csr": csrPEM(t, key, "session")})
	data, _ = r.envelope(t)
	if err := json.Unmarshal(data, &created); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodDelete, clientAPI+"/current-api-session", tok, nil); r.Status != http.StatusOK ||
		r.Header.Get("expires-at") != "" || r.Header.Get("expiration-seconds") != "" {
		t.Fatalf("logout (it announces no expiry of the ended session): %d %v %s", r.Status, r.Header, r.Body)
	}
	if _, err := n.store.SessionCertificate(created.ID); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("certificate after logout: %v", err)
	}
}
