package management

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/filter"
)

// Role fields, as the projections name them.
const (
	identityRoles     = "identityRoles"
	serviceRoles      = "serviceRoles"
	postureCheckRoles = "postureCheckRoles"
	edgeRouterRoles   = "edgeRouterRoles"
)

func nameOf(raw json.RawMessage) string {
	var v struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.Name
}

// exists answers NOT_FOUND unless the entity exists.
func (a *API) exists(kind posture.Kind, noun, id string) error {
	_, err := a.Store.RawEntity(kind, id)
	if errors.Is(err, posture.ErrNotFound) {
		return posture.NotFound(noun, id)
	}
	return err
}

// related answers the views of entities by id, filtered and paged.
func related[T posture.Entity](a *API, c echo.Context, ids []string, noun string, view func(T) (any, error)) error {
	out := make([]any, 0, len(ids))
	for _, id := range ids {
		e, err := get[T](a.Store, noun, id)
		if posture.CodeOf(err) == posture.CodeNotFound {
			continue // removed since the graph was read
		}
		if err != nil {
			return err
		}
		v, err := view(e)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	return listViews(c, out, view)
}

// sub is a route that lists the entities related to one entity.
func sub[T posture.Entity](a *API, parent posture.Kind, parentNoun, path, noun string, ids func(id string) []string, view func(T) (any, error)) api.Route {
	return api.Route{Method: http.MethodGet, Path: "/" + string(parent) + "/:id/" + path, Access: api.Admin,
		Handler: func(c echo.Context) error {
			id := c.Param("id")
			if err := a.exists(parent, parentNoun, id); err != nil {
				return err
			}
			return related(a, c, ids(id), noun, view)
		}}
}

func (a *API) relationRoutes() []api.Route {
	sp, erp, serp := posture.KindServicePolicy, posture.KindEdgeRouterPolicy, posture.KindServiceEdgeRouterPolicy
	selected := func(kind posture.Kind, field string) func(string) []string {
		return func(id string) []string { return a.Store.Selected(kind, id, field) }
	}
	selecting := func(kind posture.Kind, field string) func(string) []string {
		return func(id string) []string { return a.Store.Selecting(kind, field, id) }
	}
	identityView := a.identityView
	serviceView := pure(a.serviceView)
	policyView := pure(a.servicePolicyView)
	routerView := pure(a.edgeRouterView)
	erpView := a.edgeRouterPolicies().view
	serpView := a.serviceEdgeRouterPolicies().view
	return []api.Route{
		sub(a, sp, "service policy", "identities", "identity", selected(sp, identityRoles), identityView),
		sub(a, sp, "service policy", "services", "service", selected(sp, serviceRoles), serviceView),
		sub(a, sp, "service policy", "posture-checks", "posture check", selected(sp, postureCheckRoles), pure(checkView)),
		sub(a, erp, "edge router policy", "identities", "identity", selected(erp, identityRoles), identityView),
		sub(a, erp, "edge router policy", "edge-routers", "edge router", selected(erp, edgeRouterRoles), routerView),
		sub(a, serp, "service edge router policy", "services", "service", selected(serp, serviceRoles), serviceView),
		sub(a, serp, "service edge router policy", "edge-routers", "edge router", selected(serp, edgeRouterRoles), routerView),
		sub(a, posture.KindIdentity, "identity", "service-policies", "service policy", selecting(sp, identityRoles), policyView),
		sub(a, posture.KindIdentity, "identity", "edge-router-policies", "edge router policy", selecting(erp, identityRoles), erpView),
		sub(a, posture.KindIdentity, "identity", "services", "service", a.identityServices, serviceView),
		sub(a, posture.KindIdentity, "identity", "edge-routers", "edge router", a.identityRouters, routerView),
		sub(a, posture.KindService, "service", "service-policies", "service policy", selecting(sp, serviceRoles), policyView),
		sub(a, posture.KindService, "service", "service-edge-router-policies", "service edge router policy", selecting(serp, serviceRoles), serpView),
		sub(a, posture.KindService, "service", "edge-routers", "edge router", a.serviceRouters, routerView),
		sub(a, posture.KindService, "service", "configs", "config", a.serviceConfigs, pure(a.configView)),
		sub(a, posture.KindConfigType, "config type", "configs", "config", a.typeConfigs, pure(a.configView)),
		sub(a, posture.KindConfig, "config", "services", "service", a.configServices, serviceView),
		sub(a, posture.KindCheck, "posture check", "service-policies", "service policy", selecting(sp, postureCheckRoles), policyView),
		sub(a, posture.KindEdgeRouter, "edge router", "edge-router-policies", "edge router policy", selecting(erp, edgeRouterRoles), erpView),
		sub(a, posture.KindEdgeRouter, "edge router", "service-edge-router-policies", "service edge router policy", selecting(serp, edgeRouterRoles), serpView),
		{Method: http.MethodGet, Path: "/services/:id/identities", Access: api.Admin, Handler: a.serviceIdentities},
		a.attributeRoute("posture-check-role-attributes", posture.KindCheck),
		a.attributeRoute("identity-role-attributes", posture.KindIdentity),
		a.attributeRoute("service-role-attributes", posture.KindService),
		a.attributeRoute("edge-router-role-attributes", posture.KindEdgeRouter),
	}
}

// union walks the policies selecting an entity to what they select.
func (a *API) union(policyKind posture.Kind, fromField, id, toField string) []string {
	return a.Store.Reachable(policyKind, fromField, id, toField, "")
}

// identityServices are the services any service policy grants the identity.
func (a *API) identityServices(id string) []string {
	return a.union(posture.KindServicePolicy, identityRoles, id, serviceRoles)
}

// serviceIdentities is GET /services/:id/identities: the identities a
// service policy grants the service, of the type policyType names (Dial or
// Bind; either when it is left out), as the controller lists them.
func (a *API) serviceIdentities(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindService, "service", id); err != nil {
		return err
	}
	typ := c.QueryParam("policyType")
	switch strings.ToLower(typ) {
	case "":
	case "dial":
		typ = posture.Dial
	case "bind":
		typ = posture.Bind
	default:
		return posture.Invalid("policyType", "must be Dial or Bind", typ)
	}
	return related(a, c, a.Store.Reachable(posture.KindServicePolicy, serviceRoles, id, identityRoles, typ), "identity", a.identityView)
}

// identityRouters are the edge routers the identity may use.
func (a *API) identityRouters(id string) []string {
	return a.union(posture.KindEdgeRouterPolicy, identityRoles, id, edgeRouterRoles)
}

// serviceRouters are the edge routers permitted to carry the service.
func (a *API) serviceRouters(id string) []string {
	return a.union(posture.KindServiceEdgeRouterPolicy, serviceRoles, id, edgeRouterRoles)
}

func (a *API) serviceConfigs(id string) []string {
	s, err := get[posture.Service](a.Store, "service", id)
	if err != nil {
		return nil
	}
	return s.Configs
}

// typeConfigs are the configs of a config type.
func (a *API) typeConfigs(id string) []string {
	ids, _ := a.Store.ConfigsOfType(id)
	return ids
}

// configServices are the services that use a config (read from every
// service: no index keeps them).
func (a *API) configServices(id string) []string {
	all, err := list[posture.Service](a.Store)
	if err != nil {
		return nil
	}
	var ids []string
	for _, s := range all {
		if slices.Contains(s.Configs, id) {
			ids = append(ids, s.ID)
		}
	}
	return ids
}

// attributeRoute lists the role attributes in use by a kind, filtered on
// {"id": attribute, "name": attribute} and paged.
func (a *API) attributeRoute(path string, kind posture.Kind) api.Route {
	return api.Route{Method: http.MethodGet, Path: "/" + path, Access: api.Admin, Handler: func(c echo.Context) error {
		params, err := api.ParseList(c)
		if err != nil {
			return err
		}
		// An attribute is its id and its name, nothing else.
		opts := filter.Options{Fields: []string{"id", "name"}}
		q, err := filter.ParseWith(params.Filter, opts)
		if err != nil {
			return err
		}
		by := q.Sort
		if len(by) == 0 {
			if by, err = filter.ParseSortWith(params.Sort, opts); err != nil {
				return err
			}
		}
		var out []string
		for _, attr := range a.Store.RoleAttributes(kind) {
			if q.Match(map[string]any{"id": attr, "name": attr}) {
				out = append(out, attr)
			}
		}
		slices.Sort(out)
		if len(by) > 0 && by[0].Desc {
			slices.Reverse(out)
		}
		return api.PaginateFields(c, params, out, opts.Fields)
	}}
}
