package client

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// postureQuery is one check of a policy as a client sees it.
type postureQuery struct {
	ID               string `json:"id"`
	QueryType        string `json:"queryType"`
	IsPassing        bool   `json:"isPassing"`
	Timeout          int64  `json:"timeout"`
	TimeoutRemaining int64  `json:"timeoutRemaining"`
	Stale            bool   `json:"stale,omitempty"`
	// Enforcement ("report"), Message and EnforceAt are set for a check
	// that only reports: its isPassing is its verdict, but a failure does
	// not make the policy fail (OpenZiti SDKs ignore these fields).
	Enforcement string         `json:"enforcement,omitempty"`
	Message     string         `json:"message,omitempty"`
	EnforceAt   *api.Time      `json:"enforceAt,omitempty"`
	Process     *queryProcess  `json:"process,omitempty"`
	Processes   []queryProcess `json:"processes,omitempty"`
	CreatedAt   api.Time       `json:"createdAt"`
	UpdatedAt   api.Time       `json:"updatedAt"`
	Tags        posture.Tags   `json:"tags"`
	Links       api.Links      `json:"_links"`
}

type queryProcess struct {
	OSType string `json:"osType"`
	Path   string `json:"path"`
}

// postureQuerySet is one granting policy and its checks.
type postureQuerySet struct {
	PolicyID       string         `json:"policyId"`
	PolicyType     string         `json:"policyType"`
	IsPassing      bool           `json:"isPassing"`
	PostureQueries []postureQuery `json:"postureQueries"`
}

// serviceView is serviceDetail of the client API.
type serviceView struct {
	ID                 string                    `json:"id"`
	Name               string                    `json:"name"`
	RoleAttributes     []string                  `json:"roleAttributes"`
	Configs            []string                  `json:"configs"`
	Config             map[string]map[string]any `json:"config"`
	EncryptionRequired bool                      `json:"encryptionRequired"`
	MaxIdleTimeMillis  int64                     `json:"maxIdleTimeMillis"`
	TerminatorStrategy string                    `json:"terminatorStrategy"`
	Permissions        []string                  `json:"permissions"`
	PostureQueries     []postureQuerySet         `json:"postureQueries"`
	Tags               posture.Tags              `json:"tags"`
	CreatedAt          api.Time                  `json:"createdAt"`
	UpdatedAt          api.Time                  `json:"updatedAt"`
	Links              api.Links                 `json:"_links"`
}

func querySet(r posture.PolicyResult, wokenOrUnlocked time.Time) postureQuerySet {
	set := postureQuerySet{PolicyID: r.PolicyID, PolicyType: r.Type, IsPassing: r.Passing, PostureQueries: []postureQuery{}}
	for _, cr := range r.Checks {
		c := cr.Check
		q := postureQuery{
			ID: c.ID, QueryType: string(c.TypeID), IsPassing: cr.Pass, Timeout: cr.Timeout, TimeoutRemaining: cr.TimeoutRemaining, Stale: cr.Stale,
			CreatedAt: api.Time(c.CreatedAt), UpdatedAt: api.Time(c.UpdatedAt), Tags: c.Tags,
			Links: api.SelfLink("posture-checks", c.ID),
		}
		if c.TypeID == posture.CheckMFA && (c.PromptOnWake || c.PromptOnUnlock) && wokenOrUnlocked.After(c.UpdatedAt) {
			// Clients re-prompt when a query's updatedAt moves.
			q.UpdatedAt = api.Time(wokenOrUnlocked)
		}
		if cr.ReportOnly {
			q.Enforcement, q.Message = posture.ReportMode, c.Enforcement.Message
			if at := c.Enforcement.EnforceAt; at != nil {
				t := api.Time(*at)
				q.EnforceAt = &t
			}
		}
		if c.Process != nil {
			q.Process = &queryProcess{OSType: c.Process.OSType, Path: c.Process.Path}
		}
		for _, p := range c.Processes {
			q.Processes = append(q.Processes, queryProcess{OSType: p.OSType, Path: p.Path})
		}
		set.PostureQueries = append(set.PostureQueries, q)
	}
	return set
}

// services builds the views of the services granted to the caller, each
// policy evaluated once, at now. An admin sees every service; its
// permissions are still those its policies grant, the ones POST /sessions
// honours.
func (a *API) services(c echo.Context, only string) ([]serviceView, error) {
	p := api.PrincipalOf(c)
	now := a.Writer.Now()
	grants := a.Store.ServicesFor(p.Identity.ID, "")
	if p.Identity.IsAdmin {
		var err error
		if grants, err = a.everyService(grants); err != nil {
			return nil, err
		}
	}
	if only != "" {
		grants = slices.DeleteFunc(grants, func(g posture.Grant) bool { return g.ServiceID != only })
	}
	results, err := evaluateGrants(a.Store, p, grants, now)
	if err != nil {
		return nil, err
	}
	checks, err := a.Store.Any(posture.KindCheck)
	noChecks := err != nil || !checks
	var wokenOrUnlocked time.Time
	if _, sessions, err := a.Store.PostureData(p.Identity.ID); err == nil {
		for _, s := range sessions {
			if s.APISessionID != p.Session.ID {
				continue
			}
			for _, t := range []*time.Time{s.WokenAt, s.UnlockedAt} {
				if t != nil && t.After(wokenOrUnlocked) {
					wokenOrUnlocked = *t
				}
			}
		}
	}
	configs, err := api.AskedConfigs(c, a.Store)
	if err != nil {
		return nil, err
	}
	roles, err := api.RoleQuery(c)
	if err != nil {
		return nil, err
	}
	out := make([]serviceView, 0, len(grants))
	for _, g := range grants {
		raw, err := a.Store.RawEntity(posture.KindService, g.ServiceID)
		if err != nil {
			continue
		}
		var s posture.Service
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		if roles != nil && !roles(s.ID, s.RoleAttributes) {
			continue
		}
		v := serviceView{
			ID: s.ID, Name: s.Name, RoleAttributes: s.RoleAttributes, Configs: s.Configs, Config: configs.Of(s.ID, s.Configs),
			EncryptionRequired: s.EncryptionRequired, MaxIdleTimeMillis: s.MaxIdleTimeMillis, TerminatorStrategy: s.TerminatorStrategy,
			Permissions: []string{}, PostureQueries: []postureQuerySet{}, Tags: s.Tags,
			CreatedAt: api.Time(s.CreatedAt), UpdatedAt: api.Time(s.UpdatedAt), Links: api.SelfLink("services", s.ID),
		}
		for _, pid := range g.Policies {
			r, ok := results[pid]
			if !ok {
				continue
			}
			if !slices.Contains(v.Permissions, r.Type) {
				v.Permissions = append(v.Permissions, r.Type)
			}
			if !noChecks {
				v.PostureQueries = append(v.PostureQueries, querySet(r, wokenOrUnlocked))
			}
		}
		slices.Sort(v.Permissions)
		if noChecks {
			for _, perm := range v.Permissions {
				v.PostureQueries = append(v.PostureQueries, postureQuerySet{
					PolicyID: "dummy " + strings.ToLower(perm) + " policy: no posture checks defined", PolicyType: perm,
					IsPassing: true, PostureQueries: []postureQuery{},
				})
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// everyService is a grant for every service, in id order (Raw's, the
// store's key order): the caller's own (its policies) where it has one.
func (a *API) everyService(own []posture.Grant) ([]posture.Grant, error) {
	raws, err := a.Store.Raw(posture.KindService)
	if err != nil {
		return nil, err
	}
	policies := make(map[string][]string, len(own))
	for _, g := range own {
		policies[g.ServiceID] = g.Policies
	}
	out := make([]posture.Grant, 0, len(raws))
	for _, raw := range raws {
		var s struct{ ID string }
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		out = append(out, posture.Grant{ServiceID: s.ID, Policies: policies[s.ID]})
	}
	return out, nil
}

func (a *API) listServices(c echo.Context) error {
	views, err := a.services(c, "")
	if err != nil {
		return err
	}
	return api.List(c, views)
}

func (a *API) detailService(c echo.Context) error {
	id := c.Param("id")
	views, err := a.services(c, id)
	if err != nil {
		return err
	}
	if len(views) == 0 {
		return posture.NotFound("service", id)
	}
	return api.OK(c, views[0])
}

type serviceUpdates struct {
	LastChangeAt api.Time `json:"lastChangeAt"`
}

// serviceUpdates is GET /current-api-session/service-updates: the last time
// the caller's services or posture changed, at the earliest the API
// session's creation or this node's start.
func (a *API) serviceUpdates(c echo.Context) error {
	p := api.PrincipalOf(c)
	last, err := a.Store.LastChange(p.Identity.ID)
	if err != nil {
		return err
	}
	for _, t := range []time.Time{p.Session.CreatedAt, a.Started} {
		if t.After(last) {
			last = t
		}
	}
	return api.OK(c, serviceUpdates{LastChangeAt: api.Time(last)})
}

// edgeRouterView is an edge router as clients see it.
type edgeRouterView struct {
	ID                 string            `json:"id"`
	Name               string            `json:"name"`
	Hostname           string            `json:"hostname"`
	IsOnline           bool              `json:"isOnline"`
	Cost               int64             `json:"cost"`
	NoTraversal        bool              `json:"noTraversal"`
	Disabled           bool              `json:"disabled"`
	SyncStatus         string            `json:"syncStatus"`
	SupportedProtocols map[string]string `json:"supportedProtocols"`
	URLs               map[string]string `json:"urls"`
	AppData            posture.Tags      `json:"appData"`
	Tags               posture.Tags      `json:"tags"`
	CreatedAt          api.Time          `json:"createdAt"`
	UpdatedAt          api.Time          `json:"updatedAt"`
	Links              api.Links         `json:"_links"`
}

// routers reads edge routers by id, as views, skipping disabled ones.
func (a *API) routers(ids []string) []edgeRouterView {
	raws := make([]json.RawMessage, 0, len(ids))
	for _, id := range ids {
		if raw, err := a.Store.RawEntity(posture.KindEdgeRouter, id); err == nil {
			raws = append(raws, raw)
		}
	}
	return routerViews(raws)
}

// routerViews decodes edge routers as views, skipping disabled ones.
func routerViews(raws []json.RawMessage) []edgeRouterView {
	out := []edgeRouterView{}
	for _, raw := range raws {
		var r posture.EdgeRouter
		if json.Unmarshal(raw, &r) != nil || r.Disabled {
			continue
		}
		protocols := map[string]string{}
		if r.Hostname != "" {
			protocols["tls"] = "tls://" + r.Hostname + ":3022"
		}
		out = append(out, edgeRouterView{ID: r.ID, Name: r.Name, Hostname: r.Hostname, Cost: r.Cost, NoTraversal: r.NoTraversal,
			SyncStatus: "", SupportedProtocols: protocols, URLs: protocols, AppData: r.AppData, Tags: tagsOrEmpty(r.Tags),
			CreatedAt: api.Time(r.CreatedAt), UpdatedAt: api.Time(r.UpdatedAt), Links: api.SelfLink(string(posture.KindEdgeRouter), r.ID)})
	}
	return out
}

func tagsOrEmpty(t posture.Tags) posture.Tags {
	if t == nil {
		return posture.Tags{}
	}
	return t
}

// routersFor are the edge routers an identity may use for a service: those
// its edge router policies allow and the service's policies permit. There
// is no data plane here, so none is online.
func (a *API) routersFor(identityID, serviceID string) []string {
	mine := a.Store.Reachable(posture.KindEdgeRouterPolicy, "identityRoles", identityID, "edgeRouterRoles", "")
	theirs := a.Store.Reachable(posture.KindServiceEdgeRouterPolicy, "serviceRoles", serviceID, "edgeRouterRoles", "")
	return slices.DeleteFunc(mine, func(id string) bool { _, ok := slices.BinarySearch(theirs, id); return !ok })
}

func (a *API) currentIdentityEdgeRouters(c echo.Context) error {
	p := api.PrincipalOf(c)
	if p.Identity.IsAdmin {
		raws, err := a.Store.Raw(posture.KindEdgeRouter)
		if err != nil {
			return err
		}
		return api.List(c, routerViews(raws))
	}
	return api.List(c, a.routers(a.Store.Reachable(posture.KindEdgeRouterPolicy, "identityRoles", p.Identity.ID, "edgeRouterRoles", "")))
}

// sessionClaims are the claims of a session token, as the controller's
// service access tokens have them and the Go SDK reads them (its
// GetSessionFromJwt): the service is the subject, the session the token's
// id. Tokens made before this layout had the session as subject.
type sessionClaims struct {
	jwtRegistered
	APISessionID string `json:"z_asid"`
	IdentityID   string `json:"z_iid"`
	Type         string `json:"z_st"`
}

// serviceEdgeRouters is GET /services/:id/edge-routers. A session-token
// header, when given, must be a valid token of a live session of the
// caller for this service.
func (a *API) serviceEdgeRouters(c echo.Context) error {
	p := api.PrincipalOf(c)
	id := c.Param("id")
	if tok := c.Request().Header.Get("session-token"); tok != "" {
		var claims sessionClaims
		if err := a.Tokens.Parse(tok, &claims); err != nil {
			return &posture.Error{Code: posture.CodeUnauthorized, Message: "the session token is not valid"}
		}
		s, err := a.Store.Session(claims.ID)
		if errors.Is(err, posture.ErrNotFound) {
			s, err = a.Store.Session(claims.Subject) // a token of the earlier layout
		}
		if err != nil || s.ServiceID != id || s.IdentityID != p.Identity.ID {
			return &posture.Error{Code: posture.CodeUnauthorized, Message: "the session token does not name a live session of this service"}
		}
	}
	if !a.maySee(p, id) {
		return posture.NotFound("service", id)
	}
	return api.OK(c, map[string]any{"edgeRouters": a.routers(a.routersFor(p.Identity.ID, id))})
}

// serviceTerminators is GET /services/:id/terminators: there is no data
// plane, so no service has terminators.
func (a *API) serviceTerminators(c echo.Context) error {
	if !a.maySee(api.PrincipalOf(c), c.Param("id")) {
		return posture.NotFound("service", c.Param("id"))
	}
	return api.List(c, []any{})
}

// maySee reports whether the caller may see a service: an admin any that
// exists, anyone else one a service policy grants it (as GET /services and
// GET /services/:id list them). A service the caller may not see is
// answered 404 like one that does not exist, so that its existence does not
// leak.
func (a *API) maySee(p *api.Principal, serviceID string) bool {
	if p.Identity.IsAdmin {
		_, err := a.Store.RawEntity(posture.KindService, serviceID)
		return err == nil
	}
	grants := a.Store.ServicesFor(p.Identity.ID, "")
	return slices.ContainsFunc(grants, func(g posture.Grant) bool { return g.ServiceID == serviceID })
}
