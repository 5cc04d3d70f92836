package api

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/seed-0809debe/posture"
)

// Base paths of the two APIs.
const (
	ClientBase     = "/edge/client/v1"
	ManagementBase = "/edge/management/v1"
)

// Log is the event log as the API uses it (eventlog.Log implements it).
type Log interface {
	Append(ctx context.Context, e posture.Event) (uint64, error)
	AppendIfLast(ctx context.Context, e posture.Event, last uint64) (uint64, error)
	LastSubjectSeq(ctx context.Context, subject string) (uint64, error)
	// Fits fails as Append would, with REQUEST_ENTITY_TOO_LARGE, when the
	// event is larger than the log takes.
	Fits(e posture.Event) error
}

// Barrier is the projection's progress (projections.Store implements it).
type Barrier interface {
	WaitFor(ctx context.Context, seq uint64) error
	LastModelSeq() uint64
}

// Options configures New.
type Options struct {
	Logger *slog.Logger
	// InstanceID is sent in the ziti-instance-id header; it changes on
	// every start so that clients resubmit posture.
	InstanceID string
	// Version is sent in the server header.
	Version string
	// System routes (metrics, health) that are not rewritten to the client
	// API when reached without a prefix.
	SystemPaths []string
	// Metrics, when set, counts requests by route and status.
	Metrics *Metrics
	// TrustedProxies are the networks whose X-Forwarded-For header is
	// believed (none by default). See ClientIP.
	TrustedProxies []*net.IPNet
	// InFlight, when set, caps the requests served at once per source
	// address (shared by every echo instance of a server).
	InFlight *InFlight
}

// ClientIP returns the function that resolves the address a request comes
// from: the connection's peer, unless the peer is one of the trusted
// proxies, in which case X-Forwarded-For is read from the right, skipping
// trusted proxies, and the first untrusted address is the client. The
// limiter, the audit trail (an API session's ipAddress) and the request log
// all read this one address (echo.Context.RealIP). Without trusted proxies
// forwarded headers are ignored: a client can write anything in them.
func ClientIP(trusted []*net.IPNet) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, n := range trusted {
		opts = append(opts, echo.TrustIPRange(n))
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// ParseCIDRs parses networks in CIDR notation; a bare address is a network
// of one.
func ParseCIDRs(specs []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	for _, s := range specs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			ip := net.ParseIP(s)
			if ip == nil {
				return nil, fmt.Errorf("%q is neither an address nor a network in CIDR notation", s)
			}
			bits := 128
			if ip4 := ip.To4(); ip4 != nil {
				ip, bits = ip4, 32
			}
			out = append(out, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
			continue
		}
		_, n, err := net.ParseCIDR(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a network in CIDR notation: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// New returns an echo instance with the error handler, request ids,
// recovery, request logging and the path aliases of real clients:
// /edge/v1/... and unprefixed paths reach the client API, and an API's base
// path without its trailing slash reaches its root (listRoot).
func New(opts Options) *echo.Echo {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.JSONSerializer = serializer{}
	e.HTTPErrorHandler = ErrorHandler(opts.Logger)
	e.IPExtractor = ClientIP(opts.TrustedProxies)
	e.Pre(rewrite(opts.SystemPaths))
	e.Use(plainRequestIDs, middleware.RequestID())
	if opts.Metrics != nil {
		e.Use(opts.Metrics.Middleware(e))
	}
	e.Use(middleware.Recover())
	e.Use(opts.InFlight.Middleware)
	server := "postured/" + opts.Version
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			// Keys as Go writes them, so that Set makes no canonical copy.
			h := c.Response().Header()
			h.Set("Ziti-Instance-Id", opts.InstanceID)
			h.Set("Server", server)
			// Answers carry tokens, TOTP secrets, session and enrollment
			// JWTs: no cache (a proxy that ends TLS) may keep one.
			h.Set("Cache-Control", "no-store")
			return next(c)
		}
	})
	// Request logs are debug logs: without debug logging the middleware is
	// left out, and costs nothing.
	if !opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		return e
	}
	e.Use(middleware.RequestLoggerWithConfig(middleware.RequestLoggerConfig{
		LogStatus: true, LogURI: true, LogMethod: true, LogLatency: true, LogRequestID: true, LogRemoteIP: true,
		// The error handler writes the response first, so that the logged
		// status is the one the client gets.
		HandleError: true,
		LogValuesFunc: func(c echo.Context, v middleware.RequestLoggerValues) error {
			opts.Logger.LogAttrs(c.Request().Context(), slog.LevelDebug, "request",
				slog.String("requestId", v.RequestID), slog.String("method", v.Method),
				slog.String("uri", RedactURI(v.URI)), slog.Int("status", v.Status),
				slog.Duration("latency", v.Latency), slog.String("remoteIp", v.RemoteIP))
			return nil
		},
	}))
	return e
}

// plainRequestIDs keeps a client's own X-Request-Id only when it is a plain
// token: at most MaxRequestID letters, digits and "-_.:". It is echoed in
// the answer, its error body and the audit trail, which must not carry a
// 60 KB header or markup; another is replaced by one of ours.
func plainRequestIDs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Request().Header
		if id := h.Get(echo.HeaderXRequestID); id != "" && !plainRequestID(id) {
			h.Del(echo.HeaderXRequestID)
		}
		return next(c)
	}
}

// MaxRequestID is the longest request id a client may choose.
const MaxRequestID = 128

func plainRequestID(id string) bool {
	if len(id) > MaxRequestID {
		return false
	}
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_.:", r):
		default:
			return false
		}
	}
	return true
}

func rewrite(system []string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			p := r.URL.Path
			switch {
			case p == "/edge/v1" || strings.HasPrefix(p, "/edge/v1/"):
				p = ClientBase + strings.TrimPrefix(p, "/edge/v1")
			case strings.HasPrefix(p, "/edge/"):
			case isSystem(p, system):
			default:
				p = ClientBase + p
			}
			// listRoot answers with or without the trailing slash.
			if p == ClientBase || p == ManagementBase {
				p += "/"
			}
			if p != r.URL.Path {
				r.URL.Path, r.URL.RawPath = p, ""
			}
			return next(c)
		}
	}
}

func isSystem(p string, system []string) bool {
	for _, s := range system {
		if p == s {
			return true
		}
	}
	return false
}

// Access is who may call a route.
type Access int

const (
	// Public routes need no credentials.
	Public Access = iota
	// Partial routes accept an API session with MFA still pending.
	Partial
	// Session routes need a fully authenticated API session.
	Session
	// Admin routes need a fully authenticated admin's API session.
	Admin
)

func (a Access) String() string {
	return [...]string{"public", "partial", "session", "admin"}[a]
}

// Route is one operation of an API.
type Route struct {
	Method  string
	Path    string // relative to the API's base path, echo syntax (":id")
	Access  Access
	Handler echo.HandlerFunc
	// AnyBody: the handler reads bodies of other media types than JSON
	// (an enrollment's PEM CSR, a CA's verification certificate). Other
	// routes refuse a body whose Content-Type is not JSON.
	AnyBody bool
}

// Mount registers routes under g with the authentication their access level
// requires. A GET operation answers HEAD too, as HTTP asks of every server
// (RFC 9110, section 9.3.2): the same status and headers, without the
// content, which net/http leaves out.
func Mount(g *echo.Group, auth *Auth, routes []Route) {
	for _, r := range routes {
		h := r.Handler
		if !r.AnyBody {
			h = jsonBody(h)
		}
		h = queryOnce(notEncoded(h))
		var m []echo.MiddlewareFunc
		if r.Access != Public {
			m = append(m, auth.Require(r.Access))
		}
		g.Add(r.Method, r.Path, h, m...)
		if r.Method == http.MethodGet {
			g.Add(http.MethodHead, r.Path, h, m...)
		}
	}
}

// repeatable are the query parameters that may be given more than once.
var repeatable = []string{"roleFilter", "configTypes"}

// queryOnce refuses a query that gives a parameter twice (but those that
// repeat, roleFilter and configTypes) or that separates parameters with
// ";", which Go's parser drops: another reader of the request (a proxy, a
// validator) could take a value postured does not. Paging parameters
// answer INVALID_PAGINATION, a filter INVALID_FILTER, a sort
// INVALID_SORT_IDENTIFIER, others COULD_NOT_VALIDATE.
func queryOnce(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw := c.Request().URL.RawQuery
		if raw == "" {
			return next(c)
		}
		if strings.Contains(raw, ";") {
			return posture.Invalid("query", `separates parameters with ";": use "&" (and %3B for a semicolon in a value)`, nil)
		}
		for name, values := range c.QueryParams() {
			if len(values) < 2 || slices.Contains(repeatable, name) {
				continue
			}
			code := posture.CodeCouldNotValidate
			switch name {
			case "limit", "offset":
				code = posture.CodeInvalidPagination
			case "filter":
				code = posture.CodeInvalidFilter
			case "sort":
				code = posture.CodeInvalidSort
			}
			return &posture.Error{Code: code, Message: name + " is given more than once", Field: name, Reason: "given more than once", Value: values}
		}
		return next(c)
	}
}

// notEncoded refuses, with 415 UNSUPPORTED_MEDIA_TYPE, a body sent encoded
// (Content-Encoding: gzip): no operation decodes one, and read as it is it
// would be taken for broken JSON or a broken PEM.
func notEncoded(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 {
			return next(c)
		}
		for _, ce := range r.Header.Values("Content-Encoding") { // every header of the name: one may hide behind another
			if ce = strings.TrimSpace(ce); ce != "" && !strings.EqualFold(ce, "identity") {
				if len(ce) > 100 {
					ce = ce[:100] + "..."
				}
				return &posture.Error{Code: posture.CodeUnsupportedMediaType,
					Message: fmt.Sprintf("the body must be sent as it is, not encoded (Content-Encoding: %q)", ce)}
			}
		}
		return next(c)
	}
}

// jsonBody refuses, with 415 UNSUPPORTED_MEDIA_TYPE, a POST, PUT or PATCH
// body labelled with a media type other than JSON (application/json, or a
// +json type), or with a charset other than JSON's UTF-8 (RFC 8259) or
// ASCII, a part of it: a form or text posted by mistake is not read as
// JSON. A body without a Content-Type is read as JSON, as OpenZiti's SDKs
// and curl without -H send it. Every such body is checked as JSON before
// the operation runs, whether or not the operation reads one: one that
// takes no body (enrolling MFA, say) does not act on a broken or oversized
// one.
func jsonBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 || r.Method != http.MethodPost && r.Method != http.MethodPut && r.Method != http.MethodPatch {
			return next(c) // no body, or one no operation of this method reads
		}
		if ct := r.Header.Get(echo.HeaderContentType); ct != echo.MIMEApplicationJSON && ct != "" {
			mt, params, err := mime.ParseMediaType(ct)
			cs, hasCharset := params["charset"]
			if err != nil || mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json") ||
				hasCharset && !slices.ContainsFunc([]string{"utf-8", "utf8", "us-ascii"}, func(u string) bool { return strings.EqualFold(cs, u) }) {
				if len(ct) > 100 {
					ct = ct[:100] + "..."
				}
				return &posture.Error{Code: posture.CodeUnsupportedMediaType,
					Message: fmt.Sprintf("the body must be JSON in UTF-8 (Content-Type: application/json), not %q", ct)}
			}
		}
		data, err := ReadBody(c)
		if err != nil {
			return err
		}
		if err := CheckJSON(data); err != nil {
			return err
		}
		c.Set(checkedKey, true)
		return next(c)
	}
}

// Clock returns the time; tests inject a fixed one.
type Clock func() time.Time

// secretParam says whether a query parameter may carry a secret: POST
// /enroll?token=..., and what a client that puts its credentials in the
// URL sends (zt-session, access_token, password, ...). postured reads a
// credential only from headers and bodies, but a logged URI shows such
// values redacted all the same.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"token", "session", "password", "secret", "jwt", "auth", "key", "code"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// RedactURI is a request URI as it may be logged: the values of query
// parameters that may carry a secret are replaced.
func RedactURI(uri string) string {
	path, query, ok := strings.Cut(uri, "?")
	if !ok {
		return uri
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return path + "?[unparsed query redacted]"
	}
	changed := false
	for p := range values {
		if secretParam(p) {
			values.Set(p, "REDACTED")
			changed = true
		}
	}
	if !changed {
		return uri
	}
	return path + "?" + values.Encode()
}
