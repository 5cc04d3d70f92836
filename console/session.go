package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"unicode"

	"github.com/seed-0809debe/posture"
)

// Cookie names. The __Host- prefix makes browsers insist on Secure, Path=/
// and no Domain.
const (
	SessionCookie = "__Host-postured-console"
	CSRFCookie    = "__Host-postured-csrf"
	CSRFField     = "csrf"
)

// headerSession carries the API session token on the management API.
const headerSession = "zt-session"

type ctxKey int

const (
	csrfKey ctxKey = iota
	adminKey
	idleKey
)

// csrf gives every browser a random token in a cookie and refuses a POST
// whose form does not carry the same token (double submit; the cookie is
// SameSite=Strict and HttpOnly, and another origin can neither read nor set
// it).
func (c *Console) csrf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, fresh := "", false
		if ck, err := r.Cookie(CSRFCookie); err == nil && len(ck.Value) == 43 {
			token = ck.Value
		} else {
			token, fresh = random(), true
			http.SetCookie(w, &http.Cookie{Name: CSRFCookie, Value: token, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
		}
		r = r.WithContext(context.WithValue(r.Context(), csrfKey, token))
		if r.Method == http.MethodPost {
			// Without the cookie no form can be right: refused before its
			// body is read. With it, the body is read up to maxForm.
			if fresh {
				c.refuse(w, r, http.StatusForbidden, csrfRefused)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			err := r.ParseForm() // ParseMultipartForm drops its error on a form that is not multipart
			if err == nil {
				if err = r.ParseMultipartForm(maxForm); errors.Is(err, http.ErrNotMultipart) {
					err = nil
				}
			}
			if err != nil {
				if errors.As(err, new(*http.MaxBytesError)) {
					c.refuse(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("The form is larger than %d MiB.", maxForm>>20))
				} else {
					c.refuse(w, r, http.StatusBadRequest, "The form could not be read.")
				}
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue(CSRFField)), []byte(token)) != 1 {
				c.refuse(w, r, http.StatusForbidden, csrfRefused)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// csrfRefused answers a post without the right CSRF token.
const csrfRefused = "The form's CSRF token is missing or wrong: reload the page and try again."

// crossOriginRefused answers a form posted from another site.
const crossOriginRefused = "The form was sent from another site; the console takes forms from its own pages only."

// maxForm bounds a form's body: a backtest's candidate (at most the API's
// 1 MiB) URL-encoded, with room.
const maxForm = 4 << 20

// refuse answers a form the console does not take with the error page. The
// admin is not known yet (forms are refused before a session is read), so
// the page offers to sign in; its token is the browser's, or the one just
// given.
func (c *Console) refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", map[string]any{"Title": "Form refused", "Message": msg})
}

func csrfToken(r *http.Request) string { s, _ := r.Context().Value(csrfKey).(string); return s }

func random() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func setSession(w http.ResponseWriter, token string) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: token, Path: "/", HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

func clearSession(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
}

// apiAnswer is an answer of the management API called in process.
type apiAnswer struct {
	status int
	header http.Header
	body   bytes.Buffer
}

func (a *apiAnswer) Header() http.Header         { return a.header }
func (a *apiAnswer) Write(b []byte) (int, error) { return a.body.Write(b) }
func (a *apiAnswer) WriteHeader(status int)      { a.status = status }

// errorMessage is the message of an API error envelope.
// answerData decodes the data of an answer's envelope.
func answerData[T any](a *apiAnswer) (T, error) {
	var env struct {
		Data T `json:"data"`
	}
	err := json.Unmarshal(a.body.Bytes(), &env)
	return env.Data, err
}

func (a *apiAnswer) errorMessage() string {
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	msg := http.StatusText(a.status)
	if json.Unmarshal(a.body.Bytes(), &env) == nil && env.Error.Message != "" {
		msg = env.Error.Message
	}
	// A refusal for now (429) says when to try again.
	if s, err := strconv.Atoi(a.header.Get("Retry-After")); err == nil && s > 0 {
		msg = strings.TrimSuffix(strings.TrimSuffix(msg, "; try again later"), ".") + fmt.Sprintf(" (try again in %d s)", s)
	}
	return msg
}

// call runs an API operation in process on behalf of the browser's
// request: the same source address (and forwarded-for header, believed
// only from trusted proxies) and TLS state, so that rate limits, lockouts
// and audit see the browser.
func (c *Console) call(r *http.Request, method, path, token string, body any) (*apiAnswer, error) {
	var rd io.Reader = http.NoBody
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return nil, fmt.Errorf("console: %s %s: %w", method, path, err)
	}
	req.RemoteAddr, req.TLS, req.Host = r.RemoteAddr, r.TLS, r.Host
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		req.Header["X-Forwarded-For"] = xff
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set(headerSession, token)
	}
	a := &apiAnswer{status: http.StatusOK, header: http.Header{}}
	c.opts.API.ServeHTTP(a, req)
	return a, nil
}

// apiSession is what the console reads of GET /current-api-session.
type apiSession struct {
	IdentityID        string `json:"identityId"`
	IsMFARequired     bool   `json:"isMfaRequired"`
	IsMFAComplete     bool   `json:"isMfaComplete"`
	ExpirationSeconds int64  `json:"expirationSeconds"` // the idle timeout
}

// session resolves the browser's session cookie through the API's
// current-api-session operation (on the client API, which answers a
// session still waiting for its MFA code; it also keeps the session alive): the session and its identity,
// or an error the caller answers by signing in again.
func (c *Console) session(r *http.Request) (string, apiSession, error) {
	ck, err := r.Cookie(SessionCookie)
	if err != nil || ck.Value == "" {
		return "", apiSession{}, errSignedOut
	}
	a, err := c.call(r, http.MethodGet, c.opts.ClientBase+"/current-api-session", ck.Value, nil)
	if err != nil {
		return "", apiSession{}, err
	}
	if a.status != http.StatusOK {
		return "", apiSession{}, errSignedOut
	}
	as, err := answerData[apiSession](a)
	if err != nil {
		return "", apiSession{}, fmt.Errorf("console: current API session: %w", err)
	}
	return ck.Value, as, nil
}

var errSignedOut = errors.New("signed out")

// admin admits a request with the session of an admin that completed MFA;
// others are sent to sign in.
func (c *Console) admin(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, s, err := c.session(r)
		switch {
		case errors.Is(err, errSignedOut):
			http.Redirect(w, r, "/console/sign-in?next="+urlEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		case err != nil:
			c.fail(w, r, err)
			return
		case s.IsMFARequired && !s.IsMFAComplete:
			http.Redirect(w, r, "/console/mfa", http.StatusSeeOther)
			return
		}
		id, err := c.opts.Store.Identity(s.IdentityID)
		if err != nil || !id.IsAdmin {
			clearSession(w)
			c.render(w, r, http.StatusForbidden, "error", map[string]any{"Title": "Refused", "Message": "The console is for administrators; this identity is not one."})
			return
		}
		ctx := context.WithValue(r.Context(), adminKey, id.Name)
		next(w, r.WithContext(context.WithValue(ctx, idleKey, s.ExpirationSeconds)))
	})
}

func adminOf(r *http.Request) string { s, _ := r.Context().Value(adminKey).(string); return s }

// idleOf is the idle timeout of the admin's API session, in seconds.
func idleOf(r *http.Request) int64 { s, _ := r.Context().Value(idleKey).(int64); return s }

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	data := map[string]any{"Title": "Sign in", "Next": safeNext(r.URL.Query().Get("next"))}
	if r.URL.Query().Has(signedOut) {
		data["Notice"] = "Signed out."
	}
	c.render(w, r, http.StatusOK, "signin", data)
}

// signIn is POST /console/sign-in: the management API's password
// authentication; an identity that is not an admin is refused and its new
// session ended at once.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	username, password := r.PostFormValue("username"), r.PostFormValue("password")
	next := safeNext(r.PostFormValue("next"))
	again := func(status int, msg string) {
		c.render(w, r, status, "signin", map[string]any{"Title": "Sign in", "Error": msg, "Username": username, "Next": next})
	}
	a, err := c.call(r, http.MethodPost, c.opts.ManagementBase+"/authenticate?method=password", "",
		map[string]string{"username": username, "password": password})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	token := a.header.Get(headerSession)
	if a.status != http.StatusOK || token == "" {
		status, msg := http.StatusUnauthorized, a.errorMessage()
		switch {
		case a.status == http.StatusTooManyRequests:
			status = a.status
			w.Header().Set("Retry-After", a.header.Get("Retry-After"))
		case a.status == http.StatusUnauthorized && a.apiError().Code == posture.CodeInvalidAuth,
			// A username or password out of the API's bounds is no
			// account's either.
			a.status == http.StatusBadRequest && a.apiError().Code == posture.CodeCouldNotValidate:
			msg = "Wrong username or password."
		}
		again(status, msg)
		return
	}
	as, err := answerData[apiSession](a)
	if err != nil {
		c.fail(w, r, fmt.Errorf("console: sign-in answer: %w", err))
		return
	}
	id, err := c.opts.Store.Identity(as.IdentityID)
	if err != nil || !id.IsAdmin {
		if _, err := c.call(r, http.MethodDelete, c.opts.ClientBase+"/current-api-session", token, nil); err != nil {
			c.opts.Logger.Warn("console: end a non-admin's session", "err", err)
		}
		again(http.StatusForbidden, "The console is for administrators; this identity is not one.")
		return
	}
	setSession(w, token)
	if as.IsMFARequired && !as.IsMFAComplete {
		http.Redirect(w, r, "/console/mfa?next="+urlEscape(next), http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) mfaPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "mfa", map[string]any{"Title": "Verify", "Next": safeNext(r.URL.Query().Get("next"))})
}

// mfa is POST /console/mfa: the TOTP (or a recovery code) that completes
// the session of an admin with MFA.
func (c *Console) mfa(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	ck, err := r.Cookie(SessionCookie)
	if err != nil {
		http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
		return
	}
	a, err := c.call(r, http.MethodPost, c.opts.ClientBase+"/authenticate/mfa", ck.Value, map[string]string{"code": r.PostFormValue("code")})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	if a.status/100 != 2 {
		c.render(w, r, http.StatusUnauthorized, "mfa", map[string]any{"Title": "Verify", "Error": a.errorMessage(), "Next": next})
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut is POST /console/sign-out: the API session ends and the cookie
// goes.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(SessionCookie); err == nil && ck.Value != "" {
		if _, err := c.call(r, http.MethodDelete, c.opts.ClientBase+"/current-api-session", ck.Value, nil); err != nil {
			c.opts.Logger.Warn("console: sign out", "err", err)
		}
	}
	clearSession(w)
	// To the sign-in page, so that reloading it posts nothing again.
	http.Redirect(w, r, "/console/sign-in?"+signedOut+"=1", http.StatusSeeOther)
}

// signedOut is the query parameter of the sign-in page that says the
// browser has just signed out.
const signedOut = "signed-out"

// safeNext keeps a redirect target inside the console: a path under
// /console/ once its dots are resolved ("/console/../x" is not), without
// backslashes or control characters (which browsers drop or read as
// separators), and written anew, escaped, so that what goes into the
// Location header is only what a URL may hold.
func safeNext(next string) string {
	const home = "/console/fleet"
	if !strings.HasPrefix(next, "/console/") || strings.ContainsFunc(next, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return home
	}
	clean := path.Clean(u.Path)
	if !strings.HasPrefix(clean, "/console/") {
		return home
	}
	return (&url.URL{Path: clean, RawQuery: u.Query().Encode(), Fragment: u.Fragment}).String()
}

func asPostureError(err error, pe **posture.Error) bool { return errors.As(err, pe) }
