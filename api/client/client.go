// Package client is the Edge Client API (/edge/client/v1): what endpoints
// use to authenticate, enroll, report posture and open sessions.
package client

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// Spec is this API's OpenAPI document.
//
//go:embed openapi.json
var Spec []byte

// API is the client API's handlers and their dependencies.
type API struct {
	Info       *api.Info
	Login      *api.Login
	Auth       *api.Auth
	Writer     *api.Writer
	Store      Store
	Identities IdentityStore
	// Tokens signs session tokens (JWTs).
	Tokens SessionTokens
	// ServiceAdmin serves the admin-only service operations.
	ServiceAdmin ServiceAdmin
	// MFAGrace is the wake/unlock grace reported to clients.
	MFAGrace time.Duration
	// Budget bounds the bytes each identity's own requests (posture
	// responses, sessions, certificates, MFA and authenticator changes) may
	// have this node keep (nil: no bound).
	Budget *api.Budget
	// Started is when this node started: the earliest service-update time.
	Started time.Time
	// PKI issues certificates from CSRs (enrollment, extension, ephemeral
	// certificates) and serves the CA bundle; Signer signs enrollment JWTs
	// and challenges with the key of the served TLS certificate; Enroll
	// reads enrollments, CAs and certificates (enroll.go).
	PKI    *pki.CA
	Signer *pki.Signer
	Enroll EnrollStore
	// Secrets seals the TOTP secrets, enrollment tokens and session tokens
	// the API appends, and opens them where it must read one back.
	Secrets api.Secrets
	// Controllers lists the live nodes (GET /controllers); nil: no route.
	Controllers *api.Controllers
}

// Routes lists every operation of the client API.
func (a *API) Routes() []api.Route {
	routes := []api.Route{
		{Method: http.MethodGet, Path: "/", Access: api.Public, Handler: a.Info.VersionHandler},
	}
	routes = append(routes, a.Info.Routes()...)
	routes = append(routes, a.Info.SpecAt("edge-client"))
	routes = append(routes, a.Login.Routes(api.Partial)...)
	routes = append(routes, a.identityRoutes()...)
	routes = append(routes, a.postureRoutes()...)
	routes = append(routes, a.enrollRoutes()...)
	if a.Controllers != nil {
		routes = append(routes, a.Controllers.Route(api.Session))
	}
	return routes
}

// Register mounts the client API on e under its base path.
func (a *API) Register(e *echo.Echo) {
	api.Mount(e.Group(api.ClientBase), a.Auth, a.Routes())
}
