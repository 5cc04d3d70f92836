package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

type routerDetail struct {
	ID                  string    `json:"id"`
	Name                string    `json:"name"`
	IsVerified          bool      `json:"isVerified"`
	Fingerprint         *string   `json:"fingerprint"`
	EnrollmentToken     *string   `json:"enrollmentToken"`
	EnrollmentJWT       *string   `json:"enrollmentJwt"`
	EnrollmentCreatedAt *api.Time `json:"enrollmentCreatedAt"`
	EnrollmentExpiresAt *api.Time `json:"enrollmentExpiresAt"`
}

func (n *testNode) routerDetail(t testing.TB, admin, id string) routerDetail {
	t.Helper()
	r := n.do(t, http.MethodGet, mgmt+"/edge-routers/"+id, admin, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("router detail: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var d routerDetail
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

type routerCerts struct {
	ServerCert string `json:"serverCert"`
	Cert       string `json:"cert"`
	CA         string `json:"ca"`
}

func routerAnswer(t testing.TB, r response) routerCerts {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("router enrollment: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var c routerCerts
	if err := json.Unmarshal(data, &c); err != nil || c.Cert == "" || c.ServerCert == "" {
		t.Fatalf("router answer %s", data)
	}
	return c
}

// TestRouterEnrollmentAndExtension: a router created in management has an
// erott token and JWT; it enrolls with two CSRs (both spellings of the
// fields), once; an extension with its current client certificate gives
// new certificates and the previous client certificate stops working,
// although it has not expired.
func TestRouterEnrollmentAndExtension(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	id := n.create(t, admin, "edge-routers", map[string]any{"name": "er-1", "roleAttributes": []string{"edge"}})
	d := n.routerDetail(t, admin, id)
	// An unenrolled router's fingerprint is "", as the real controller sends.
	if d.IsVerified || d.Fingerprint == nil || *d.Fingerprint != "" || d.EnrollmentToken == nil || d.EnrollmentJWT == nil || d.EnrollmentExpiresAt == nil || d.EnrollmentCreatedAt == nil {
		t.Fatalf("new router %+v", d)
	}
	claims := n.verifyEnrollmentJWT(t, *d.EnrollmentJWT)
	if claims["em"] != "erott" || claims["sub"] != id || claims["jti"] != *d.EnrollmentToken {
		t.Errorf("router JWT claims %v", claims)
	}
	// An update keeps the pending enrollment.
	if r := n.do(t, http.MethodPatch, mgmt+"/edge-routers/"+id, admin, map[string]any{"cost": 7}); r.Status != http.StatusOK {
		t.Fatalf("patch: %d %s", r.Status, r.Body)
	}
	if d2 := n.routerDetail(t, admin, id); d2.EnrollmentToken == nil || *d2.EnrollmentToken != *d.EnrollmentToken {
		t.Fatalf("patch changed the enrollment: %+v", d2)
	}

	serverKey, clientKey := newKey(t), newKey(t)
	body := map[string]string{
		"serverCertCsr": csrPEM(t, serverKey, "er-1", "er-1.example.com"),
		"certCsr":       csrPEM(t, clientKey, "er-1"),
	}
	post := func(path string, body any, cert *tls.Certificate) response {
		return n.send(t, request{method: http.MethodPost, path: path, contentType: "application/json", body: jsonBody(t, body), cert: cert})
	}
	bad := map[string]string{"serverCertCsr": body["serverCertCsr"], "certCsr": badCSR(t, clientKey)}
	expectError(t, post(clientAPI+"/enroll/erott?token="+*d.EnrollmentToken, bad, nil), http.StatusBadRequest, posture.CodeCouldNotProcessCSR, "")
	expectError(t, post(clientAPI+"/enroll/erott?token="+*d.EnrollmentToken, map[string]string{"certCsr": body["certCsr"]}, nil), http.StatusBadRequest, posture.CodeMissingOrInvalidCSR, "")
	expectError(t, post(clientAPI+"/enroll/erott?token="+posture.NewToken(), body, nil), http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")
	// A router's server certificate may not name the controller: every
	// client of its APIs trusts the same CA.
	posing := map[string]string{"serverCertCsr": csrPEM(t, serverKey, "er-1", "er-1.example.com", "LocalHost"), "certCsr": body["certCsr"]}
	r := post(clientAPI+"/enroll/erott?token="+*d.EnrollmentToken, posing, nil)
	expectError(t, r, http.StatusBadRequest, posture.CodeMissingOrInvalidCSR, "")
	if !strings.Contains(string(r.Body), "names LocalHost, which a controller's own certificate is for") {
		t.Errorf("posing as the controller: %s", r.Body)
	}
	if n.routerDetail(t, admin, id).IsVerified {
		t.Fatal("a refused enrollment verified the router")
	}

	certs := routerAnswer(t, post(clientAPI+"/enroll/erott?token="+*d.EnrollmentToken, body, nil))
	server, client := parseCertPEM(t, certs.ServerCert), parseCertPEM(t, certs.Cert)
	if certs.CA != string(n.ca.PEM()) || client.Subject.CommonName != id || server.Subject.CommonName != id {
		t.Errorf("router certificates: CN %q / %q", client.Subject.CommonName, server.Subject.CommonName)
	}
	if err := n.ca.Verify(server, pki.UsageServer); err != nil || !slices.Contains(server.DNSNames, "er-1.example.com") {
		t.Errorf("server certificate: %v %v", err, server.DNSNames)
	}
	if err := n.ca.Verify(client, pki.UsageClient); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	d = n.routerDetail(t, admin, id)
	if !d.IsVerified || d.Fingerprint == nil || *d.Fingerprint != pki.Fingerprint(client) || d.EnrollmentToken != nil || d.EnrollmentJWT != nil {
		t.Fatalf("enrolled router %+v", d)
	}
	expectError(t, post(clientAPI+"/enroll/erott", map[string]string{"token": claims["jti"].(string), "serverCertCsr": body["serverCertCsr"], "certCsr": body["certCsr"]}, nil),
		http.StatusBadRequest, posture.CodeInvalidEnrollmentToken, "")

	// The spec's field names, through POST /enroll?method=erott.
	id2 := n.create(t, admin, "edge-routers", map[string]any{"name": "er-2"})
	tok2 := *n.routerDetail(t, admin, id2).EnrollmentToken
	routerAnswer(t, post("/enroll?method=erott&token="+tok2, map[string]string{
		"serverCsr": csrPEM(t, newKey(t), "er-2"), "clientCsr": csrPEM(t, newKey(t), "er-2"),
	}, nil))
	if !n.routerDetail(t, admin, id2).IsVerified {
		t.Fatal("er-2 not verified")
	}

	// Extension with the current client certificate.
	oldKP := keyPair(t, certs.Cert, clientKey)
	newClientKey := newKey(t)
	ext := map[string]string{"serverCertCsr": csrPEM(t, newKey(t), "er-1"), "certCsr": csrPEM(t, newClientKey, "er-1")}
	expectError(t, post(clientAPI+"/enroll/extend/router", ext, nil), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	stray, _ := newTestCA(t, "stray").issue(t, id)
	expectError(t, post(clientAPI+"/enroll/extend/router", ext, &stray), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	r = post(clientAPI+"/enroll/extend/router", ext, &oldKP)
	if r.Status != http.StatusOK {
		t.Fatalf("extend: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var renewed routerCerts
	if err := json.Unmarshal(data, &renewed); err != nil || renewed.Cert == "" || renewed.ServerCert == "" {
		t.Fatalf("extend answer %s", data)
	}
	newClient := parseCertPEM(t, renewed.Cert)
	if d := n.routerDetail(t, admin, id); d.Fingerprint == nil || *d.Fingerprint != pki.Fingerprint(newClient) {
		t.Fatalf("after extension %+v", d)
	}
	// The previous client certificate is unexpired but no longer works.
	if old := oldKP.Leaf; old == nil || !old.NotAfter.After(newClient.NotBefore) {
		t.Fatal("the old certificate should still be within its validity")
	}
	expectError(t, post(clientAPI+"/enroll/extend/router", ext, &oldKP), http.StatusUnauthorized, posture.CodeUnauthorized, "")
	newKP := keyPair(t, renewed.Cert, newClientKey)
	if r := post(clientAPI+"/enroll/extend/router", map[string]string{"serverCsr": csrPEM(t, newKey(t), "er-1"), "clientCsr": csrPEM(t, newKey(t), "er-1")}, &newKP); r.Status != http.StatusOK {
		t.Fatalf("extend with the new certificate: %d %s", r.Status, r.Body)
	}
}
