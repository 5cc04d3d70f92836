package api

import (
	"encoding/json"
	"net/http"
	"runtime"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// Spec is one API's OpenAPI document.
type Spec struct {
	ID       string // "edge-client" or "edge-management"
	Name     string
	Document []byte // JSON
}

// Info serves the informational operations of both APIs.
type Info struct {
	Version   string
	Revision  string
	BuildDate string
	// Advertise is the host:port clients reach this node at.
	Advertise string
	Specs     []Spec
}

type apiVersion struct {
	Path        string   `json:"path"`
	APIBaseURLs []string `json:"apiBaseUrls"`
}

type versionView struct {
	Version        string                           `json:"version"`
	Revision       string                           `json:"revision"`
	BuildDate      string                           `json:"buildDate"`
	RuntimeVersion string                           `json:"runtimeVersion"`
	Capabilities   []string                         `json:"capabilities"`
	APIVersions    map[string]map[string]apiVersion `json:"apiVersions"`
}

// VersionHandler is GET /version (and GET / of the client API).
func (i *Info) VersionHandler(c echo.Context) error {
	base := "https://" + i.Advertise
	v := func(path string) map[string]apiVersion {
		return map[string]apiVersion{"v1": {Path: path, APIBaseURLs: []string{base + path}}}
	}
	return OK(c, versionView{
		Version:        i.Version,
		Revision:       i.Revision,
		BuildDate:      i.BuildDate,
		RuntimeVersion: runtime.Version(),
		Capabilities:   []string{},
		APIVersions: map[string]map[string]apiVersion{
			"edge":            v(ClientBase), // legacy alias that the C SDK reads
			"edge-client":     v(ClientBase),
			"edge-management": v(ManagementBase),
		},
	})
}

// Capabilities is GET /enumerated-capabilities: every capability the
// controller knows, enabled or not.
func (i *Info) Capabilities(c echo.Context) error {
	return OK(c, []string{"OIDC_AUTH", "HA_CONTROLLER"})
}

// Protocols is GET /protocols: the listening edge protocols.
func (i *Info) Protocols(c echo.Context) error {
	return OK(c, map[string]map[string]string{"https": {"address": i.Advertise}})
}

// BuiltinTime is the createdAt and updatedAt of records that are part of
// postured rather than made by an administrator (specs, posture-check
// types): the release date of the Edge API version it implements. The
// real controller answers its seeding time; null fails the clients' models.
var BuiltinTime = time.Date(2024, 10, 11, 0, 0, 0, 0, time.UTC)

type specView struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	CreatedAt Time         `json:"createdAt"`
	UpdatedAt Time         `json:"updatedAt"`
	Tags      posture.Tags `json:"tags"`
	Links     Links        `json:"_links"`
}

func (i *Info) view(s Spec) specView {
	return specView{ID: s.ID, Name: s.Name, Tags: posture.Tags{}, CreatedAt: Time(BuiltinTime), UpdatedAt: Time(BuiltinTime), Links: Links{
		"self": {Href: "./specs/" + s.ID},
		"spec": {Href: "./specs/" + s.ID + "/spec"},
	}}
}

// ListSpecs is GET /specs.
func (i *Info) ListSpecs(c echo.Context) error {
	out := make([]specView, 0, len(i.Specs))
	for _, s := range i.Specs {
		out = append(out, i.view(s))
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return List(c, out)
}

func (i *Info) spec(id string) (Spec, error) {
	for _, s := range i.Specs {
		if s.ID == id {
			return s, nil
		}
	}
	return Spec{}, posture.NotFound("spec", id)
}

// DetailSpec is GET /specs/:id.
func (i *Info) DetailSpec(c echo.Context) error {
	s, err := i.spec(c.Param("id"))
	if err != nil {
		return err
	}
	return OK(c, i.view(s))
}

// SpecBody is GET /specs/:id/spec: the raw OpenAPI document.
func (i *Info) SpecBody(c echo.Context) error {
	s, err := i.spec(c.Param("id"))
	if err != nil {
		return err
	}
	if !json.Valid(s.Document) {
		return &posture.Error{Code: posture.CodeUnhandled, Message: "the spec document is not valid JSON"}
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, s.Document)
}

// SpecAt is GET /swagger.json of an API: its own spec's document, where
// OpenZiti's controllers serve it.
func (i *Info) SpecAt(id string) Route {
	return Route{Method: http.MethodGet, Path: "/swagger.json", Access: Public, Handler: func(c echo.Context) error {
		c.SetParamNames("id")
		c.SetParamValues(id)
		return i.SpecBody(c)
	}}
}

// Routes returns the informational routes, public on both APIs.
func (i *Info) Routes() []Route {
	return []Route{
		{Method: http.MethodGet, Path: "/version", Access: Public, Handler: i.VersionHandler},
		{Method: http.MethodGet, Path: "/enumerated-capabilities", Access: Public, Handler: i.Capabilities},
		{Method: http.MethodGet, Path: "/protocols", Access: Public, Handler: i.Protocols},
		{Method: http.MethodGet, Path: "/specs", Access: Public, Handler: i.ListSpecs},
		{Method: http.MethodGet, Path: "/specs/:id", Access: Public, Handler: i.DetailSpec},
		{Method: http.MethodGet, Path: "/specs/:id/spec", Access: Public, Handler: i.SpecBody},
	}
}

// Routes returns the authentication and API-session routes; session is the
// access level of the current-API-session operations (Partial on both APIs:
// a login with MFA pending is read and ended there).
func (l *Login) Routes(session Access) []Route {
	return []Route{
		{Method: http.MethodPost, Path: "/authenticate", Access: Public, Handler: l.Authenticate},
		{Method: http.MethodGet, Path: "/current-api-session", Access: session, Handler: l.CurrentSession},
		{Method: http.MethodDelete, Path: "/current-api-session", Access: session, Handler: l.Logout},
	}
}
