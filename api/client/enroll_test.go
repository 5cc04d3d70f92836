package client

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
	"github.com/seed-0809debe/posture/pki"
)

// The one-time tokens of the enrollment tests.
var (
	ottToken     = posture.NewToken()
	updbToken    = posture.NewToken()
	expiredToken = posture.NewToken()
)

// withEnrollments gives the stranger a pending ott enrollment and a updb
// one with a preset username, and the laptop an expired ott enrollment.
func withEnrollments(t *testing.T, s *memStore) {
	withAuthenticators(t, s)
	delete(s.authenticators, "auth3") // the stranger has no password yet
	s.enrollments = []posture.Enrollment{
		{ID: "enr-ott", Method: posture.EnrollOTT, IdentityID: "ident2", TokenHash: posture.HashToken(ottToken), ExpiresAt: handlerNow.Add(time.Hour)},
		{ID: "enr-updb", Method: posture.EnrollUPDB, IdentityID: "ident2", Username: "stranger-2", TokenHash: posture.HashToken(updbToken), ExpiresAt: handlerNow.Add(time.Hour)},
		{ID: "enr-old", Method: posture.EnrollOTT, IdentityID: "ident1", TokenHash: posture.HashToken(expiredToken), ExpiresAt: handlerNow},
	}
}

// TestEnrollHandlers: one-time enrollment with a token (a certificate for
// a CSR, or a password for a preset username), what it refuses without
// consuming the token, and the trust bootstrap documents.
func TestEnrollHandlers(t *testing.T) {
	enrolled := posture.IdentityEnrolled{}.EventType()
	csr := newCSR(t, "ignored")
	csrJSON, _ := json.Marshal(csr)
	pemBody := map[string]string{"Content-Type": "application/x-pem-file"}
	runClient(t, nil, []apitest.Case{
		{Name: "enroll: method missing", Method: http.MethodPost, Path: "/enroll?token=" + ottToken, Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollMethod},
		{Name: "enroll: method unknown", Method: http.MethodPost, Path: "/enroll?method=sms&token=" + ottToken, Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollMethod},
		{Name: "enroll ott: a PEM CSR, answered with the PEM chain", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + ottToken, Body: csr, Header: pemBody,
			Status: http.StatusOK, Appended: []string{enrolled},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				e := payload[posture.IdentityEnrolled](t, log)
				certs, err := pki.ParseCertificatesPEM(r.Body)
				if err != nil || len(certs) != 2 || certs[0].Subject.CommonName != "ident2" || pki.Fingerprint(certs[0]) != e.Authenticator.Fingerprint ||
					e.EnrollmentID != "enr-ott" || e.Authenticator.Method != posture.MethodCert || !e.Authenticator.IsIssuedByNetwork {
					t.Fatalf("enrolled %+v, answered %d certificates (%v)", e, len(certs), err)
				}
			}},
		{Name: "enrollOTTJSON: {token, clientCsr}, answered in JSON", Method: http.MethodPost, Path: "/enroll/ott", Body: `{"token":"` + ottToken + `","clientCsr":` + string(csrJSON) + `}`,
			Status: http.StatusOK, Appended: []string{enrolled},
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v certResponse
				r.DataInto(t, &v)
				if !strings.HasPrefix(v.Cert, "-----BEGIN CERTIFICATE-----") || !strings.HasPrefix(v.CA, "-----BEGIN CERTIFICATE-----") {
					t.Fatalf("answer %s", r.Data)
				}
			}},
		{Name: "enroll ott: a token that is no UUID", Method: http.MethodPost, Path: "/enroll?method=ott&token=abc", Body: csr, Header: pemBody,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollmentToken},
		{Name: "enroll ott: a token unknown", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + posture.NewToken(), Body: csr, Header: pemBody,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollmentToken},
		{Name: "enroll ott: a updb token", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + updbToken, Body: csr, Header: pemBody,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollmentToken},
		{Name: "enroll ott: expired", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + expiredToken, Body: csr, Header: pemBody,
			Status: http.StatusBadRequest, Code: posture.CodeEnrollmentExpired},
		{Name: "enroll ott: no CSR", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + ottToken,
			Status: http.StatusBadRequest, Code: posture.CodeMissingOrInvalidCSR},
		{Name: "enroll ott: a CSR that is none", Method: http.MethodPost, Path: "/enroll?method=ott&token=" + ottToken, Body: "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
			Header: pemBody, Status: http.StatusBadRequest, Code: posture.CodeMissingOrInvalidCSR},
		{Name: "enrollOTTJSON: malformed JSON", Method: http.MethodPost, Path: "/enroll/ott", Body: `{"token":`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "enrollUPDB: the preset username gets the password", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `{"password":"stranger-password"}`,
			Status: http.StatusOK, Appended: []string{enrolled},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				au := payload[posture.IdentityEnrolled](t, log).Authenticator
				if au.IdentityID != "ident2" || au.Username != "stranger-2" || au.Method != posture.MethodPassword || au.PasswordHash != "" ||
					!strings.HasPrefix(au.PasswordHashSealed, "sealed:ident2:"+posture.FieldPasswordHash+":$argon2id$") {
					t.Fatalf("enrolled %+v", au)
				}
			}},
		{Name: "enrollUPDB: a short password is not echoed", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `{"password":"abcd"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "password",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(string(r.Body), "abcd") {
					t.Fatalf("the password reached the answer: %s", r.Body)
				}
			}},
		{Name: "enrollUPDB: another username", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `{"username":"someone","password":"stranger-password"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "username"},
		{Name: "enrollUPDB: a body that is no object", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `stranger-password`,
			Header: map[string]string{"Content-Type": "text/plain"}, Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "enrollUPDB: a password of the wrong type", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `{"password":12345}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "enrollRouter: a token unknown", Method: http.MethodPost, Path: "/enroll/erott?token=" + posture.NewToken(), Body: `{"serverCertCsr":` + string(csrJSON) + `,"certCsr":` + string(csrJSON) + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidEnrollmentToken},
		{Name: "networkJWTs", Method: http.MethodGet, Path: "/network-jwts", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []networkJWT
				r.DataInto(t, &l)
				if len(l) != 1 || l[0].Name != "default" || strings.Count(l[0].Token, ".") != 2 {
					t.Fatalf("network JWTs %s", r.Data)
				}
			}},
		{Name: "caCerts: a PKCS#7 in base64", Method: http.MethodGet, Path: "/.well-known/est/cacerts", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if r.Header.Get("Content-Type") != "application/pkcs7-mime" || r.Header.Get("Content-Transfer-Encoding") != "base64" || len(r.Body) == 0 {
					t.Fatalf("cacerts %v", r.Header)
				}
			}},
	}, withEnrollments)
	runClient(t, nil, []apitest.Case{
		{Name: "enrollUPDB: the identity has a password", Method: http.MethodPost, Path: "/enroll/updb?token=" + updbToken, Body: `{"password":"stranger-password"}`,
			Status: http.StatusConflict, Code: posture.CodeEnrollmentExists},
	}, func(t *testing.T, s *memStore) {
		withEnrollments(t, s)
		s.authenticators["auth3"] = posture.Authenticator{ID: "auth3", IdentityID: "ident2", Method: posture.MethodPassword, Username: "stranger-user"}
	})
}

// issue is a client certificate of the test CA for a new key.
func issue(t *testing.T, ca *pki.CA, cn string) *x509.Certificate {
	t.Helper()
	cert, _, err := ca.SignCSR([]byte(newCSR(t, cn)), pki.SignRequest{CommonName: cn, Usage: pki.UsageClient})
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// TestCertificateHandlers: the ephemeral certificates of the caller's API
// session, and the extension of a cert authenticator the network issued,
// which must be asked for with its current certificate over mutual TLS.
func TestCertificateHandlers(t *testing.T) {
	ca, _ := testPKI(t)
	current, next := issue(t, ca, "ident1"), issue(t, ca, "ident1")
	mtls := &tls.ConnectionState{PeerCertificates: []*x509.Certificate{current}}
	csrJSON, _ := json.Marshal(newCSR(t, "laptop"))
	nextJSON, _ := json.Marshal(string(pki.EncodePEM(next)))
	setup := func(t *testing.T, s *memStore) {
		withAuthenticators(t, s)
		s.authenticators["auth4"] = posture.Authenticator{ID: "auth4", IdentityID: "ident1", Method: posture.MethodCert, CertPEM: string(pki.EncodePEM(current)),
			Fingerprint: pki.Fingerprint(current), IsIssuedByNetwork: true, Tags: posture.Tags{}}
		s.extensions["auth4"] = posture.CertExtension{AuthenticatorID: "auth4", IdentityID: "ident1", CertPEM: string(pki.EncodePEM(next)), Fingerprint: pki.Fingerprint(next)}
		s.certificates["sc1"] = posture.SessionCertificate{ID: "sc1", APISessionID: "apis1", IdentityID: "ident1", Subject: "CN=ident1", ValidTo: handlerNow.Add(time.Hour)}
		s.certificates["sc2"] = posture.SessionCertificate{ID: "sc2", APISessionID: "apis2", IdentityID: "ident1"}
	}
	runClient(t, caller, []apitest.Case{
		{Name: "createSessionCertificate: valid for 12 hours", Method: http.MethodPost, Path: "/current-api-session/certificates", Body: `{"csr":` + string(csrJSON) + `}`,
			Status: http.StatusCreated, Appended: []string{posture.SessionCertificateCreated{}.EventType()},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				sc := payload[posture.SessionCertificateCreated](t, log).Certificate
				var v sessionCertificateCreated
				r.DataInto(t, &v)
				if v.ID != sc.ID || sc.APISessionID != "apis1" || !sc.ValidTo.Equal(handlerNow.Add(SessionCertificateValidity)) || v.Certificate != sc.CertPEM || v.CAs == "" {
					t.Fatalf("created %+v, answered %s", sc, r.Data)
				}
			}},
		{Name: "createSessionCertificate: csr missing", Method: http.MethodPost, Path: "/current-api-session/certificates", Body: `{}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "csr"},
		{Name: "createSessionCertificate: a csr that is none", Method: http.MethodPost, Path: "/current-api-session/certificates", Body: `{"csr":"hello"}`,
			Status: http.StatusBadRequest, Code: posture.CodeMissingOrInvalidCSR},
		{Name: "createSessionCertificate: csr of the wrong type", Method: http.MethodPost, Path: "/current-api-session/certificates", Body: `{"csr":["a"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "listSessionCertificates: the API session's own", Method: http.MethodGet, Path: "/current-api-session/certificates", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []sessionCertificateView
				r.DataInto(t, &l)
				if len(l) != 1 || l[0].ID != "sc1" {
					t.Fatalf("certificates %s", r.Data)
				}
			}},
		{Name: "detailSessionCertificate: another API session's is not found", Method: http.MethodGet, Path: "/current-api-session/certificates/sc2",
			Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "deleteSessionCertificate", Method: http.MethodDelete, Path: "/current-api-session/certificates/sc1", Status: http.StatusOK,
			Appended: []string{posture.SessionCertificateDeleted{}.EventType()}},
		{Name: "extendAuthenticator: with the current certificate", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend", TLS: mtls,
			Body: `{"clientCertCsr":` + string(csrJSON) + `}`, Status: http.StatusOK, Appended: []string{posture.CertExtended{}.EventType()},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				x := payload[posture.CertExtended](t, log).Extension
				var v extendResponse
				r.DataInto(t, &v)
				if x.AuthenticatorID != "auth4" || v.ClientCert != x.CertPEM || x.Fingerprint == pki.Fingerprint(current) {
					t.Fatalf("extended %+v, answered %s", x, r.Data)
				}
			}},
		{Name: "extendAuthenticator: without mutual TLS", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend",
			Body: `{"clientCertCsr":` + string(csrJSON) + `}`, Status: http.StatusUnauthorized, Code: posture.CodeUnauthorized},
		{Name: "extendAuthenticator: a password authenticator", Method: http.MethodPost, Path: "/current-identity/authenticators/auth1/extend", TLS: mtls,
			Body: `{"clientCertCsr":` + string(csrJSON) + `}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "id"},
		{Name: "extendAuthenticator: a certificate the network did not issue", Method: http.MethodPost, Path: "/current-identity/authenticators/auth2/extend", TLS: mtls,
			Body: `{"clientCertCsr":` + string(csrJSON) + `}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "id"},
		{Name: "extendAuthenticator: clientCertCsr missing", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend", TLS: mtls,
			Body: `{}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "clientCertCsr"},
		{Name: "extendVerifyAuthenticator: the certificate the extension issued", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend-verify",
			Body: `{"clientCert":` + string(nextJSON) + `}`, Status: http.StatusOK, Appended: []string{posture.CertExtensionVerified{}.EventType()}},
		{Name: "extendVerifyAuthenticator: another certificate", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend-verify",
			Body:   `{"clientCert":` + mustJSON(string(pki.EncodePEM(current))) + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "clientCert"},
		{Name: "extendVerifyAuthenticator: clientCert that is no PEM", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend-verify",
			Body: `{"clientCert":"hello"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "clientCert"},
		{Name: "extendVerifyAuthenticator: clientCert missing", Method: http.MethodPost, Path: "/current-identity/authenticators/auth4/extend-verify",
			Body: `{}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "clientCert"},
	}, setup)
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
