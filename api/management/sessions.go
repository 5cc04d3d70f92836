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

// endOnce ends the entity of the request's id that read finds (a noun's
// NOT_FOUND when it finds none), with the event end makes of it, once:
// concurrent ends of one are decided in turn on its identity's subject, and
// all but the first find it gone.
func endOnce[T any](a *API, c echo.Context, noun string, read func(id string) (T, error), end func(T) posture.Payload) (T, error) {
	id := c.Param("id")
	v, err := read(id)
	if v, err = found(v, err, noun, id); err != nil {
		return v, err
	}
	p := end(v)
	return v, a.Writer.ChangeSubject(c, p.Subject(), func() ([]posture.Payload, error) {
		if _, err := read(id); err != nil {
			_, err = found(v, err, noun, id)
			return nil, err
		}
		return []posture.Payload{p}, nil
	})
}

// deleteAPISession ends an API session as its logout would (its sessions
// go with it), recorded as removed.
func (a *API) deleteAPISession(c echo.Context) error {
	s, err := endOnce(a, c, "API session", a.Store.APISession, func(s posture.APISession) posture.Payload {
		return posture.APISessionDeleted{ID: s.ID, IdentityID: s.IdentityID, Reason: posture.EndRemoved}
	})
	if err != nil {
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
func (a *API) deleteSession(c echo.Context) error {
	if _, err := endOnce(a, c, "session", a.Store.Session, func(s posture.Session) posture.Payload {
		return posture.SessionDeleted{ID: s.ID, IdentityID: s.IdentityID}
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
