// Package client is the Edge Client API (/edge/client/v1): what endpoints
// use to authenticate, enroll, report posture and open sessions.
package client

import (
	_ "embed"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture/api"
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
	// Started is when this node started: the earliest service-update time.
	Started time.Time
}

// Routes lists every operation of the client API.
func (a *API) Routes() []api.Route {
	routes := []api.Route{
		{Method: http.MethodGet, Path: "/", Access: api.Public, Handler: a.Info.VersionHandler},
	}
	routes = append(routes, a.Info.Routes()...)
	routes = append(routes, a.Login.Routes(api.Partial)...)
	routes = append(routes, a.identityRoutes()...)
	routes = append(routes, a.postureRoutes()...)
	return routes
}

// Register mounts the client API on e under its base path.
func (a *API) Register(e *echo.Echo) {
	api.Mount(e.Group(api.ClientBase), a.Auth, a.Routes())
}
