package api

import (
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// LoginStore is what authentication reads (projections.Store implements it).
type LoginStore interface {
	Sessions
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
}

// Login serves authentication and the current API session on both APIs.
type Login struct {
	Store  LoginStore
	Writer *Writer
	Auth   *Auth
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

// Authenticate is POST /authenticate?method=...
func (l *Login) Authenticate(c echo.Context) error {
	method := c.QueryParam("method")
	switch method {
	case AuthPassword:
	case AuthCert, AuthExtJWT:
		return &posture.Error{Code: posture.CodeInvalidAuthMethod, Message: "authentication method " + method + " is not enabled on this controller"}
	case "":
		return posture.Invalid("method", "method is required: password, cert or ext-jwt", method)
	default:
		return posture.Invalid("method", "method must be one of password, cert, ext-jwt", method)
	}
	var req authenticateRequest
	if err := Decode(c, &req); err != nil {
		return err
	}
	if err := CheckLength("username", req.Username, 4, 100); err != nil {
		return err
	}
	if err := CheckLength("password", req.Password, 5, 100); err != nil {
		return err
	}
	auth, err := l.Store.AuthenticatorByUsername(req.Username)
	if err != nil && !errors.Is(err, posture.ErrNotFound) {
		return err
	}
	// The password is checked (against a dummy hash when the user is
	// unknown) before anything else, so that every failure costs the same.
	if !CheckPassword(auth.PasswordHash, req.Password) || auth.Method != posture.MethodPassword {
		return &posture.Error{Code: posture.CodeInvalidAuth}
	}
	identity, err := l.Store.Identity(auth.IdentityID)
	if errors.Is(err, posture.ErrNotFound) {
		return &posture.Error{Code: posture.CodeInvalidAuth}
	}
	if err != nil {
		return err
	}
	if identity.Disabled {
		return &posture.Error{Code: posture.CodeInvalidAuth, Message: "the identity is disabled"}
	}
	return l.startSession(c, identity, auth, AuthPassword, req)
}

func (l *Login) startSession(c echo.Context, identity posture.Identity, auth posture.Authenticator, method string, req authenticateRequest) error {
	now := l.Writer.Now()
	token := posture.NewToken()
	configTypes := req.ConfigTypes
	if configTypes == nil {
		configTypes = []string{}
	}
	s := posture.APISession{
		ID:              posture.NewID(),
		TokenHash:       TokenHash(token),
		IdentityID:      identity.ID,
		AuthenticatorID: auth.ID,
		AuthMethod:      method,
		IPAddress:       c.RealIP(),
		ConfigTypes:     configTypes,
		SDKInfo:         req.SDKInfo,
		EnvInfo:         req.EnvInfo,
		CreatedAt:       now,
		LastActivityAt:  now,
	}
	if _, err := l.Writer.Append(c, posture.APISessionCreated{APISession: s}); err != nil {
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
	return Empty(c)
}

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
