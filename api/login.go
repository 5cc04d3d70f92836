package api

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// LoginStore is what authentication reads (projections.Store implements it).
type LoginStore interface {
	Sessions
	ModelReader // the config types a login asks for
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	MFA(identityID string) (posture.MFA, error)
}

// ExtJWTVerifier verifies the bearer JWT of an ext-jwt authentication and
// returns what it names: the identity and the signer that verified it. Its
// failures are 401 INVALID_AUTH errors that say what was wrong (expired,
// signature, audience, issuer...).
type ExtJWTVerifier interface {
	VerifyJWT(ctx context.Context, token string) (Credential, error)
}

// Login serves authentication and the current API session on both APIs.
type Login struct {
	Store  LoginStore
	Writer *Writer
	Auth   *Auth
	// ExtJWT verifies ext-jwt authentications; nil disables the method.
	ExtJWT ExtJWTVerifier
	// Cert verifies cert authentications; nil disables the method.
	Cert CertVerifier
	// Limiter limits failed attempts (nil: no limit).
	Limiter *Limiter
	// Budget bounds the bytes each identity's logins may have this node
	// keep (nil: no bound).
	Budget *Budget
	// Secrets opens sealed password hashes.
	Secrets Secrets
}

// Authentication methods of POST /authenticate.
const (
	AuthPassword = "password"
	AuthCert     = "cert"
	AuthExtJWT   = "ext-jwt"
)

type authenticateRequest struct {
	Username    string           `json:"username"`
	Password    string           `json:"password"`
	ConfigTypes []string         `json:"configTypes"`
	EnvInfo     *posture.EnvInfo `json:"envInfo"`
	SDKInfo     *posture.SDKInfo `json:"sdkInfo"`
}

// decodeAuthenticate reads an authentication request and bounds what the
// client says of itself, which goes into the API session's event.
func decodeAuthenticate(c echo.Context) (authenticateRequest, error) {
	var req authenticateRequest
	if err := Decode(c, &req); err != nil {
		return req, err
	}
	if err := CheckSDKInfo(req.SDKInfo); err != nil {
		return req, err
	}
	if err := CheckEnvInfo(req.EnvInfo); err != nil {
		return req, err
	}
	return req, CheckList("configTypes", req.ConfigTypes, MaxConfigTypes, MaxLabel)
}

// Authenticate is POST /authenticate?method=...
func (l *Login) Authenticate(c echo.Context) error {
	method := c.QueryParam("method")
	switch method {
	case AuthPassword:
		return l.password(c)
	case AuthExtJWT:
		if l.ExtJWT == nil {
			break
		}
		return l.extJWT(c)
	case AuthCert:
		if l.Cert == nil {
			break
		}
		return l.cert(c)
	case "":
		return posture.Invalid("method", "method is required: password, cert or ext-jwt", method)
	default:
		return posture.Invalid("method", "method must be one of password, cert, ext-jwt", method)
	}
	return &posture.Error{Code: posture.CodeInvalidAuthMethod, Message: "authentication method " + method + " is not enabled on this controller"}
}

// password authenticates with a username and a password. Failures count
// against the source, the username from this source and the username; the
// attempts the Limiter refuses (429) are refused before the password is
// looked at. A right password makes the source known to the username.
func (l *Login) password(c echo.Context) error {
	req, err := decodeAuthenticate(c)
	if err != nil {
		return err
	}
	if err := CheckLength("username", req.Username, MinUsername, MaxUsername); err != nil {
		return err
	}
	if err := CheckLength("password", req.Password, MinPassword, MaxPassword); err != nil {
		return err
	}
	subject := UserSubject(req.Username)
	if err := l.Limiter.Allow(c, subject); err != nil {
		return err
	}
	l.catchUp(c)
	auth, err := l.Store.AuthenticatorByUsername(req.Username)
	if err != nil && !errors.Is(err, posture.ErrNotFound) {
		l.Limiter.Released(c, subject)
		return err
	}
	// The password is checked (against a dummy hash when the user is
	// unknown) before anything else, so that every failure costs the same.
	hash, err := PasswordHashOf(c.Request().Context(), l.Secrets, auth)
	if err != nil {
		l.Limiter.Released(c, subject)
		return err
	}
	ok, err := CheckPassword(c.Request().Context(), hash, req.Password)
	if err != nil {
		l.Limiter.Released(c, subject)
		return err
	}
	if !ok || auth.Method != posture.MethodPassword {
		l.Limiter.Failed(c, subject)
		return &posture.Error{Code: posture.CodeInvalidAuth}
	}
	identity, err := l.Store.Identity(auth.IdentityID)
	if err != nil && !errors.Is(err, posture.ErrNotFound) {
		l.Limiter.Released(c, subject)
		return err
	}
	// A disabled identity's right password is answered as a wrong one, and
	// counts as one: the answer must not tell which it was.
	if err != nil || identity.IsDisabled(l.Writer.Now()) {
		l.Limiter.Failed(c, subject)
		return &posture.Error{Code: posture.CodeInvalidAuth}
	}
	l.Limiter.Succeeded(c, subject)
	return l.startSession(c, Credential{Identity: identity, Authenticator: auth}, AuthPassword, req)
}

// extJWT authenticates with a JWT of an external signer in the
// Authorization header. Failures count against the source.
func (l *Login) extJWT(c echo.Context) error {
	req, err := decodeAuthenticate(c)
	if err != nil {
		return err
	}
	token, ok := bearer(c)
	if !ok {
		return &posture.Error{Code: posture.CodeInvalidAuth, Message: "ext-jwt authentication needs the JWT in the Authorization header: Bearer <token>"}
	}
	return l.verified(c, req, AuthExtJWT, func() (Credential, error) {
		return l.ExtJWT.VerifyJWT(c.Request().Context(), token)
	})
}

// Credential is what a verified login names: the identity, the
// authenticator it logged in with (none for an external JWT) and, for a
// certificate of a third-party CA, that CA, or for an external JWT its
// signer, whose delete ends the session.
type Credential struct {
	Identity      posture.Identity
	Authenticator posture.Authenticator
	CAID          string
	SignerID      string
}

// CertVerifier verifies the client certificate chain (leaf first) of a cert
// authentication and returns what it names. Its failures are 401
// INVALID_AUTH errors that say what was wrong.
type CertVerifier interface {
	VerifyCert(chain []*x509.Certificate) (Credential, error)
}

// cert authenticates with the client certificate of the TLS connection
// (mutual TLS). Failures count against the source.
func (l *Login) cert(c echo.Context) error {
	req, err := decodeAuthenticate(c)
	if err != nil {
		return err
	}
	state := c.Request().TLS
	if state == nil || len(state.PeerCertificates) == 0 {
		return &posture.Error{Code: posture.CodeInvalidAuth, Message: "cert authentication needs a client certificate on the TLS connection"}
	}
	return l.verified(c, req, AuthCert, func() (Credential, error) {
		return l.Cert.VerifyCert(state.PeerCertificates)
	})
}

// verified authenticates with a credential that verify checks. The attempt
// counts against the source's limit, and an INVALID_AUTH failure as a
// failed one.
func (l *Login) verified(c echo.Context, req authenticateRequest, method string, verify func() (Credential, error)) error {
	if err := l.Limiter.Allow(c, ""); err != nil {
		return err
	}
	l.catchUp(c)
	cred, err := verify()
	if posture.CodeOf(err) == posture.CodeInvalidAuth {
		l.Limiter.Failed(c, "")
	}
	if err != nil {
		return err
	}
	return l.startSession(c, cred, method, req)
}

// catchUp makes a login see the credentials changed through another node
// a moment ago (a user created, a password changed, a certificate
// enrolled): the node catches up with the log before it reads them, whether
// they turn out to be known or not, so that both cost the same. The reads
// of the log's position are shared between concurrent requests.
func (l *Login) catchUp(c echo.Context) {
	if l.Auth != nil {
		l.Auth.catchUp(c)
	}
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(c echo.Context) (string, bool) {
	h := strings.TrimSpace(c.Request().Header.Get(echo.HeaderAuthorization))
	scheme, token, ok := strings.Cut(h, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}

// MFAEnabled reports whether logging in as the identity needs a TOTP: it
// has a verified MFA enrollment.
func (l *Login) MFAEnabled(identityID string) (bool, error) {
	m, err := l.Store.MFA(identityID)
	if errors.Is(err, posture.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return m.Verified, nil
}

// startSession opens an API session for an authenticated identity, unless
// it is disabled. An identity with verified MFA gets a partial session:
// only the MFA operations work until a code is given to POST
// /authenticate/mfa.
func (l *Login) startSession(c echo.Context, cred Credential, method string, req authenticateRequest) error {
	identity, au := cred.Identity, cred.Authenticator
	if identity.IsDisabled(l.Writer.Now()) {
		return &posture.Error{Code: posture.CodeInvalidAuth} // as the password check answers it
	}
	mfa, err := l.MFAEnabled(identity.ID)
	if err != nil {
		return err
	}
	now := l.Writer.Now()
	token := posture.NewToken()
	configTypes := ConfigTypeIDs(l.Store, req.ConfigTypes)
	s := posture.APISession{
		ID:              posture.NewID(),
		TokenHash:       TokenHash(token),
		IdentityID:      identity.ID,
		AuthenticatorID: au.ID,
		CAID:            cred.CAID,
		CredentialAt:    au.UpdatedAt,
		SignerID:        cred.SignerID,
		AuthMethod:      method,
		CertExtendable:  method == AuthCert && au.IsIssuedByNetwork,
		IPAddress:       Source(c),
		ConfigTypes:     configTypes,
		MFARequired:     mfa,
		SDKInfo:         req.SDKInfo,
		EnvInfo:         req.EnvInfo,
		CreatedAt:       now,
		LastActivityAt:  now,
	}
	if _, err := l.Writer.AppendBudgeted(c, l.Budget, identity.ID, posture.APISessionCreated{APISession: s}, 0); err != nil {
		return err
	}
	// The projection starts no session whose credential was deleted or
	// changed after the login read it: that login fails as a wrong
	// credential does, not with a token that never works.
	if _, err := l.Store.APISessionByTokenHash(s.TokenHash); errors.Is(err, posture.ErrNotFound) {
		return &posture.Error{Code: posture.CodeInvalidAuth,
			Message: "the credential changed, or the session ended, while this login was checked: log in again"}
	} else if err != nil {
		return err
	}
	p := &Principal{Session: s, Identity: identity, Token: token}
	c.Response().Header().Set(HeaderSession, token)
	l.Auth.SetExpiryHeaders(c, now)
	return c.JSON(http.StatusOK, Envelope{Data: SessionView(p, l.Auth.Timeout)})
}

// CurrentSession is GET /current-api-session.
func (l *Login) CurrentSession(c echo.Context) error {
	return OK(c, SessionView(PrincipalOf(c), l.Auth.Timeout))
}

// Logout is DELETE /current-api-session.
func (l *Login) Logout(c echo.Context) error {
	p := PrincipalOf(c)
	_, err := l.Writer.Append(c, posture.APISessionDeleted{ID: p.Session.ID, IdentityID: p.Identity.ID, Reason: posture.EndLogout})
	if err != nil {
		return err
	}
	l.Auth.Forget(p.Session.ID)
	// The session has ended: no expiry to announce.
	c.Response().Header().Del("expiration-seconds")
	c.Response().Header().Del("expires-at")
	return Empty(c)
}

// Lengths of usernames and passwords, in characters.
const (
	MinUsername, MaxUsername = 4, 100
	MinPassword, MaxPassword = 5, 100
)

// CheckLength validates a string's length in characters.
func CheckLength(field, v string, lo, hi int) error {
	n := utf8.RuneCountInString(v)
	if n < lo || n > hi {
		return posture.Invalid(field, fmt.Sprintf("must be between %d and %d characters", lo, hi), redact(field, v))
	}
	return nil
}

// redact keeps secrets out of error causes.
func redact(field, v string) any {
	switch field {
	case "password", "currentPassword":
		return "********"
	}
	return v
}
