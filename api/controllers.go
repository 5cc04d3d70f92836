package api

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// Controller is a live postured node.
type Controller struct {
	ID   string
	Name string
	// APIAddress is the base URL clients reach the node at
	// ("https://host:port").
	APIAddress  string
	CertPEM     string
	Fingerprint string
	JoinedAt    time.Time
}

// ControllerLister lists the live nodes (cmd adapts the node registry of
// the log).
type ControllerLister func(ctx context.Context) ([]Controller, error)

// Controllers serves GET /controllers in both APIs.
type Controllers struct {
	List ControllerLister
}

type apiAddress struct {
	URL     string `json:"url"`
	Version string `json:"version"`
}

// controllerView is OpenZiti's controllerDetail.
type controllerView struct {
	ID           string                  `json:"id"`
	Name         string                  `json:"name"`
	CertPEM      string                  `json:"certPem"`
	Fingerprint  string                  `json:"fingerprint"`
	IsOnline     bool                    `json:"isOnline"`
	LastJoinedAt Time                    `json:"lastJoinedAt"`
	APIAddresses map[string][]apiAddress `json:"apiAddresses"`
	CreatedAt    Time                    `json:"createdAt"`
	UpdatedAt    Time                    `json:"updatedAt"`
	Tags         posture.Tags            `json:"tags"`
	Links        Links                   `json:"_links"`
}

// Handler is GET /controllers: the nodes that announced themselves within
// the registry's time to live, each online, with the addresses of its APIs.
// It takes limit, offset and filter like every list.
func (cs *Controllers) Handler(c echo.Context) error {
	nodes, err := cs.List(c.Request().Context())
	if err != nil {
		return &posture.Error{Code: posture.CodeUnavailable, Message: "the node registry cannot be read", Err: err}
	}
	views := make([]controllerView, 0, len(nodes))
	for _, n := range nodes {
		addr := func(base string) []apiAddress { return []apiAddress{{URL: n.APIAddress + base, Version: "v1"}} }
		views = append(views, controllerView{
			ID: n.ID, Name: n.Name, CertPEM: n.CertPEM, Fingerprint: n.Fingerprint, IsOnline: true,
			LastJoinedAt: Time(n.JoinedAt),
			APIAddresses: map[string][]apiAddress{
				"edge-client":     addr(ClientBase),
				"edge-management": addr(ManagementBase),
			},
			CreatedAt: Time(n.JoinedAt), UpdatedAt: Time(n.JoinedAt), Tags: posture.Tags{},
			Links: SelfLink("controllers", n.ID),
		})
	}
	return List(c, views)
}

// Route is the listControllers operation at an access level.
func (cs *Controllers) Route(access Access) Route {
	return Route{Method: http.MethodGet, Path: "/controllers", Access: access, Handler: cs.Handler}
}
