// Package management is the management API (/edge/management/v1): what
// administrators use to manage identities, services, policies and posture
// checks and to read posture data and failed service requests. Every route
// but authentication and the informational ones needs an admin's API
// session. Every change is an event; reads come from the projections.
package management

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// Spec is this API's OpenAPI document.
//
//go:embed openapi.json
var Spec []byte

// Store is what the management API reads (projections.Store implements it).
type Store interface {
	EntityReader
	GraphReader
	IdentityReader
	SessionReader
	ConfigsOfType(configTypeID string) ([]string, error)
	IdentityServiceConfigs(identityID string) (map[string]map[string]string, error)
}

// SessionReader reads the live API sessions and sessions (sessions.go).
type SessionReader interface {
	APISessions() ([]posture.APISession, error)
	APISession(id string) (posture.APISession, error)
	Sessions() ([]posture.Session, error)
	Session(id string) (posture.Session, error)
}

// EntityReader reads the model's entities as stored: all that the
// resources' reads, creates, updates and deletes need (resource.go).
type EntityReader interface {
	Raw(kind posture.Kind) ([]json.RawMessage, error)
	Count(kind posture.Kind) (int, error)
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
	IDByName(kind posture.Kind, name string) (string, error)
}

// GraphReader reads the policies' role graph (relations.go).
type GraphReader interface {
	Selecting(policyKind posture.Kind, field, id string) []string
	Selected(policyKind posture.Kind, policyID, field string) []string
	Reachable(policyKind posture.Kind, from, id, to, typ string) []string
	RoleAttributes(kind posture.Kind) []string
}

// IdentityReader reads what is kept beside identities: external ids,
// authenticators, what their clients reported, live API sessions.
type IdentityReader interface {
	IdentityByExternalID(externalID string) (posture.Identity, error)
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	IdentityAuthenticators(identityID string) ([]posture.Authenticator, error)
	ClientInfo(identityID string) (posture.ClientInfo, error)
	HasAPISession(identityID string) (bool, error)
}

// API is the management API's handlers and their dependencies.
type API struct {
	Info      *api.Info
	Login     *api.Login
	Auth      *api.Auth
	Store     Store
	Posture   PostureStore
	Explainer Explainer
	Writer    *api.Writer
	// Fleet reads the fleet view (GET /posture-summary, summary.go).
	Fleet FleetStore
	// Report reads would-denies and the impact of report-only checks
	// (report.go).
	Report ReportStore
	// Deliveries reads webhook deliveries; Webhooks sends test events
	// (webhooks.go).
	Deliveries WebhookStore
	Webhooks   WebhookSender

	// Controllers lists the live nodes (GET /controllers); nil: no route.
	Controllers *api.Controllers
	// Shared are operations of the client API served here too (client.API's
	// SharedRoutes: an MFA login's second step, the current identity).
	Shared []api.Route

	// Signer signs enrollment JWTs (identities, routers, CAs) with the key
	// of the served TLS certificate; Enrollments reads enrollments;
	// EnrollmentDuration is how long new enrollment tokens are valid
	// (default 180 minutes). See cas.go and enrollments.go.
	Signer             *pki.Signer
	Enrollments        EnrollmentStore
	EnrollmentDuration time.Duration

	// Secrets seals enrollment tokens and JWTs and CA verification tokens,
	// opens them for administrators, and destroys the data key of a
	// deleted identity, edge router or CA.
	Secrets api.Secrets

	// Backtests runs backtests (POST /backtests, backtests.go); nil: no
	// route.
	Backtests Backtests
}

// Routes lists every operation of the management API.
func (a *API) Routes() []api.Route {
	// listRoot: the version document, as on the client API.
	routes := []api.Route{{Method: http.MethodGet, Path: "/", Access: api.Public, Handler: a.Info.VersionHandler}}
	routes = append(routes, a.Info.Routes()...)
	routes = append(routes, a.Info.SpecAt("edge-management"))
	routes = append(routes, a.Login.Routes(api.Partial)...) // a half-finished MFA login is read and ended here too
	routes = append(routes, a.checks().routes()...)
	routes = append(routes, a.checkRoutes()...)
	routes = append(routes, a.identityResourceRoutes()...)
	routes = append(routes, a.identityRoutes()...)
	routes = append(routes, a.serviceConfigRoutes()...)
	routes = append(routes, authPolicyRoutes()...)
	routes = append(routes, a.authenticatorRoutes()...)
	routes = append(routes, a.serviceRoutes()...)
	routes = append(routes, a.configTypes().routes()...)
	routes = append(routes, a.configs().routes()...)
	routes = append(routes, a.servicePolicies().routes()...)
	routes = append(routes, a.edgeRouters().routes()...)
	routes = append(routes, a.edgeRouterPolicies().routes()...)
	routes = append(routes, a.serviceEdgeRouterPolicies().routes()...)
	routes = append(routes, a.relationRoutes()...)
	routes = append(routes, a.extJWTRoutes()...)
	routes = append(routes, a.postureRoutes()...)
	routes = append(routes, a.summaryRoutes()...)
	routes = append(routes, a.reportRoutes()...)
	routes = append(routes, a.webhookRoutes()...)
	routes = append(routes, a.pkiRoutes()...)
	routes = append(routes, a.backtestRoutes()...)
	routes = append(routes, a.sessionRoutes()...)
	if a.Controllers != nil {
		routes = append(routes, a.Controllers.Route(api.Admin))
	}
	return append(routes, a.Shared...)
}

// Register mounts the management API on e under its base path.
func (a *API) Register(e *echo.Echo) {
	api.Mount(e.Group(api.ManagementBase), a.Auth, a.Routes())
}
