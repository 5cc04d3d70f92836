package management

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// An identity's service configs: for a service and a config type, the
// config its clients get in the service's "config" instead of the
// service's own of that type (the controller's service config overrides).

// serviceConfigPair is an item of the body of POST and DELETE
// /identities/{id}/service-configs.
type serviceConfigPair struct {
	ServiceID string `json:"serviceId"`
	ConfigID  string `json:"configId"`
}

// serviceConfigView is an item of GET /identities/{id}/service-configs.
type serviceConfigView struct {
	ServiceID string        `json:"serviceId"`
	Service   api.EntityRef `json:"service"`
	ConfigID  string        `json:"configId"`
	Config    api.EntityRef `json:"config"`
}

func (a *API) serviceConfigRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/identities/:id/service-configs", Access: api.Admin, Handler: a.listServiceConfigs},
		{Method: http.MethodPost, Path: "/identities/:id/service-configs", Access: api.Admin, Handler: a.assignServiceConfigs},
		{Method: http.MethodDelete, Path: "/identities/:id/service-configs", Access: api.Admin, Handler: a.removeServiceConfigs},
	}
}

// listServiceConfigs lists an identity's service configs, by service name
// and config type; a service or config deleted since is left out.
func (a *API) listServiceConfigs(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
		return err
	}
	own, err := a.Store.IdentityServiceConfigs(id)
	if err != nil {
		return err
	}
	out := []serviceConfigView{}
	for _, serviceID := range slices.Sorted(maps.Keys(own)) {
		svc, err := get[posture.Service](a.Store, "service", serviceID)
		if err != nil {
			continue
		}
		for _, typeID := range slices.Sorted(maps.Keys(own[serviceID])) {
			cfg, err := get[posture.Config](a.Store, "config", own[serviceID][typeID])
			if err != nil {
				continue
			}
			out = append(out, serviceConfigView{
				ServiceID: svc.ID, Service: api.Ref(string(posture.KindService), svc.ID, svc.Name),
				ConfigID: cfg.ID, Config: api.Ref(string(posture.KindConfig), cfg.ID, cfg.Name),
			})
		}
	}
	return api.List(c, out)
}

// decodePairs reads a body that is a JSON array of {serviceId, configId}.
// An empty body is an empty array.
func decodePairs(c echo.Context) ([]serviceConfigPair, error) {
	body, err := api.ReadBody(c)
	if err != nil {
		return nil, err
	}
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '[' {
		return nil, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON array of {serviceId, configId}"}
	}
	var pairs []serviceConfigPair
	if err := api.DecodeBytes(body, &pairs); err != nil {
		return nil, err
	}
	if len(pairs) > posture.MaxIdentityServiceConfigs {
		return nil, posture.Invalid("body", fmt.Sprintf("at most %d service configs", posture.MaxIdentityServiceConfigs), len(pairs))
	}
	return pairs, nil
}

// assignServiceConfigs is POST /identities/{id}/service-configs
// [{serviceId, configId}]: each config becomes the identity's for the
// service, in place of the one it had of the same type.
func (a *API) assignServiceConfigs(c echo.Context) error {
	pairs, err := decodePairs(c)
	if err != nil {
		return err
	}
	return a.changeServiceConfigs(c, func(own map[string]map[string]string) error {
		for i, p := range pairs {
			field := fmt.Sprintf("[%d]", i)
			if err := a.exists(posture.KindService, "service", p.ServiceID); err != nil {
				return notFoundAt(err, field+".serviceId", p.ServiceID)
			}
			cfg, err := get[posture.Config](a.Store, "config", p.ConfigID)
			if err != nil {
				return notFoundAt(err, field+".configId", p.ConfigID)
			}
			if own[p.ServiceID] == nil {
				own[p.ServiceID] = map[string]string{}
			}
			own[p.ServiceID][cfg.ConfigTypeID] = cfg.ID
		}
		return nil
	})
}

// notFoundAt names the field of a pair whose service or config does not
// exist in a 404, as the controller answers it; another error stays.
func notFoundAt(err error, field, id string) error {
	var pe *posture.Error
	if errors.As(err, &pe) && pe.Code == posture.CodeNotFound {
		return &posture.Error{Code: posture.CodeNotFound, Message: pe.Message, Field: field, Reason: "not found", Value: id}
	}
	return err
}

// removeServiceConfigs is DELETE /identities/{id}/service-configs
// [{serviceId, configId}]: the identity's config for the service of that
// config's type goes (or the one with that id, if the config is gone). The
// pairs are required: a body a proxy dropped removes nothing.
func (a *API) removeServiceConfigs(c echo.Context) error {
	pairs, err := decodePairs(c)
	if err != nil {
		return err
	}
	if len(pairs) == 0 {
		return posture.Invalid("body", "give the {serviceId, configId} pairs to remove (GET lists them)", nil)
	}
	return a.changeServiceConfigs(c, func(own map[string]map[string]string) error {
		for _, p := range pairs {
			cfg, err := get[posture.Config](a.Store, "config", p.ConfigID)
			maps.DeleteFunc(own[p.ServiceID], func(typeID, configID string) bool {
				return configID == p.ConfigID || err == nil && typeID == cfg.ConfigTypeID
			})
		}
		return nil
	})
}

// changeServiceConfigs changes an identity's service configs in a model
// change, on the latest state, and records them as they then are.
func (a *API) changeServiceConfigs(c echo.Context, change func(own map[string]map[string]string) error) error {
	id := c.Param("id")
	err := a.Writer.Model(c, func() ([]posture.Payload, error) {
		if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
			return nil, err
		}
		own, err := a.Store.IdentityServiceConfigs(id)
		if err != nil {
			return nil, err
		}
		if own == nil {
			own = map[string]map[string]string{}
		}
		before := cloneServiceConfigs(own)
		// What names a service or a config deleted since is dropped: it
		// shows nowhere, and would count against the limit.
		for serviceID, types := range own {
			gone, err := a.gone(posture.KindService, serviceID)
			if err != nil {
				return nil, err
			}
			if gone {
				delete(own, serviceID)
				continue
			}
			for typeID, configID := range types {
				gone, err := a.gone(posture.KindConfig, configID)
				if err != nil {
					return nil, err
				}
				if gone {
					delete(types, typeID)
				}
			}
		}
		if err := change(own); err != nil {
			return nil, err
		}
		maps.DeleteFunc(own, func(_ string, types map[string]string) bool { return len(types) == 0 })
		n := 0
		for _, types := range own {
			n += len(types)
		}
		if n > posture.MaxIdentityServiceConfigs {
			return nil, posture.Invalid("body", fmt.Sprintf("an identity has at most %d service configs", posture.MaxIdentityServiceConfigs), n)
		}
		// A change that leaves them as they were records nothing, and so
		// does not send the identity's clients to read their services again.
		if maps.EqualFunc(own, before, maps.Equal) {
			return nil, nil
		}
		return []posture.Payload{posture.IdentityServiceConfigsSet{IdentityID: id, Configs: own}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// cloneServiceConfigs copies an identity's service configs, maps within.
func cloneServiceConfigs(own map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(own))
	for serviceID, types := range own {
		out[serviceID] = maps.Clone(types)
	}
	return out
}

// gone says whether no entity of the kind has the id.
func (a *API) gone(kind posture.Kind, id string) (bool, error) {
	_, err := a.Store.RawEntity(kind, id)
	if errors.Is(err, posture.ErrNotFound) {
		return true, nil
	}
	return false, err
}
