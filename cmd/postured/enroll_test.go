package main

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/smallstep/pkcs7"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// newKey is a fresh P-256 key; the test keeps it, only CSRs leave.
func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// csrPEM is a PEM CSR for the key.
func csrPEM(t testing.TB, key *ecdsa.PrivateKey, cn string, dns ...string) string {
	t.Helper()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}, DNSNames: dns}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// badCSR is a CSR whose signature does not verify: its subject was changed
// after signing.
func badCSR(t testing.TB, key *ecdsa.PrivateKey) string {
	t.Helper()
	block, _ := pem.Decode([]byte(csrPEM(t, key, "genuine")))
	der := bytes.Replace(block.Bytes, []byte("genuine"), []byte("forgery"), 1)
	if bytes.Equal(der, block.Bytes) {
		t.Fatal("CSR not tampered")
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// keyPair is a TLS client certificate from a PEM certificate (chain) and
// its key.
func keyPair(t testing.TB, certPEM string, key *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := tls.X509KeyPair([]byte(certPEM), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// request is one call of send.
type request struct {
	method, path, token string
	contentType         string
	accept              string
	body                []byte
	cert                *tls.Certificate // client certificate (mutual TLS)
}

// send makes a request on a connection of its own, with a client
// certificate when one is given.
func (n *testNode) send(t testing.TB, r request) response {
	t.Helper()
	cfg := &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}
	if r.cert != nil {
		cfg.Certificates = []tls.Certificate{*r.cert}
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: validating(&http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true})}
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, n.srv.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.contentType != "" {
		req.Header.Set("Content-Type", r.contentType)
	}
	if r.accept != "" {
		req.Header.Set("Accept", r.accept)
	}
	if r.token != "" {
		req.Header.Set(api.HeaderSession, r.token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

func jsonBody(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// certLogin authenticates with a client certificate over mutual TLS.
func (n *testNode) certLogin(t testing.TB, cert tls.Certificate) response {
	t.Helper()
	return n.send(t, request{method: http.MethodPost, path: clientAPI + "/authenticate?method=cert", cert: &cert})
}

// certSession logs in with a certificate and returns the token and the
// API session.
func (n *testNode) certSession(t testing.TB, cert tls.Certificate) (string, api.APISessionView) {
	t.Helper()
	r := n.certLogin(t, cert)
	if r.Status != http.StatusOK {
		t.Fatalf("cert login: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var s api.APISessionView
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return r.Header.Get(api.HeaderSession), s
}

// enrollmentDetail is one entry of an identity's enrollment field.
type enrollmentDetail struct {
	ID        string   `json:"id"`
	JWT       string   `json:"jwt"`
	Token     string   `json:"token"`
	ExpiresAt api.Time `json:"expiresAt"`
	CAID      string   `json:"caId"`
	Username  string   `json:"username"`
}

// identityEnrollments reads an identity's detail: its enrollment field and
// its authenticators by method.
func (n *testNode) identityEnrollments(t testing.TB, admin, id string) (map[string]enrollmentDetail, map[string]map[string]string) {
	t.Helper()
	r := n.do(t, http.MethodGet, mgmt+"/identities/"+id, admin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("identity detail: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var d struct {
		Enrollment     map[string]enrollmentDetail  `json:"enrollment"`
		Authenticators map[string]map[string]string `json:"authenticators"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d.Enrollment, d.Authenticators
}

// enrolledIdentity creates an identity with an enrollment and returns its id
// and that enrollment.
func (n *testNode) enrolledIdentity(t testing.TB, admin, name string, enrollment map[string]any) (string, enrollmentDetail) {
	t.Helper()
	id := n.create(t, admin, "identities", map[string]any{"name": name, "type": "Device", "isAdmin": false, "enrollment": enrollment})
	enr, _ := n.identityEnrollments(t, admin, id)
	if len(enr) != 1 {
		t.Fatalf("identity %s: enrollment %+v, want one", name, enr)
	}
	for _, e := range enr {
		return id, e
	}
	panic("unreachable")
}

// enrollOTT enrolls with a token and a fresh key and returns the client
// certificate (PEM chain) and the TLS key pair.
func (n *testNode) enrollOTT(t testing.TB, token string) (string, tls.Certificate) {
	t.Helper()
	key := newKey(t)
	r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ott&token=" + token,
		contentType: "application/x-pem-file", body: []byte(csrPEM(t, key, "laptop"))})
	if r.Status != http.StatusOK {
		t.Fatalf("enroll ott: %d %s", r.Status, r.Body)
	}
	return string(r.Body), keyPair(t, string(r.Body), key)
}

// servedCertificate is the certificate the server presents, taken as an
// SDK takes it: over TLS without verification.
func (n *testNode) servedCertificate(t testing.TB) *x509.Certificate {
	t.Helper()
	conn, err := tls.Dial("tcp", n.srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

// verifyEnrollmentJWT checks an enrollment JWT as sdk-golang does: with the
// public key of the certificate served at its issuer, kid the SHA-1
// thumbprint of that certificate.
func (n *testNode) verifyEnrollmentJWT(t testing.TB, token string) jwt.MapClaims {
	t.Helper()
	served := n.servedCertificate(t)
	sum := sha1.Sum(served.Raw)
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
		if kid := tok.Header["kid"]; kid != hex.EncodeToString(sum[:]) {
			t.Errorf("kid %v, want the SHA-1 thumbprint of the served certificate %x", kid, sum)
		}
		return served.PublicKey, nil
	}, jwt.WithValidMethods([]string{"ES256", "ES384", "ES512", "RS256"}))
	if err != nil || !tok.Valid {
		t.Fatalf("enrollment JWT does not verify with the served certificate: %v", err)
	}
	if iss := claims["iss"]; iss != "https://"+n.advertise {
		t.Errorf("iss %v, want https://%s", iss, n.advertise)
	}
	return claims
}

func parseCertPEM(t testing.TB, s string) *x509.Certificate {
	t.Helper()
	c, err := pki.ParseCertificatePEM([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestEnrollOTTThenCertLogin: an identity created with {ott: true} shows a
// token and a JWT that verifies with the served certificate; enrolling with
// a CSR gives a certificate of postured's CA that logs in over mutual TLS;
// the token works once.
func TestEnrollOTTThenCertLogin(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	before := time.Now()
	id, enr := n.enrolledIdentity(t, admin, "laptop-1", map[string]any{"ott": true})
	if !posture.IsToken(enr.Token) || enr.JWT == "" || enr.ID == "" {
		t.Fatalf("enrollment %+v", enr)
	}
	if exp := time.Time(enr.ExpiresAt); exp.Before(before.Add(179*time.Minute)) || exp.After(time.Now().Add(181*time.Minute)) {
		t.Errorf("expiresAt %s, want about 180 minutes from now", exp)
	}
	claims := n.verifyEnrollmentJWT(t, enr.JWT)
	if claims["em"] != "ott" || claims["sub"] != id || claims["jti"] != enr.Token {
		t.Errorf("claims %v", claims)
	}
	if exp, _ := claims.GetExpirationTime(); exp == nil || exp.Unix() != time.Time(enr.ExpiresAt).Unix() {
		t.Errorf("exp %v, want %s", exp, time.Time(enr.ExpiresAt))
	}

	chain, kp := n.enrollOTT(t, enr.Token)
	certs, err := pki.ParseCertificatesPEM([]byte(chain))
	if err != nil {
		t.Fatal(err)
	}
	leaf := certs[0]
	if leaf.Subject.CommonName != id {
		t.Errorf("certificate CN %q, want the identity id %q", leaf.Subject.CommonName, id)
	}
	if err := n.ca.Verify(leaf, pki.UsageClient); err != nil {
		t.Errorf("issued certificate does not chain to the CA: %v", err)
	}
	enrollments, auths := n.identityEnrollments(t, admin, id)
	if len(enrollments) != 0 || auths["cert"]["fingerprint"] != pki.Fingerprint(leaf) {
		t.Fatalf("after enrollment: enrollment %v, authenticators %v", enrollments, auths)
	}
	var list []struct {
		Method            string `json:"method"`
		Fingerprint       string `json:"fingerprint"`
		IsIssuedByNetwork bool   `json:"isIssuedByNetwork"`
	}
	data, _ := n.do(t, http.MethodGet, mgmt+"/identities/"+id+"/authenticators", admin, nil).envelope(t)
	if err := json.Unmarshal(data, &list); err != nil || len(list) != 1 || list[0].Method != "cert" || !list[0].IsIssuedByNetwork {
		t.Fatalf("authenticators %s", data)
	}

	tok, sess := n.certSession(t, kp)
	if sess.IdentityID != id || !sess.IsCertExtendable {
		t.Errorf("cert session %+v", sess)
	}
	if r := n.do(t, http.MethodGet, clientAPI+"/current-identity", tok, nil); r.Status != http.StatusOK {
		t.Fatalf("current identity with the cert session: %d %s", r.Status, r.Body)
	}

	// The token worked once.
	r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ott&token=" + enr.Token,
		contentType: "application/x-pem-file", body: []byte(csrPEM(t, newKey(t), "again"))})
	expectError(t, r, http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")

	// JSON answer, and the unprefixed path old SDKs use.
	_, enr2 := n.enrolledIdentity(t, admin, "laptop-2", map[string]any{"ott": true})
	key := newKey(t)
	r = n.send(t, request{method: http.MethodPost, path: "/enroll?method=ott&token=" + enr2.Token,
		contentType: "application/x-pem-file", accept: "application/json", body: []byte(csrPEM(t, key, "l2"))})
	if r.Status != http.StatusOK {
		t.Fatalf("enroll json: %d %s", r.Status, r.Body)
	}
	data, _ = r.envelope(t)
	var out struct{ Cert, CA string }
	if err := json.Unmarshal(data, &out); err != nil || out.CA != string(n.ca.PEM()) {
		t.Fatalf("json answer %s", data)
	}
	if _, s := n.certSession(t, keyPair(t, out.Cert, key)); s.Identity.Name != "laptop-2" {
		t.Errorf("logged in as %+v", s.Identity)
	}

	// POST /enroll/ott: the spec's JSON body {token, clientCsr}, a JSON answer.
	_, enr3 := n.enrolledIdentity(t, admin, "laptop-3", map[string]any{"ott": true})
	key3 := newKey(t)
	r = n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ott", contentType: "application/json",
		body: jsonBody(t, map[string]string{"token": enr3.Token, "clientCsr": csrPEM(t, key3, "l3")})})
	data, _ = r.envelope(t)
	if err := json.Unmarshal(data, &out); err != nil || r.Status != http.StatusOK {
		t.Fatalf("enroll/ott: %d %s", r.Status, r.Body)
	}
	if _, s := n.certSession(t, keyPair(t, out.Cert, key3)); s.Identity.Name != "laptop-3" {
		t.Errorf("logged in as %+v", s.Identity)
	}

	// Certificate login needs a certificate, of an authenticator.
	expectError(t, n.send(t, request{method: http.MethodPost, path: clientAPI + "/authenticate?method=cert"}), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	other, otherKey := newKey(t), newKey(t)
	_, strayPEM, err := n.ca.SignCSR([]byte(csrPEM(t, other, "stray")), pki.SignRequest{})
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, n.certLogin(t, keyPair(t, string(strayPEM), other)), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	selfSigned := selfSignedPEM(t, otherKey)
	expectError(t, n.certLogin(t, keyPair(t, selfSigned, otherKey)), http.StatusUnauthorized, posture.CodeInvalidAuth, "")
}

// raceOTT enrolls with one token through each node at the same time: one
// request enrolls, every other one is refused as INVALID_ENROLLMENT_TOKEN.
func raceOTT(t *testing.T, token string, nodes ...*testNode) {
	t.Helper()
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]response, len(nodes))
	for i, n := range nodes {
		csr := csrPEM(t, newKey(t), "racer")
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ott&token=" + token,
				contentType: "application/x-pem-file", body: []byte(csr)})
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for _, r := range results {
		if r.Status == http.StatusOK {
			ok++
			continue
		}
		expectError(t, r, http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	}
	if ok != 1 {
		t.Fatalf("%d of %d enrollments with one token succeeded, want 1", ok, len(nodes))
	}
}

// TestEnrollTokenRace: two requests with one token at the same time; one
// enrolls, the other is refused, and the identity has one certificate.
func TestEnrollTokenRace(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	for round := range 3 {
		id, enr := n.enrolledIdentity(t, admin, "racer-"+string(rune('a'+round)), map[string]any{"ott": true})
		raceOTT(t, enr.Token, n, n)
		auths, err := n.store.IdentityAuthenticators(id)
		if err != nil || len(auths) != 1 {
			t.Fatalf("round %d: authenticators %+v %v, want one", round, auths, err)
		}
	}
}

// TestEnrollRefusals: expired, unknown and malformed tokens, a token of
// another method, bad and missing CSRs are refused and change nothing: the
// token still works afterwards.
func TestEnrollRefusals(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	id, enr := n.enrolledIdentity(t, admin, "careful", map[string]any{"ott": true})
	_, updb := n.enrolledIdentity(t, admin, "password-user", map[string]any{"updb": "pw-user"})
	enroll := func(query string, csr string) response {
		return n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?" + query,
			contentType: "application/x-pem-file", body: []byte(csr)})
	}
	seq := n.lastSeq(t)
	good := csrPEM(t, newKey(t), "x")
	expectError(t, enroll("method=ott&token="+posture.NewToken(), good), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	expectError(t, enroll("method=ott&token=not-a-uuid", good), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	expectError(t, enroll("method=ott", good), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	expectError(t, enroll("method=ott&token="+updb.Token, good), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	expectError(t, enroll("method=nope&token="+enr.Token, good), http.StatusBadRequest, posture.CodeInvalidEnrollMethod, "")
	expectError(t, enroll("token="+enr.Token, good), http.StatusBadRequest, posture.CodeInvalidEnrollMethod, "")
	expectError(t, enroll("method=ott&token="+enr.Token, badCSR(t, newKey(t))), http.StatusBadRequest, posture.CodeCouldNotProcessCSR, "")
	expectError(t, enroll("method=ott&token="+enr.Token, ""), http.StatusBadRequest, posture.CodeMissingOrInvalidCSR, "")
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}}, weak)
	if err != nil {
		t.Fatal(err)
	}
	r := enroll("method=ott&token="+enr.Token, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: weakDER})))
	expectError(t, r, http.StatusBadRequest, posture.CodeMissingOrInvalidCSR, "")
	if !strings.Contains(string(r.Body), "1024-bit RSA key is too weak") {
		t.Errorf("weak key refused with %s", r.Body)
	}
	expectError(t, enroll("method=ott&token="+enr.Token, "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), http.StatusBadRequest, posture.CodeMissingOrInvalidCSR, "")
	if got := n.lastSeq(t); got != seq {
		t.Fatalf("refused enrollments appended events: sequence %d -> %d", seq, got)
	}

	// Expiry: 180 minutes later the token is refused, and nothing changes.
	// The node has one clock: the admin's API session idled out meanwhile.
	clk.Advance(180*time.Minute + time.Second)
	admin = n.adminToken(t)
	expectError(t, enroll("method=ott&token="+enr.Token, good), http.StatusBadRequest, posture.CodeEnrollmentExpired, "")
	r = n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/updb?token=" + updb.Token, contentType: "application/json",
		body: jsonBody(t, map[string]string{"password": "secret-pw"})})
	expectError(t, r, http.StatusBadRequest, posture.CodeEnrollmentExpired, "")
	enrollments, auths := n.identityEnrollments(t, admin, id)
	if len(enrollments) != 1 || len(auths) != 0 {
		t.Fatalf("after refusals: enrollment %v, authenticators %v", enrollments, auths)
	}

	// An administrator re-enrolls: one pending certificate enrollment at a
	// time, so the old one goes first.
	r = n.do(t, http.MethodPost, mgmt+"/enrollments", admin, map[string]any{"method": "ott", "identityId": id})
	expectError(t, r, http.StatusConflict, posture.CodeEnrollmentExists, "")
	if r := n.do(t, http.MethodDelete, mgmt+"/enrollments/"+enrollments["ott"].ID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete enrollment: %d %s", r.Status, r.Body)
	}
	expectError(t, enroll("method=ott&token="+enr.Token, good), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	newID := n.create(t, admin, "enrollments", map[string]any{"method": "ott", "identityId": id})
	var fresh enrollmentDetail
	data, _ := n.do(t, http.MethodGet, mgmt+"/enrollments/"+newID, admin, nil).envelope(t)
	if err := json.Unmarshal(data, &fresh); err != nil || !posture.IsToken(fresh.Token) {
		t.Fatalf("new enrollment %s", data)
	}
	if r := enroll("method=ott&token="+fresh.Token, good); r.Status != http.StatusOK {
		t.Fatalf("enroll with the new token: %d %s", r.Status, r.Body)
	}
	// An identity with a certificate gets no second certificate enrollment.
	r = n.do(t, http.MethodPost, mgmt+"/enrollments", admin, map[string]any{"method": "ott", "identityId": id})
	expectError(t, r, http.StatusConflict, posture.CodeEnrollmentExists, "")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities", admin, map[string]any{"name": "two", "type": "Device", "enrollment": map[string]any{"ott": true, "updb": "two-user"}}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "enrollment")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities", admin, map[string]any{"name": "three", "type": "Device", "enrollment": map[string]any{"ottca": "no-such-ca"}}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "enrollment.ottca")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/identities", admin, map[string]any{"name": "four", "type": "Device", "enrollment": map[string]any{"updb": "pw-user"}}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "enrollment.updb")
	if _, err := n.store.IdentityByName("three"); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("a refused create made the identity: %v", err)
	}

	// Deleting an identity deletes its enrollments.
	gone, gEnr := n.enrolledIdentity(t, admin, "gone", map[string]any{"ott": true})
	if r := n.do(t, http.MethodDelete, mgmt+"/identities/"+gone, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete identity: %d %s", r.Status, r.Body)
	}
	if _, err := n.store.EnrollmentByToken(gEnr.Token); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("enrollment of a deleted identity: %v", err)
	}
}

// TestEnrollUPDBThenPasswordLogin: an identity created with {updb:
// username} sets its password with the token, then logs in with it.
func TestEnrollUPDBThenPasswordLogin(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id, enr := n.enrolledIdentity(t, admin, "person", map[string]any{"updb": "person-1"})
	if enr.Username != "person-1" {
		t.Fatalf("enrollment %+v", enr)
	}
	if claims := n.verifyEnrollmentJWT(t, enr.JWT); claims["em"] != "updb" || claims["jti"] != enr.Token {
		t.Errorf("claims %v", claims)
	}
	post := func(path string, body any) response {
		return n.send(t, request{method: http.MethodPost, path: path, contentType: "application/json", body: jsonBody(t, body)})
	}
	expectError(t, post(clientAPI+"/enroll/updb?token="+enr.Token, map[string]string{"password": "abc"}), http.StatusBadRequest, posture.CodeCouldNotValidate, "password")
	expectError(t, post(clientAPI+"/enroll/updb?token="+enr.Token, map[string]string{"username": "someone-else", "password": "abcdef"}), http.StatusBadRequest, posture.CodeCouldNotValidate, "username")
	if r := post(clientAPI+"/enroll/updb?token="+enr.Token, map[string]string{"password": "first-password"}); r.Status != http.StatusOK {
		t.Fatalf("enroll updb: %d %s", r.Status, r.Body)
	}
	tok := n.login(t, clientAPI, "person-1", "first-password")
	if r := n.do(t, http.MethodGet, clientAPI+"/current-identity", tok, nil); !strings.Contains(string(r.Body), id) {
		t.Fatalf("current identity: %s", r.Body)
	}
	expectError(t, post(clientAPI+"/enroll/updb?token="+enr.Token, map[string]string{"password": "second-password"}), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")

	// What SDKs send: POST /enroll?method=updb&token= with {password}.
	_, enr2 := n.enrolledIdentity(t, admin, "person-2", map[string]any{"updb": "person-2"})
	if r := post("/edge/client/v1/enroll?method=updb&token="+enr2.Token, map[string]string{"password": "pass-word-2"}); r.Status != http.StatusOK {
		t.Fatalf("enroll method=updb: %d %s", r.Status, r.Body)
	}
	n.login(t, clientAPI, "person-2", "pass-word-2")
}

// TestCACertsBundleAndNetworkJWT: the CA store parses as PKCS#7 and holds
// the CA; the network JWT verifies with the served certificate.
func TestCACertsBundleAndNetworkJWT(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	for _, path := range []string{clientAPI + "/.well-known/est/cacerts", "/.well-known/est/cacerts"} {
		r := n.do(t, http.MethodGet, path, "", nil)
		if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/pkcs7-mime" || r.Header.Get("Content-Transfer-Encoding") != "base64" {
			t.Fatalf("%s: %d %v", path, r.Status, r.Header)
		}
		der, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(r.Body), "\n", ""))
		if err != nil {
			t.Fatal(err)
		}
		p7, err := pkcs7.Parse(der)
		if err != nil {
			t.Fatalf("not PKCS#7: %v", err)
		}
		if len(p7.Certificates) != 1 || !bytes.Equal(p7.Certificates[0].Raw, n.ca.Certificate().Raw) {
			t.Fatalf("bundle holds %d certificates, not the CA", len(p7.Certificates))
		}
	}
	r := n.do(t, http.MethodGet, clientAPI+"/network-jwts", "", nil)
	data, _ := r.envelope(t)
	var jwts []struct{ Name, Token string }
	if err := json.Unmarshal(data, &jwts); err != nil || len(jwts) != 1 || jwts[0].Name != "default" {
		t.Fatalf("network-jwts: %s", r.Body)
	}
	served := n.servedCertificate(t)
	claims := jwt.MapClaims{}
	if _, err := jwt.ParseWithClaims(jwts[0].Token, claims, func(*jwt.Token) (any, error) { return served.PublicKey, nil }); err != nil {
		t.Fatalf("network JWT: %v", err)
	}
	if claims["em"] != "network" || claims["iss"] != "https://"+n.advertise+"/" {
		t.Errorf("network claims %v", claims)
	}
	// The served certificate names the host as a local client reaches it.
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := served.VerifyHostname(h); err != nil {
			t.Error(err)
		}
	}
}

// TestChallengeAndJwks: the key set holds the served certificate's key;
// the challenge signature over a nonce verifies with that JWK.
func TestChallengeAndJwks(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	r := n.do(t, http.MethodGet, clientAPI+"/enroll/jwks", "", nil)
	var set pki.JWKS
	if err := json.Unmarshal(r.Body, &set); err != nil || r.Status != http.StatusOK || len(set.Keys) != 1 {
		t.Fatalf("jwks: %d %s", r.Status, r.Body)
	}
	jwk := set.Keys[0]
	served := n.servedCertificate(t)
	sum := sha1.Sum(served.Raw)
	if jwk.KeyID != hex.EncodeToString(sum[:]) {
		t.Fatalf("kid %s is not the served certificate's thumbprint", jwk.KeyID)
	}
	pub, err := jwk.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if !served.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(pub) {
		t.Fatal("the JWK is not the served certificate's key")
	}
	nonce := posture.NewToken()
	r = n.do(t, http.MethodPost, clientAPI+"/enroll/challenge", "", map[string]string{"keyId": jwk.KeyID, "nonce": nonce})
	var resp pki.ChallengeResponse
	if err := json.Unmarshal(r.Body, &resp); err != nil || r.Status != http.StatusOK {
		t.Fatalf("challenge: %d %s", r.Status, r.Body)
	}
	if err := pki.VerifyChallenge(jwk, nonce, resp); err != nil {
		t.Fatalf("challenge does not verify with the JWK: %v", err)
	}
	if resp.CAPool != string(n.ca.PEM()) || resp.Algorithm != jwk.Algorithm {
		t.Errorf("challenge %+v", resp)
	}
	if err := pki.VerifyChallenge(jwk, posture.NewToken(), resp); err == nil {
		t.Error("the signature verifies for another nonce")
	}
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/enroll/challenge", "", map[string]string{"keyId": jwk.KeyID, "nonce": "not-a-uuid"}), http.StatusBadRequest, posture.CodeCouldNotValidate, "nonce")
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/enroll/challenge", "", map[string]string{"keyId": "abc", "nonce": nonce}), http.StatusBadRequest, posture.CodeCouldNotValidate, "keyId")
	expectError(t, n.do(t, http.MethodPost, clientAPI+"/enroll/challenge", "", map[string]string{"nonce": nonce}), http.StatusBadRequest, posture.CodeCouldNotValidate, "keyId")
}

// testCA is a third-party CA made in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
	// chain is the PEM of the CAs between this one and its root (for an
	// intermediate): its client certificates are presented with it.
	chain string
}

// intermediate is a CA that ca signs, as an issuing CA under a root.
func (ca *testCA) intermediate(t testing.TB, name string) *testCA {
	t.Helper()
	return newCASignedBy(t, name, ca)
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	return newCASignedBy(t, name, nil)
}

// newCASignedBy makes a CA certificate for a new key, signed by parent
// (nil: by itself, a root).
func newCASignedBy(t testing.TB, name string, parent *testCA) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	p := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	ca := &testCA{cert: cert, key: key, pem: p}
	if parent != nil {
		ca.chain = p + parent.chain
	}
	return ca
}

// issue signs a client certificate with the common name for a new key.
func (ca *testCA) issue(t testing.TB, cn string) (tls.Certificate, string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(12 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	p := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return keyPair(t, p+ca.chain, key), p
}

// TestEnrollTokenRaceAcrossNodes: two nodes on one event log get the same
// token at the same time; one enrolls, the other finds it used.
func TestEnrollTokenRaceAcrossNodes(t *testing.T) {
	natsAddr := freeAddr(t)
	cfgA := defaultTestConfig(t.TempDir())
	cfgA.NatsListen = natsAddr
	a := startTestNode(t, cfgA)
	cfgB := defaultTestConfig(t.TempDir())
	cfgB.PKIDir = filepath.Join(cfgA.DataDir, "pki") // nodes of a cluster share the CA and the secrets key
	cfgB.NatsURL = []string{"tls://" + natsAddr}
	cfgB.NatsNkey = filepath.Join(cfgA.DataDir, "nats", "creds", "postured.nk")
	cfgB.NatsTLSCA = filepath.Join(cfgA.DataDir, "pki", "ca.pem")
	b := startTestNode(t, cfgB)
	admin := a.adminToken(t)
	for round := range 3 {
		id, enr := a.enrolledIdentity(t, admin, fmt.Sprintf("roamer-%d", round), map[string]any{"ott": true})
		if err := b.store.WaitFor(t.Context(), a.store.Cursor()); err != nil {
			t.Fatal(err)
		}
		raceOTT(t, enr.Token, a, b)
		for _, n := range []*testNode{a, b} {
			if err := n.store.WaitFor(t.Context(), max(a.store.Cursor(), b.store.Cursor())); err != nil {
				t.Fatal(err)
			}
			if auths, err := n.store.IdentityAuthenticators(id); err != nil || len(auths) != 1 {
				t.Fatalf("round %d: authenticators %+v %v, want one", round, auths, err)
			}
		}
	}
}

// TestRefreshEnrollment: a refresh moves an enrollment's expiry and gives
// it a new token and JWT; the old token stops working, the new one
// enrolls.
func TestRefreshEnrollment(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id, old := n.enrolledIdentity(t, admin, "laptop", map[string]any{"ott": true})
	later := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	path := mgmt + "/enrollments/" + old.ID + "/refresh"

	expectError(t, n.do(t, http.MethodPost, path, admin, map[string]any{}), http.StatusBadRequest, posture.CodeCouldNotValidate, "expiresAt")
	for _, bad := range []string{"2020-01-01T00:00:00Z", "2999-01-01T00:00:00Z", "9999-12-31T23:00:00-23:00"} {
		expectError(t, n.do(t, http.MethodPost, path, admin, map[string]any{"expiresAt": bad}), http.StatusBadRequest, posture.CodeCouldNotValidate, "expiresAt")
		expectError(t, n.do(t, http.MethodPost, mgmt+"/enrollments", admin, map[string]any{"identityId": id, "method": "updb", "username": "laptop-user", "expiresAt": bad}),
			http.StatusBadRequest, posture.CodeCouldNotValidate, "expiresAt")
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/enrollments/x0000000x/refresh", admin, map[string]any{"expiresAt": later}), http.StatusNotFound, posture.CodeNotFound, "")
	if enr, _ := n.identityEnrollments(t, admin, id); enr["ott"].Token != old.Token {
		t.Fatalf("a refused refresh changed the enrollment: %+v", enr["ott"])
	}

	if r := n.do(t, http.MethodPost, path, admin, map[string]any{"expiresAt": later}); r.Status != http.StatusOK {
		t.Fatalf("refresh: %d %s", r.Status, r.Body)
	}
	enr, _ := n.identityEnrollments(t, admin, id)
	fresh := enr["ott"]
	if fresh.ID != old.ID || fresh.Token == old.Token || fresh.JWT == old.JWT || !time.Time(fresh.ExpiresAt).Equal(later) {
		t.Fatalf("refreshed enrollment %+v, was %+v", fresh, old)
	}
	if claims := n.verifyEnrollmentJWT(t, fresh.JWT); claims["jti"] != fresh.Token || int64(claims["exp"].(float64)) != later.Unix() {
		t.Fatalf("refreshed JWT's claims %v", claims)
	}
	r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll?method=ott&token=" + old.Token,
		contentType: "application/x-pem-file", body: []byte(csrPEM(t, newKey(t), "laptop"))})
	expectError(t, r, http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	_, cert := n.enrollOTT(t, fresh.Token)
	if tok, _ := n.certSession(t, cert); tok == "" {
		t.Fatal("no session with the enrolled certificate")
	}

	// An identity with a pending updb enrollment gets no other password,
	// nor does another identity take its username.
	person, _ := n.enrolledIdentity(t, admin, "person", map[string]any{"updb": "person-1"})
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", admin, map[string]any{"method": "updb", "identityId": person, "username": "person-2", "password": "person-password"}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "method")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators", admin, map[string]any{"method": "updb", "identityId": id, "username": "person-1", "password": "person-password"}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "username")
	// Nor does a password renamed to it, by its owner or by an admin.
	au := n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "laptop-user", "password": "laptop-password"})
	owner := n.login(t, clientAPI, "laptop-user", "laptop-password")
	for _, r := range []response{
		n.do(t, http.MethodPatch, clientAPI+"/current-identity/authenticators/"+au, owner, map[string]any{"username": "person-1", "currentPassword": "laptop-password"}),
		n.do(t, http.MethodPut, clientAPI+"/current-identity/authenticators/"+au, owner, map[string]any{"username": "person-1", "password": "laptop-password-2", "currentPassword": "laptop-password"}),
		n.do(t, http.MethodPatch, mgmt+"/authenticators/"+au, admin, map[string]any{"username": "person-1"}),
		n.do(t, http.MethodPut, mgmt+"/authenticators/"+au, admin, map[string]any{"username": "person-1", "password": "laptop-password-2"}),
	} {
		expectError(t, r, http.StatusBadRequest, posture.CodeCouldNotValidate, "username")
	}
	n.login(t, clientAPI, "laptop-user", "laptop-password")
}

// TestReEnrollAuthenticator: re-enrolling an authenticator deletes it,
// ends its API sessions and makes an enrollment of the same kind, which
// the identity redeems for new credentials.
func TestReEnrollAuthenticator(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	later := map[string]any{"expiresAt": time.Now().Add(time.Hour).UTC()}
	post := func(path string, body any) response {
		return n.send(t, request{method: http.MethodPost, path: path, contentType: "application/json", body: jsonBody(t, body)})
	}

	// A password: an updb enrollment with the same username.
	ep := n.endpoint(t, admin, "person")
	auths, _ := n.listIDs(t, admin, "/identities/"+ep.id+"/authenticators", "")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators/"+auths[0]+"/re-enroll", admin, map[string]any{}), http.StatusBadRequest, posture.CodeCouldNotValidate, "expiresAt")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators/x0000000x/re-enroll", admin, later), http.StatusNotFound, posture.CodeNotFound, "")
	// A time past year 9999 in UTC is refused, and the authenticator stays.
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators/"+auths[0]+"/re-enroll", admin, map[string]any{"expiresAt": "9999-12-31T23:00:00-23:00"}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "expiresAt")
	if r := n.do(t, http.MethodGet, mgmt+"/authenticators/"+auths[0], admin, nil); r.Status != http.StatusOK {
		t.Fatalf("a refused re-enroll deleted the authenticator: %d", r.Status)
	}
	r := n.do(t, http.MethodPost, mgmt+"/authenticators/"+auths[0]+"/re-enroll", admin, later)
	if r.Status != http.StatusCreated {
		t.Fatalf("re-enroll: %d %s", r.Status, r.Body)
	}
	var created struct{ ID string }
	if data, _ := r.envelope(t); json.Unmarshal(data, &created) != nil || created.ID == "" {
		t.Fatalf("re-enroll answered %s", r.Body)
	}
	expectError(t, n.do(t, http.MethodGet, mgmt+"/authenticators/"+auths[0], admin, nil), http.StatusNotFound, posture.CodeNotFound, "")
	expectError(t, n.do(t, http.MethodGet, clientAPI+"/current-identity", ep.token, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	enr, _ := n.identityEnrollments(t, admin, ep.id)
	if u := enr["updb"]; u.ID != created.ID || u.Username != "person" || u.Token == "" {
		t.Fatalf("enrollments after re-enroll: %+v", enr)
	}
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticate?method=password", "", map[string]any{"username": "person", "password": "person-password"}),
		http.StatusUnauthorized, posture.CodeInvalidAuth, "")
	if r := post(clientAPI+"/enroll/updb?token="+enr["updb"].Token, map[string]string{"password": "a-new-password"}); r.Status != http.StatusOK {
		t.Fatalf("enroll updb: %d %s", r.Status, r.Body)
	}
	n.login(t, clientAPI, "person", "a-new-password")

	// A certificate the network issued: an ott enrollment.
	id, ott := n.enrolledIdentity(t, admin, "laptop", map[string]any{"ott": true})
	_, cert := n.enrollOTT(t, ott.Token)
	_, byMethod := n.identityEnrollments(t, admin, id)
	certAuth := byMethod["cert"]["id"]
	if r := n.do(t, http.MethodPost, mgmt+"/authenticators/"+certAuth+"/re-enroll", admin, later); r.Status != http.StatusCreated {
		t.Fatalf("re-enroll a certificate: %d %s", r.Status, r.Body)
	}
	if r := n.certLogin(t, cert); r.Status != http.StatusUnauthorized {
		t.Fatalf("the re-enrolled certificate still signs in: %d %s", r.Status, r.Body)
	}
	enr, _ = n.identityEnrollments(t, admin, id)
	if _, ok := enr["ott"]; !ok || len(enr) != 1 {
		t.Fatalf("enrollments after a certificate's re-enroll: %+v", enr)
	}
	// A password beside the pending ott: each kind has its own.
	n.create(t, admin, "authenticators", map[string]any{"method": "updb", "identityId": id, "username": "laptop-user", "password": "laptop-password"})
	_, byMethod = n.identityEnrollments(t, admin, id)
	if r := n.do(t, http.MethodPost, mgmt+"/authenticators/"+byMethod["updb"]["id"]+"/re-enroll", admin, later); r.Status != http.StatusCreated {
		t.Fatalf("re-enroll the password beside a pending ott: %d %s", r.Status, r.Body)
	}

	// A certificate of one of the network's CAs: an ottca enrollment for
	// that CA.
	ext := newTestCA(t, "kiosk root")
	caID := n.addCA(t, admin, "kiosks", ext)
	if r := n.verifyCA(t, admin, caID, ext); r.Status != http.StatusOK {
		t.Fatalf("verify: %d %s", r.Status, r.Body)
	}
	// enrolled is an identity enrolled by ottca with the CA, its certificate
	// issued by issuer, and reEnrolled what its re-enroll leaves.
	enrolled := func(name string, issuer *testCA) (identity, certAuth string) {
		identity, ottca := n.enrolledIdentity(t, admin, name, map[string]any{"ottca": caID})
		kp, _ := issuer.issue(t, name)
		if r := n.send(t, request{method: http.MethodPost, path: clientAPI + "/enroll/ottca?token=" + ottca.Token, cert: &kp}); r.Status != http.StatusOK {
			t.Fatalf("enroll ottca %s: %d %s", name, r.Status, r.Body)
		}
		_, byMethod := n.identityEnrollments(t, admin, identity)
		return identity, byMethod["cert"]["id"]
	}
	reEnrolled := func(identity, certAuth string) map[string]enrollmentDetail {
		if r := n.do(t, http.MethodPost, mgmt+"/authenticators/"+certAuth+"/re-enroll", admin, later); r.Status != http.StatusCreated {
			t.Fatalf("re-enroll %s: %d %s", identity, r.Status, r.Body)
		}
		enr, _ := n.identityEnrollments(t, admin, identity)
		return enr
	}
	if enr := reEnrolled(enrolled("kiosk", ext)); enr["ottca"].CAID != caID || len(enr) != 1 {
		t.Fatalf("enrollments after a CA certificate's re-enroll: %+v", enr)
	}
	// So does one an issuing CA under it signed, enrolled with the CA: the
	// authenticator keeps the CA it was enrolled with, not the chain.
	if enr := reEnrolled(enrolled("kiosk-2", ext.intermediate(t, "kiosk issuing CA"))); enr["ottca"].CAID != caID || len(enr) != 1 {
		t.Fatalf("enrollments after re-enrolling a certificate of an issuing CA: %+v", enr)
	}
	// Once its CA is deleted (its authenticators stay), a certificate is
	// moved off it with an ott enrollment.
	kiosk3, certAuth := enrolled("kiosk-3", ext)
	if r := n.do(t, http.MethodDelete, mgmt+"/cas/"+caID, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete the CA: %d %s", r.Status, r.Body)
	}
	if enr := reEnrolled(kiosk3, certAuth); enr["ott"].ID == "" || len(enr) != 1 {
		t.Fatalf("enrollments after re-enrolling a certificate of a deleted CA: %+v", enr)
	}

	// The default admin has no enrollments, even by its own hand.
	own, _ := n.listIDs(t, admin, "/current-identity/authenticators", "")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/authenticators/"+own[0]+"/re-enroll", admin, later), http.StatusBadRequest, posture.CodeCouldNotValidate, "id")
	n.login(t, mgmt, "admin", testAdminPassword)
}
