// Package management is the management API (/edge/management/v1): what
// administrators use to manage identities, services, policies and posture
// checks and to read posture data and failed service requests. Every route
// but authentication and the informational ones needs an admin's API
// session.
package management

import (
	_ "embed"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture/api"
)

// Spec is this API's OpenAPI document.
//
//go:embed openapi.json
var Spec []byte

// API is the management API's handlers and their dependencies.
type API struct {
	Info  *api.Info
	Login *api.Login
	Auth  *api.Auth
}

// Routes lists every operation of the management API.
func (a *API) Routes() []api.Route {
	var routes []api.Route
	routes = append(routes, a.Info.Routes()...)
	routes = append(routes, a.Login.Routes(api.Admin)...)
	return routes
}

// Register mounts the management API on e under its base path.
func (a *API) Register(e *echo.Echo) {
	api.Mount(e.Group(api.ManagementBase), a.Auth, a.Routes())
}
