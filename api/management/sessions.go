package management

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// The live API sessions and sessions of every identity, as OpenZiti's
// management API lists them, and their end by an administrator. Their
// tokens are not shown: the log keeps a hash of an API session's token, and
// a session's token is its owner's to read (on the client API).

// sessionView is sessionManagementDetail, without the token.
type sessionView struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	ServiceID    string        `json:"serviceId"`
	Service      api.EntityRef `json:"service"`
	APISessionID string        `json:"apiSessionId"`
	APISession   api.EntityRef `json:"apiSession"`
	IdentityID   string        `json:"identityId"`
	Identity     api.EntityRef `json:"identity"`
	// EdgeRouters are the session's online edge routers, as the
	// controller lists them: none, without a data plane.
	EdgeRouters []any        `json:"edgeRouters"`
	Tags        posture.Tags `json:"tags"`
	CreatedAt   api.Time     `json:"createdAt"`
	UpdatedAt   api.Time     `json:"updatedAt"`
	Links       api.Links    `json:"_links"`
}

// names reads entities' names once per list.
type names struct {
	a    *API
	kind posture.Kind
	seen map[string]string
}

func (a *API) names(kind posture.Kind) *names {
	return &names{a: a, kind: kind, seen: map[string]string{}}
}

func (n *names) of(id string) string {
	name, ok := n.seen[id]
	if !ok {
		if raw, err := n.a.Store.RawEntity(n.kind, id); err == nil {
			name = nameOf(raw)
		}
		n.seen[id] = name
	}
	return name
}

func (a *API) apiSessionView(identities *names) func(posture.APISession) (api.APISessionView, error) {
	return func(s posture.APISession) (api.APISessionView, error) {
		return api.NewAPISessionView(s, identities.of(s.IdentityID), a.Auth.Timeout), nil
	}
}

func (a *API) sessionView(identities, services *names) func(posture.Session) (sessionView, error) {
	return func(s posture.Session) (sessionView, error) {
		tags := s.Tags
		if tags == nil {
			tags = posture.Tags{}
		}
		return sessionView{
			ID: s.ID, Type: s.Type, ServiceID: s.ServiceID, Service: api.Ref("services", s.ServiceID, services.of(s.ServiceID)),
			APISessionID: s.APISessionID, APISession: api.Ref("api-sessions", s.APISessionID, ""),
			IdentityID: s.IdentityID, Identity: api.Ref("identities", s.IdentityID, identities.of(s.IdentityID)), EdgeRouters: []any{},
			Tags: tags, CreatedAt: api.Time(s.CreatedAt), UpdatedAt: api.Time(s.CreatedAt), Links: api.SelfLink("sessions", s.ID),
		}, nil
	}
}

func (a *API) listAPISessions(c echo.Context) error {
	all, err := a.Store.APISessions()
	if err != nil {
		return err
	}
	return api.ListViews(c, all, a.apiSessionView(a.names(posture.KindIdentity)))
}

func (a *API) detailAPISession(c echo.Context) error {
	s, err := a.Store.APISession(c.Param("id"))
	if s, err = found(s, err, "API session", c.Param("id")); err != nil {
		return err
	}
	v, _ := a.apiSessionView(a.names(posture.KindIdentity))(s)
	return api.OK(c, v)
}

// deleteAPISession ends an API session as its logout would (its sessions
// go with it), recorded as removed.
// deleteAPISession ends an API session once: concurrent deletes of one
// are decided in turn on its identity's API-session subject, and all but
// the first find it gone.
func (a *API) deleteAPISession(c echo.Context) error {
	id := c.Param("id")
	s, err := a.Store.APISession(id)
	if s, err = found(s, err, "API session", id); err != nil {
		return err
	}
	end := posture.APISessionDeleted{ID: s.ID, IdentityID: s.IdentityID, Reason: posture.EndRemoved}
	if err := a.Writer.ChangeSubject(c, end.Subject(), func() ([]posture.Payload, error) {
		_, err := a.Store.APISession(id)
		if _, err = found(s, err, "API session", id); err != nil {
			return nil, err
		}
		return []posture.Payload{end}, nil
	}); err != nil {
		return err
	}
	a.Auth.Forget(s.ID)
	return api.Empty(c)
}

func (a *API) listSessions(c echo.Context) error {
	all, err := a.Store.Sessions()
	if err != nil {
		return err
	}
	return api.ListViews(c, all, a.sessionView(a.names(posture.KindIdentity), a.names(posture.KindService)))
}

func (a *API) detailSession(c echo.Context) error {
	s, err := a.Store.Session(c.Param("id"))
	if s, err = found(s, err, "session", c.Param("id")); err != nil {
		return err
	}
	v, _ := a.sessionView(a.names(posture.KindIdentity), a.names(posture.KindService))(s)
	return api.OK(c, v)
}

// deleteSession ends a session as its owner's delete would.
// deleteSession ends a session once, as deleteAPISession.
func (a *API) deleteSession(c echo.Context) error {
	id := c.Param("id")
	s, err := a.Store.Session(id)
	if s, err = found(s, err, "session", id); err != nil {
		return err
	}
	end := posture.SessionDeleted{ID: s.ID, IdentityID: s.IdentityID}
	if err := a.Writer.ChangeSubject(c, end.Subject(), func() ([]posture.Payload, error) {
		_, err := a.Store.Session(id)
		if _, err = found(s, err, "session", id); err != nil {
			return nil, err
		}
		return []posture.Payload{end}, nil
	}); err != nil {
		return err
	}
	return api.Empty(c)
}

func (a *API) sessionRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/api-sessions", Access: api.Admin, Handler: a.listAPISessions},
		{Method: http.MethodGet, Path: "/api-sessions/:id", Access: api.Admin, Handler: a.detailAPISession},
		{Method: http.MethodDelete, Path: "/api-sessions/:id", Access: api.Admin, Handler: a.deleteAPISession},
		{Method: http.MethodGet, Path: "/sessions", Access: api.Admin, Handler: a.listSessions},
		{Method: http.MethodGet, Path: "/sessions/:id", Access: api.Admin, Handler: a.detailSession},
		{Method: http.MethodDelete, Path: "/sessions/:id", Access: api.Admin, Handler: a.deleteSession},
	}
}
