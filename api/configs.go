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
// authentication.
type Configs struct {
	r     ModelReader
	types []string // ids, or AllConfigTypes alone
}

// AskedConfigs reads the config types a request asks for; the parameter
// names at most MaxConfigTypes, as a login's body does.
func AskedConfigs(c echo.Context, r ModelReader) (Configs, error) {
	var asked []string
	for _, v := range c.QueryParams()["configTypes"] {
		asked = append(asked, strings.Split(v, ",")...)
	}
	if err := CheckList("configTypes", asked, MaxConfigTypes, MaxLabel); err != nil {
		return Configs{}, err
	}
	if len(asked) == 0 {
		if p := PrincipalOf(c); p != nil {
			asked = p.Session.ConfigTypes
		}
	}
	return Configs{r: r, types: ConfigTypeIDs(r, asked)}, nil
}

// Of returns a service's configs of the asked types, each config's data
// under its type's name (a service's "config" on the wire); empty when no
// type is asked for.
func (a Configs) Of(configIDs []string) map[string]map[string]any {
	out := map[string]map[string]any{}
	if len(a.types) == 0 {
		return out
	}
	all := a.types[0] == AllConfigTypes
	for _, id := range configIDs {
		var cfg posture.Config
		var ct posture.ConfigType
		if readEntity(a.r, posture.KindConfig, id, &cfg) != nil || readEntity(a.r, posture.KindConfigType, cfg.ConfigTypeID, &ct) != nil {
			continue // removed since the service was read
		}
		if all || slices.Contains(a.types, ct.ID) {
			out[ct.Name] = cfg.Data
		}
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
