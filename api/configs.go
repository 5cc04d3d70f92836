package api

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// ModelReader reads the model's entities by id and finds an id by name
// (projections.Store implements it).
type ModelReader interface {
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
	IDByName(kind posture.Kind, name string) (string, error)
}

// ConfigReader reads configs and what identities have of their own
// (projections.Store implements it).
type ConfigReader interface {
	ModelReader
	// IdentityServiceConfigs reads an identity's own configs for services:
	// a service id to a config type id to a config id.
	IdentityServiceConfigs(identityID string) (map[string]map[string]string, error)
}

// AllConfigTypes asks for the configs of every config type.
const AllConfigTypes = "all"

// ConfigTypeIDs resolves the config types a client names, by id or by
// name, into ids, as the controller does: "all" stands for every type and
// is kept alone; what names no config type is left out.
func ConfigTypeIDs(r ModelReader, names []string) []string {
	ids := []string{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == AllConfigTypes {
			return []string{AllConfigTypes}
		}
		if _, err := r.RawEntity(posture.KindConfigType, n); err != nil {
			if n, err = r.IDByName(posture.KindConfigType, n); err != nil {
				continue
			}
		}
		if !slices.Contains(ids, n) {
			ids = append(ids, n)
		}
	}
	return ids
}

// Configs are the config types a request asks for: those of the
// configTypes query parameter (repeated or comma-separated, by id or name,
// "all" for every type), or else those its API session gave at
// authentication; and the requester's own configs for services, which
// take the place of a service's config of the same type.
type Configs struct {
	r     ConfigReader
	types []string                     // ids, or AllConfigTypes alone
	own   map[string]map[string]string // service id -> config type id -> config id
}

// AskedConfigs reads the config types a request asks for; the parameter
// names at most MaxConfigTypes, as a login's body does.
func AskedConfigs(c echo.Context, r ConfigReader) (Configs, error) {
	identityID := ""
	if p := PrincipalOf(c); p != nil {
		identityID = p.Identity.ID
	}
	return AskedConfigsFor(c, r, identityID)
}

// AskedConfigsFor is AskedConfigs with the own service configs of another
// identity than the requester's ("": none).
func AskedConfigsFor(c echo.Context, r ConfigReader, identityID string) (Configs, error) {
	var asked []string
	for _, v := range c.QueryParams()["configTypes"] {
		asked = append(asked, strings.Split(v, ",")...)
	}
	if err := CheckList("configTypes", asked, MaxConfigTypes, MaxLabel); err != nil {
		return Configs{}, err
	}
	p := PrincipalOf(c)
	if len(asked) == 0 && p != nil {
		asked = p.Session.ConfigTypes
	}
	cfg := Configs{r: r, types: ConfigTypeIDs(r, asked)}
	if len(cfg.types) > 0 && identityID != "" {
		var err error
		if cfg.own, err = r.IdentityServiceConfigs(identityID); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// Of returns a service's configs of the asked types, each config's data
// under its type's name (a service's "config" on the wire), the
// requester's own in place of the service's; empty when no type is asked
// for.
func (a Configs) Of(serviceID string, configIDs []string) map[string]map[string]any {
	out := map[string]map[string]any{}
	if len(a.types) == 0 {
		return out
	}
	all := a.types[0] == AllConfigTypes
	add := func(id string) {
		var cfg posture.Config
		var ct posture.ConfigType
		if readEntity(a.r, posture.KindConfig, id, &cfg) != nil || readEntity(a.r, posture.KindConfigType, cfg.ConfigTypeID, &ct) != nil {
			return // removed since the service was read
		}
		if all || slices.Contains(a.types, ct.ID) {
			out[ct.Name] = cfg.Data
		}
	}
	for _, id := range configIDs {
		add(id)
	}
	for _, id := range a.own[serviceID] {
		add(id)
	}
	return out
}

func readEntity(r ModelReader, kind posture.Kind, id string, v any) error {
	raw, err := r.RawEntity(kind, id)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
