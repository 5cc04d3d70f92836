package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// selfSignedPEM is a certificate for the key, as an identity provider
// publishes it.
func selfSignedPEM(t testing.TB, key crypto.Signer) string {
	t.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test idp"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func signJWT(t testing.TB, method jwt.SigningMethod, key crypto.Signer, kid string, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// extLogin authenticates with a bearer JWT.
func (n *testNode) extLogin(t testing.TB, token string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, n.srv.URL+api.ClientBase+"/authenticate?method=ext-jwt", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := n.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: body}
}

// expectAuthFailure checks a 401 INVALID_AUTH whose message says why.
func expectAuthFailure(t testing.TB, r response, reason string) {
	t.Helper()
	_, e := r.envelope(t)
	if r.Status != http.StatusUnauthorized || e.Code != posture.CodeInvalidAuth || !strings.Contains(e.Message, reason) {
		t.Fatalf("got %d %s, want 401 INVALID_AUTH saying %q", r.Status, r.Body, reason)
	}
}

// TestExtJWTSigners: management CRUD and validation of external JWT
// signers, the public client list, and ext-jwt authentication with an ECDSA
// key pair made here (certificate signer) and an RSA key served as a JWKS:
// a good token logs in; an expired one, one signed with another key, one for
// another audience, one from an unknown issuer or a disabled signer are 401
// INVALID_AUTH with a message that says which. Deleting a signer ends the
// sessions of the tokens it verified.
func TestExtJWTSigners(t *testing.T) {
	// The identity provider of the JWKS signer (below), over TLS.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var fetches atomic.Int32
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		writeJWKS(w, &rsaKey.PublicKey)
	}))
	defer idp.Close()
	cfg := defaultTestConfig(t.TempDir())
	cfg.jwksRoots = x509.NewCertPool()
	cfg.jwksRoots.AddCert(idp.Certificate())
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := selfSignedPEM(t, ecKey)
	byExt := n.create(t, admin, "identities", map[string]any{"name": "jwt-user", "type": "User", "isAdmin": false, "externalId": "ext-123"})

	// Validation.
	valid := func() map[string]any {
		return map[string]any{"name": "idp", "issuer": "https://idp.test", "audience": "postured", "certPem": certPEM,
			"useExternalId": true, "enabled": true, "externalAuthUrl": "https://idp.test/auth", "clientId": "postured-client", "scopes": []string{"openid"}}
	}
	without := func(k string) map[string]any { m := valid(); delete(m, k); return m }
	with := func(k string, v any) map[string]any { m := valid(); m[k] = v; return m }
	for name, c := range map[string]struct {
		body  map[string]any
		field string
	}{
		"no name":            {without("name"), "name"},
		"no issuer":          {without("issuer"), "issuer"},
		"no audience":        {without("audience"), "audience"},
		"no enabled":         {without("enabled"), "enabled"},
		"no key":             {without("certPem"), "certPem"},
		"both keys":          {with("jwksEndpoint", "https://idp.test/jwks"), "certPem"},
		"bad certificate":    {with("certPem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), "certPem"},
		"bad auth url":       {with("externalAuthUrl", "not a url"), "externalAuthUrl"},
		"bad tag":            {with("tags", map[string]any{"x": 1.5}), "tags.x"},
		"jwks not http":      {func() map[string]any { m := without("certPem"); m["jwksEndpoint"] = "ftp://idp.test/jwks"; return m }(), "jwksEndpoint"},
		"jwks relative path": {func() map[string]any { m := without("certPem"); m["jwksEndpoint"] = "/jwks"; return m }(), "jwksEndpoint"},
		"jwks plain http":    {func() map[string]any { m := without("certPem"); m["jwksEndpoint"] = "http://idp.test/jwks"; return m }(), "jwksEndpoint"},
	} {
		t.Run(name, func(t *testing.T) {
			expectError(t, n.do(t, http.MethodPost, mgmt+"/external-jwt-signers", admin, c.body), 400, posture.CodeCouldNotValidate, c.field)
		})
	}
	signer := n.create(t, admin, "external-jwt-signers", valid())
	expectError(t, n.do(t, http.MethodPost, mgmt+"/external-jwt-signers", admin, with("name", "idp-2")), 400, posture.CodeCouldNotValidate, "issuer")
	expectError(t, n.do(t, http.MethodPost, mgmt+"/external-jwt-signers", admin, with("issuer", "https://other.test")), 400, posture.CodeCouldNotValidate, "name")
	d := n.detail(t, admin, "external-jwt-signers", signer)
	if d["claimsProperty"] != "sub" || d["issuer"] != "https://idp.test" || d["useExternalId"] != true || d["enabled"] != true ||
		d["fingerprint"] == nil || d["jwksEndpoint"] != nil || d["clientId"] != "postured-client" {
		t.Fatalf("signer detail: %v", d)
	}

	// The client API lists enabled signers without a session.
	r := n.do(t, http.MethodGet, api.ClientBase+"/external-jwt-signers", "", nil)
	if data, _ := r.envelope(t); r.Status != http.StatusOK || !strings.Contains(string(data), `"name":"idp"`) ||
		!strings.Contains(string(data), `"externalAuthUrl":"https://idp.test/auth"`) || strings.Contains(string(data), "BEGIN CERTIFICATE") {
		t.Fatalf("client signer list: %d %s", r.Status, data)
	}

	now := time.Now()
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "https://idp.test", "aud": "postured", "sub": "ext-123", "exp": now.Add(5 * time.Minute).Unix(), "iat": now.Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}

	// A good token: an API session of the identity with that externalId.
	r = n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(nil)))
	if r.Status != http.StatusOK {
		t.Fatalf("ext-jwt login: %d %s", r.Status, r.Body)
	}
	data, _ := r.envelope(t)
	var s api.APISessionView
	if err := json.Unmarshal(data, &s); err != nil || s.IdentityID != byExt || s.Token != r.Header.Get(api.HeaderSession) {
		t.Fatalf("ext-jwt session: %s", data)
	}
	if r := n.do(t, http.MethodGet, api.ClientBase+"/current-identity", s.Token, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"name":"jwt-user"`) {
		t.Fatalf("current identity of an ext-jwt session: %d %s", r.Status, r.Body)
	}

	otherKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) {
		c["exp"] = now.Add(-time.Minute).Unix()
	}))), "expired")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, otherKey, "", claims(nil))), "signature")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) { c["aud"] = "someone-else" }))), "audience")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }))), "issuer")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) { delete(c, "exp") }))), "no expiry (exp)")
	// A token with an expiry and no audience is refused for its audience.
	r = n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) { delete(c, "aud") })))
	expectAuthFailure(t, r, "no audience (aud")
	if strings.Contains(string(r.Body), "expiry") {
		t.Fatalf("a token with an expiry and no audience: %s", r.Body)
	}
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(func(c jwt.MapClaims) { c["sub"] = "nobody" }))), "no identity")
	expectAuthFailure(t, n.extLogin(t, ""), "Bearer")
	expectAuthFailure(t, n.extLogin(t, "not.a.jwt"), "not a JWT")
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claims(nil))
	hsToken, _ := hs.SignedString([]byte(certPEM))
	expectAuthFailure(t, n.extLogin(t, hsToken), "algorithm")

	// A disabled signer is refused; deleted, its issuer is unknown.
	if r := n.do(t, http.MethodPatch, mgmt+"/external-jwt-signers/"+signer, admin, map[string]any{"enabled": false}); r.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", r.Status, r.Body)
	}
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(nil))), "disabled")
	if r := n.do(t, http.MethodGet, api.ClientBase+"/external-jwt-signers", "", nil); strings.Contains(string(r.Body), `"name":"idp"`) {
		t.Fatalf("a disabled signer is listed to clients: %s", r.Body)
	}
	if r := n.do(t, http.MethodDelete, mgmt+"/external-jwt-signers/"+signer, admin, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodES256, ecKey, "", claims(nil))), "issuer")
	// The session of a token it verified ends with it.
	expectError(t, n.do(t, http.MethodGet, api.ClientBase+"/current-identity", s.Token, nil), 401, posture.CodeUnauthorized, "")

	// A JWKS signer: an RSA key served by an identity provider; the
	// identity is named by its id in the "uid" claim. The key set is
	// fetched once and cached.
	byID := n.create(t, admin, "identities", map[string]any{"name": "jwks-user", "type": "User", "isAdmin": false})
	n.create(t, admin, "external-jwt-signers", map[string]any{"name": "idp-jwks", "issuer": "https://idp2.test", "audience": "aud-2",
		"jwksEndpoint": idp.URL + "/jwks", "claimsProperty": "uid", "enabled": true})
	jwksClaims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": "https://idp2.test", "aud": []string{"aud-2", "other"}, "uid": byID, "exp": now.Add(time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	for range 2 {
		r = n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", jwksClaims(nil)))
		if data, _ := r.envelope(t); r.Status != http.StatusOK || !strings.Contains(string(data), `"identityId":"`+byID+`"`) {
			t.Fatalf("JWKS login: %d %s", r.Status, r.Body)
		}
	}
	if got := fetches.Load(); got != 1 {
		t.Fatalf("the key set was fetched %d times, want 1 (cached)", got)
	}
	// Any admin may add a signer; none signs in as the default admin.
	defaultAdmin, err := n.store.IdentityByName("admin")
	if err != nil || !defaultAdmin.IsDefaultAdmin {
		t.Fatalf("the default admin: %+v %v", defaultAdmin, err)
	}
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", jwksClaims(func(c jwt.MapClaims) { c["uid"] = defaultAdmin.ID }))), "default admin")
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, otherRSA, "k1", jwksClaims(nil))), "signature")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", jwksClaims(func(c jwt.MapClaims) { c["aud"] = "aud-3" }))), "audience")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", jwksClaims(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Second).Unix() }))), "expired")
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k9", jwksClaims(nil))), `no key "k9"`)
	expectAuthFailure(t, n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", jwksClaims(func(c jwt.MapClaims) { delete(c, "uid") }))), `"uid"`)
}

// writeJWKS answers a key set of one RSA key, k1.
func writeJWKS(w http.ResponseWriter, key *rsa.PublicKey) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]any{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
}

// TestExtJWTKeySetFetchIsGuarded: a token names its signer and anyone may
// send one, so the key set's fetch is held to what webhook deliveries are:
// no address of --webhook-deny, no redirect followed, and a failed fetch
// not tried again at once. The caller learns only that no key was found.
func TestExtJWTKeySetFetchIsGuarded(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	hits := map[string]int{}
	idp := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/jwks", http.StatusFound)
			return
		}
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		writeJWKS(w, &rsaKey.PublicKey)
	}))
	defer idp.Close()
	hitsOf := func(path string) int { mu.Lock(); defer mu.Unlock(); return hits[path] }
	roots := x509.NewCertPool()
	roots.AddCert(idp.Certificate())
	login := func(n *testNode, issuer string) response {
		claims := jwt.MapClaims{"iss": issuer, "aud": "postured", "sub": "someone", "exp": time.Now().Add(time.Minute).Unix()}
		return n.extLogin(t, signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", claims))
	}
	signer := func(n *testNode, name, endpoint string) string {
		issuer := "https://" + name + ".test"
		n.create(t, n.adminToken(t), "external-jwt-signers", map[string]any{"name": name, "issuer": issuer, "audience": "postured",
			"jwksEndpoint": endpoint, "enabled": true})
		return issuer
	}

	// The loopback is in the default --webhook-deny: an endpoint written as
	// such an address is refused, and one named (localhost) is created but
	// nothing is fetched.
	cfg := defaultTestConfig(t.TempDir())
	cfg.jwksRoots, cfg.WebhookDeny = roots, []string{"127.0.0.0/8", "::1/128"}
	n := startTestNode(t, cfg)
	expectError(t, n.do(t, http.MethodPost, mgmt+"/external-jwt-signers", n.adminToken(t), map[string]any{"name": "literal",
		"issuer": "https://literal.test", "audience": "postured", "jwksEndpoint": idp.URL + "/jwks", "enabled": true}),
		http.StatusBadRequest, posture.CodeCouldNotValidate, "jwksEndpoint")
	iss := signer(n, "denied", strings.Replace(idp.URL, "127.0.0.1", "localhost", 1)+"/jwks")
	for range 2 {
		expectAuthFailure(t, login(n, iss), `has no key "k1"`)
	}
	if got := hitsOf("/jwks"); got != 0 {
		t.Fatalf("a key set in a denied network was fetched %d times", got)
	}

	// Without the deny list: a redirect is not followed, and the failed
	// fetch is not made again for the next token.
	cfg = defaultTestConfig(t.TempDir())
	cfg.jwksRoots = roots
	n = startTestNode(t, cfg)
	iss = signer(n, "moved", idp.URL+"/moved")
	for range 3 {
		expectAuthFailure(t, login(n, iss), `has no key "k1"`)
	}
	if moved, jwks := hitsOf("/moved"), hitsOf("/jwks"); moved != 1 || jwks != 0 {
		t.Fatalf("fetches: %d of the redirect (want 1), %d of its target (want 0)", moved, jwks)
	}

	// A caller that goes away while the key set is fetched does not fail
	// the fetch for the callers after it.
	iss = signer(n, "slow", idp.URL+"/slow")
	claims := jwt.MapClaims{"iss": iss, "aud": "postured", "sub": "someone", "exp": time.Now().Add(time.Minute).Unix()}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, n.srv.URL+api.ClientBase+"/authenticate?method=ext-jwt", nil)
	req.Header.Set("Authorization", "Bearer "+signJWT(t, jwt.SigningMethodRS256, rsaKey, "k1", claims))
	if resp, err := n.http.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the impatient login was answered %d", resp.StatusCode)
	}
	// The key set fetched, the token is checked against it: the subject
	// is no identity.
	expectAuthFailure(t, login(n, iss), "someone")
	if got := hitsOf("/slow"); got != 1 {
		t.Fatalf("the slow key set was fetched %d times, want 1", got)
	}
}
