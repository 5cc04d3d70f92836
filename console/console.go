package console

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

// Base is the path the console is served under.
const Base = "/console/"

// Store is what the pages read (projections.Store implements it).
type Store interface {
	Identity(id string) (posture.Identity, error)
	// IdentityByName reads the identity with the name (names are unique).
	IdentityByName(name string) (posture.Identity, error)
	// IdentityPage reads at most limit identities in name order after the
	// name, without scanning the rest.
	IdentityPage(after string, limit int) ([]posture.Identity, error)
	// IdentitiesByNamePrefix reads at most limit identities whose name
	// starts with the prefix, in name order, from the name index (without
	// scanning the identities).
	IdentitiesByNamePrefix(prefix string, limit int) ([]posture.Identity, error)
	PostureData(identityID string) (posture.IdentityPosture, []posture.SessionPosture, error)
	FailedRequests(identityID string) ([]posture.FailedServiceRequest, error)
	WouldDenies(identityID string) ([]posture.WouldDeny, error)
	// FleetFailedRequests reads the newest failed service requests of the
	// whole fleet, newest first, from an index (no scan of the identities).
	FleetFailedRequests(limit int) ([]posture.FleetFailedRequest, error)
	// HistoryTail reads the newest limit entries of an identity's history
	// in a window, and whether there are more.
	HistoryTail(identityID string, since, until time.Time, limit int) ([]posture.HistoryEntry, bool, error)
	// AccessBefore reads each policy's newest change of state for the
	// identity before a time, reading back at most limit entries.
	AccessBefore(identityID string, at time.Time, limit int) ([]posture.HistoryEntry, error)
	ServicesFor(identityID, typ string) []posture.Grant
	Service(id string) (posture.Service, error)
	// ServiceByName reads the service with the name (names are unique).
	ServiceByName(name string) (posture.Service, error)
	Checks() ([]posture.Check, error)
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
	// The fleet view's counters and time indexes (no scan of the
	// identities).
	FleetCounts() ([]posture.FleetCount, error)
	InGrace(now time.Time, limit int) ([]posture.TimedIdentity, int, error)
	// Graces is the identity's API sessions in a grace window at now, with
	// each window's end (those of InGrace, read from the identity's own).
	Graces(identityID string, now time.Time) (map[string]time.Time, error)
	LosingAccess(now, until time.Time, limit int) ([]posture.TimedIdentity, int, error)
	Cursor() uint64
	PendingDeadlines() (int, error)
}

// ImpactReader reads the identities failing a report-only check and what
// each would lose when it enforces (projections.Store implements it).
type ImpactReader interface {
	Impact(checkID, after string, limit int) ([]posture.CheckImpact, bool, error)
}

// Explainer rebuilds an access decision at a moment (the management API's
// explainer).
type Explainer interface {
	Explain(ctx context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error)
}

// Options configure a Console.
type Options struct {
	// API serves the management API; sign-in, MFA, the session check and
	// sign-out are its operations, called in process.
	API http.Handler
	// ManagementBase is the management API's path prefix.
	ManagementBase string
	// ClientBase is the client API's path prefix: the MFA code, the
	// session check and sign-out are its operations (they take a session
	// that has not given its MFA code yet, and any identity's, so that a
	// non-admin's session is ended too).
	ClientBase string
	Store      Store
	Explainer  Explainer
	// Impact, when set, gives the checks page each report-only check's
	// impact.
	Impact ImpactReader
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// PageSize is the number of identities on a fleet page (default 50).
	PageSize int
}

// Console serves the console's pages under Base.
type Console struct {
	opts  Options
	pages map[string]*template.Template
	mux   *http.ServeMux
	h     http.Handler
	// candidates are the backtests' candidates, by job.
	candidates candidates
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New builds the console.
func New(opts Options) (*Console, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 50
	}
	c := &Console{opts: opts, pages: map[string]*template.Template{}, mux: http.NewServeMux()}
	for _, name := range []string{"signin", "mfa", "fleet", "identity", "explain", "checks", "backtest", "backtestjob", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		c.pages[name] = t
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	m := c.mux
	files := cacheable(http.FileServerFS(assets))
	m.Handle("GET /console/assets/", http.StripPrefix("/console/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") { // a directory: no listing
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})))
	m.HandleFunc("GET /console/{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/fleet", http.StatusSeeOther)
	})
	m.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/fleet", http.StatusSeeOther)
	})
	m.HandleFunc("GET /console/sign-in", c.signInPage)
	m.HandleFunc("POST /console/sign-in", c.signIn)
	m.HandleFunc("GET /console/mfa", c.mfaPage)
	m.HandleFunc("POST /console/mfa", c.mfa)
	m.HandleFunc("POST /console/sign-out", c.signOut)
	m.Handle("GET /console/fleet", c.admin(c.fleet))
	m.Handle("GET /console/fleet/counts", c.admin(c.counts))
	m.Handle("GET /console/identities/{id}", c.admin(c.identity))
	m.Handle("GET /console/explain", c.admin(c.explain))
	m.Handle("GET /console/checks", c.admin(c.checks))
	m.Handle("GET /console/checks/{id}/backtest", c.admin(c.backtestPage))
	m.Handle("POST /console/checks/{id}/backtest", c.admin(c.startBacktest))
	m.Handle("GET /console/backtests/{id}", c.admin(c.backtestJob))
	m.Handle("POST /console/backtests/{id}/stop", c.admin(c.stopBacktest))
	m.Handle("GET /console/", c.admin(c.notFound))
	// Forms are refused from other origins (Sec-Fetch-Site, Origin), on top
	// of the token each one carries.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.refuse(w, r, http.StatusForbidden, crossOriginRefused)
	}))
	c.h = secure(cop.Handler(c.csrf(m)))
	return c, nil
}

// ServeHTTP serves a console request.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

// CSP is the Content-Security-Policy of every answer: nothing but the
// console's own scripts, styles and images; no inline script or style, no
// framing, forms posted to the console only.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// secure sets the security headers of every answer.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}

func cacheable(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// render writes a page; the answer is never cached (it holds fleet data).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data map[string]any) {
	if data == nil {
		data = map[string]any{}
	}
	data["CSRF"] = csrfToken(r)
	if _, ok := data["Admin"]; !ok {
		data["Admin"] = adminOf(r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := c.pages[name].Execute(w, data); err != nil {
		c.opts.Logger.Error("console: render", "page", name, "err", err)
	}
}

// notFound answers a console address that is no page with the error page,
// in the console's layout.
func (c *Console) notFound(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusNotFound, "error", map[string]any{"Title": "Not found", "Message": "No page at " + r.URL.Path + "."})
}

// fail renders the error page with pageError's status and message.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := pageError(err)
	if status == http.StatusInternalServerError {
		c.opts.Logger.Error("console", "path", r.URL.Path, "err", err)
	}
	c.render(w, r, status, "error", map[string]any{"Title": "Error", "Message": msg})
}

// pageError is what a page says of an error: a posture.Error's message as it
// is (what was not found, or which field is wrong and why), any other error
// as an internal error (logged, not shown).
func pageError(err error) (int, string) {
	var pe *posture.Error
	switch {
	case asPostureError(err, &pe) && pe.Code == posture.CodeNotFound && pe.Message != "":
		return http.StatusNotFound, pe.Message
	case errors.Is(err, posture.ErrNotFound), asPostureError(err, &pe) && pe.Code == posture.CodeNotFound:
		return http.StatusNotFound, "Not found."
	case asPostureError(err, &pe) && pe.Field != "":
		return http.StatusBadRequest, pe.Field + " " + pe.Reason
	case asPostureError(err, &pe):
		return http.StatusBadRequest, pe.Error()
	}
	return http.StatusInternalServerError, "Something went wrong; the error was logged."
}
