package management

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
	"github.com/seed-0809debe/posture/pki"
)

// testCA is a real CA in a temporary directory.
func testCA(t *testing.T) *pki.CA {
	t.Helper()
	ca, err := pki.Open(t.TempDir(), pki.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestCAHandlers: a CA is added with its certificate (which cannot change),
// and verified with proof of its key; its verification token is sealed.
func TestCAHandlers(t *testing.T) {
	ca := testCA(t)
	pemJSON, _ := json.Marshal(string(ca.PEM()))
	flags := `"isAuthEnabled":true,"isAutoCaEnrollmentEnabled":false,"isOttCaEnrollmentEnabled":true`
	other := testCA(t)
	otherPEM, _ := json.Marshal(string(other.PEM()))
	weakPEM, _ := json.Marshal(string(weakCAPEM(t)))
	known := posture.CA{ID: "ca1", Name: "corp", CertPEM: string(other.PEM()), Fingerprint: pki.Fingerprint(other.Certificate()),
		IdentityRoles: []string{}, IdentityNameFormat: posture.DefaultIdentityNameFormat, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	verified := known
	verified.ID, verified.Name, verified.Fingerprint, verified.IsVerified = "ca2", "verified", "fp", true
	runManagement(t, []apitest.Case{
		{Name: "createCA", Method: http.MethodPost, Path: "/cas", Body: `{"name":"partner","certPem":` + string(pemJSON) + `,` + flags + `}`,
			Status: http.StatusCreated, Appended: []string{created[posture.CA]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				c := payload[posture.Created[posture.CA]](t, log).Entity
				if c.Fingerprint != pki.Fingerprint(ca.Certificate()) || c.IsVerified || !strings.HasPrefix(c.VerificationTokenSealed, "sealed:"+c.ID+":") ||
					c.VerificationToken != "" || !c.IsAuthEnabled || c.IdentityNameFormat != posture.DefaultIdentityNameFormat {
					t.Fatalf("created %+v", c)
				}
			}},
		{Name: "createCA: the certificate of another CA", Method: http.MethodPost, Path: "/cas", Body: `{"name":"partner","certPem":` + string(otherPEM) + `,` + flags + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createCA: no PEM", Method: http.MethodPost, Path: "/cas", Body: `{"name":"partner","certPem":"hello",` + flags + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createCA: a 1024-bit RSA key", Method: http.MethodPost, Path: "/cas", Body: `{"name":"partner","certPem":` + string(weakPEM) + `,` + flags + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createCA: a flag missing", Method: http.MethodPost, Path: "/cas", Body: `{"name":"partner","certPem":` + string(pemJSON) + `,"isAuthEnabled":true}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "isAutoCaEnrollmentEnabled"},
		{Name: "createCA: an externalIdClaim that is no object", Method: http.MethodPost, Path: "/cas",
			Body:   `{"name":"partner","certPem":` + string(pemJSON) + `,` + flags + `,"externalIdClaim":[1]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "externalIdClaim"},
		{Name: "updateCA: the certificate cannot change", Method: http.MethodPut, Path: "/cas/ca1", Body: `{"name":"corp","certPem":` + string(pemJSON) + `,` + flags + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "patchCA: a new name", Method: http.MethodPatch, Path: "/cas/ca1", Body: `{"name":"corp-2"}`,
			Status: http.StatusOK, Appended: []string{updated[posture.CA]()}},
		{Name: "verifyCA: a body that is no certificate", Method: http.MethodPost, Path: "/cas/ca1/verify", Body: "not a certificate",
			Header: map[string]string{"Content-Type": "text/plain"}, Status: http.StatusBadRequest, Code: posture.CodeExpectedPEMCertificate},
		{Name: "verifyCA: already verified", Method: http.MethodPost, Path: "/cas/ca2/verify", Body: string(other.PEM()),
			Header: map[string]string{"Content-Type": "text/plain"}, Status: http.StatusConflict, Code: posture.CodeCAAlreadyVerified},
		{Name: "verifyCA: unknown id", Method: http.MethodPost, Path: "/cas/ca9/verify", Body: "x", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "caJWT: no enrollment signer", Method: http.MethodGet, Path: "/cas/ca1/jwt", Status: http.StatusServiceUnavailable, Code: posture.CodeUnavailable},
		{Name: "caJWT: unknown id", Method: http.MethodGet, Path: "/cas/ca9/jwt", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "deleteCA", Method: http.MethodDelete, Path: "/cas/ca1", Status: http.StatusOK, Appended: []string{deleted[posture.CA]()}},
	}, known, verified)
}

// TestExternalJWTSignerHandlers: a signer needs an issuer of its own and
// exactly one of a certificate and a JWKS endpoint.
func TestExternalJWTSignerHandlers(t *testing.T) {
	idp := posture.ExternalJWTSigner{ID: "sig1", Name: "idp", Issuer: "https://idp.example", Audience: "postured", Enabled: true,
		JWKSEndpoint: "https://idp.example/keys", Scopes: []string{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	certJSON, _ := json.Marshal(string(testCA(t).PEM()))
	base := `"audience":"postured","enabled":true`
	weakJSON, _ := json.Marshal(string(weakCAPEM(t)))
	runManagement(t, []apitest.Case{
		{Name: "createExternalJWTSigner: with a JWKS endpoint", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"jwksEndpoint":"https://idp2.example/keys"}`, Status: http.StatusCreated, Appended: []string{created[posture.ExternalJWTSigner]()}},
		{Name: "createExternalJWTSigner: with a certificate", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"certPem":` + string(certJSON) + `}`, Status: http.StatusCreated, Appended: []string{created[posture.ExternalJWTSigner]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if s := payload[posture.Created[posture.ExternalJWTSigner]](t, log).Entity; s.Fingerprint == "" {
					t.Fatalf("created %+v", s)
				}
			}},
		{Name: "createExternalJWTSigner: a certificate with a 1024-bit RSA key", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body:   `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"certPem":` + string(weakJSON) + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createExternalJWTSigner: both a certificate and a JWKS endpoint", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body:   `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"certPem":` + string(certJSON) + `,"jwksEndpoint":"https://idp2.example/keys"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createExternalJWTSigner: neither", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem"},
		{Name: "createExternalJWTSigner: the issuer is taken", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp.example",` + base + `,"jwksEndpoint":"https://idp2.example/keys"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "issuer"},
		{Name: "createExternalJWTSigner: a JWKS endpoint that is no URL", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"jwksEndpoint":"ftp://idp2"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "jwksEndpoint"},
		{Name: "createExternalJWTSigner: a JWKS endpoint with a password", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"jwksEndpoint":"https://u:SignerPass123@idp2.example/keys"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "jwksEndpoint",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(string(r.Body), "SignerPass123") {
					t.Fatalf("the password is echoed: %s", r.Body)
				}
			}},
		{Name: "createExternalJWTSigner: enabled missing", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example","audience":"postured","jwksEndpoint":"https://idp2.example/keys"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "enabled"},
		{Name: "createExternalJWTSigner: scopes of the wrong type", Method: http.MethodPost, Path: "/external-jwt-signers",
			Body: `{"name":"idp2","issuer":"https://idp2.example",` + base + `,"jwksEndpoint":"https://idp2.example/keys","scopes":"openid"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "detailExternalJWTSigner", Method: http.MethodGet, Path: "/external-jwt-signers/sig1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if d := dataOf(t, r); d["issuer"] != "https://idp.example" || d["enabled"] != true {
					t.Fatalf("signer %s", r.Data)
				}
			}},
		{Name: "patchExternalJWTSigner: certPem and jwksEndpoint together, as in a create", Method: http.MethodPatch, Path: "/external-jwt-signers/sig1",
			Body: `{"certPem":` + string(certJSON) + `,"jwksEndpoint":"https://idp.example/keys"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "certPem",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if cause, _ := json.Marshal(r.Error.Cause); !strings.Contains(string(cause), "exclusive") {
					t.Fatalf("cause %s, want the two said exclusive", cause)
				}
			}},
		{Name: "patchExternalJWTSigner: a certificate in place of the JWKS endpoint", Method: http.MethodPatch, Path: "/external-jwt-signers/sig1",
			Body: `{"certPem":` + string(certJSON) + `,"jwksEndpoint":null}`, Status: http.StatusOK, Appended: []string{updated[posture.ExternalJWTSigner]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if s := payload[posture.Updated[posture.ExternalJWTSigner]](t, log).Entity; s.CertPEM == "" || s.JWKSEndpoint != "" {
					t.Fatalf("updated %+v", s)
				}
			}},
		{Name: "patchExternalJWTSigner: disable", Method: http.MethodPatch, Path: "/external-jwt-signers/sig1", Body: `{"enabled":false}`,
			Status: http.StatusOK, Appended: []string{updated[posture.ExternalJWTSigner]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if s := payload[posture.Updated[posture.ExternalJWTSigner]](t, log).Entity; s.Enabled || s.Issuer != idp.Issuer {
					t.Fatalf("updated %+v", s)
				}
			}},
	}, idp)
}

// weakCAPEM is a self-signed CA certificate with a 1024-bit RSA key.
func weakCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "weak"}, NotBefore: handlerNow.Add(-time.Hour),
		NotAfter: handlerNow.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
