package management

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

type serviceInput struct {
	Name               *string      `json:"name,omitempty"`
	RoleAttributes     *[]string    `json:"roleAttributes,omitempty"`
	Attributes         *[]string    `json:"attributes,omitempty"`
	Configs            []string     `json:"configs,omitempty"`
	EncryptionRequired *bool        `json:"encryptionRequired,omitempty"`
	MaxIdleTimeMillis  *int64       `json:"maxIdleTimeMillis,omitempty"`
	TerminatorStrategy string       `json:"terminatorStrategy,omitempty"`
	Tags               posture.Tags `json:"tags,omitempty"`
}

// DefaultTerminatorStrategy is the strategy of services that name none.
const DefaultTerminatorStrategy = "smartrouting"

func (a *API) services() *resource[posture.Service, serviceInput] {
	return &resource[posture.Service, serviceInput]{
		a: a, kind: posture.KindService, noun: "service",
		input: func(s posture.Service, _ time.Time) serviceInput {
			return serviceInput{Name: &s.Name, RoleAttributes: &s.RoleAttributes, Configs: s.Configs, EncryptionRequired: &s.EncryptionRequired,
				MaxIdleTimeMillis: &s.MaxIdleTimeMillis, TerminatorStrategy: s.TerminatorStrategy, Tags: s.Tags}
		},
		build: a.buildService,
		view:  pure(a.serviceView),
		listView: func(c echo.Context) func(posture.Service) (any, error) {
			configs, err := api.AskedConfigs(c, a.Store)
			return func(s posture.Service) (any, error) {
				if err != nil {
					return nil, err
				}
				return a.serviceViewWith(s, configs.Of(s.ID, s.Configs)), nil
			}
		},
		aliases: [][]string{{"roleAttributes", "attributes"}},
	}
}

// serviceRoutes are the service resource's routes, with the list that
// takes asIdentity.
func (a *API) serviceRoutes() []api.Route {
	r := a.services()
	routes := r.routes()
	for i, rt := range routes {
		if rt.Method == http.MethodGet && rt.Path == "/"+string(posture.KindService) {
			routes[i].Handler = func(c echo.Context) error {
				if c.QueryParam("asIdentity") == "" {
					return r.list(c)
				}
				return a.servicesAs(c)
			}
		}
	}
	return routes
}

// servicesAs is GET /services?asIdentity=<id or name>: the services the
// identity's service policies grant it, with its permissions and its own
// configs, as the controller lists what an identity sees for an admin.
// Posture queries are the identity's API sessions', read on the client
// API or in its posture data: the list leaves them empty.
func (a *API) servicesAs(c echo.Context) error {
	ref := c.QueryParam("asIdentity")
	if err := api.CheckMax("asIdentity", ref, api.MaxLabel); err != nil {
		return err
	}
	id := ref
	if err := a.exists(posture.KindIdentity, "identity", ref); err != nil {
		var nerr error
		if id, nerr = a.Store.IDByName(posture.KindIdentity, ref); nerr != nil {
			if errors.Is(nerr, posture.ErrNotFound) {
				return err
			}
			return nerr
		}
	}
	perms := map[string][]string{}
	for _, typ := range []string{posture.Bind, posture.Dial} {
		for _, sid := range a.Store.Reachable(posture.KindServicePolicy, identityRoles, id, serviceRoles, typ) {
			perms[sid] = append(perms[sid], typ)
		}
	}
	configs, err := api.AskedConfigsFor(c, a.Store, id)
	if err != nil {
		return err
	}
	all, err := list[posture.Service](a.Store)
	if err != nil {
		return err
	}
	view := func(s posture.Service) (any, error) {
		v := a.serviceViewWith(s, configs.Of(s.ID, s.Configs)).(map[string]any)
		v["permissions"] = perms[s.ID]
		return v, nil
	}
	views := []any{}
	for _, s := range all {
		if perms[s.ID] != nil {
			v, _ := view(s)
			views = append(views, v)
		}
	}
	return listViews(c, views, view)
}

func (a *API) buildService(in serviceInput, old *posture.Service, now time.Time) (posture.Service, error) {
	var s posture.Service
	var err error
	if old != nil {
		// encryptionRequired is set at create (the seed's read-only
		// field): an update that would change it is refused, not ignored.
		s.ID, s.CreatedAt, s.EncryptionRequired = old.ID, old.CreatedAt, old.EncryptionRequired
		if in.EncryptionRequired != nil && *in.EncryptionRequired != old.EncryptionRequired {
			return s, posture.Invalid("encryptionRequired", "is set when the service is created and does not change", *in.EncryptionRequired)
		}
	} else {
		s.ID, s.CreatedAt = posture.NewID(), now
		s.EncryptionRequired = deref(in.EncryptionRequired, true)
	}
	s.UpdatedAt = now
	if s.Name, err = name("name", in.Name); err != nil {
		return s, err
	}
	if err := a.unique(posture.KindService, s.Name, s.ID); err != nil {
		return s, err
	}
	if s.RoleAttributes, err = attributes("roleAttributes", roleAttributes(old), in.RoleAttributes, in.Attributes); err != nil {
		return s, err
	}
	if s.Tags, err = tags(in.Tags); err != nil {
		return s, err
	}
	if s.MaxIdleTimeMillis = deref(in.MaxIdleTimeMillis, 0); s.MaxIdleTimeMillis < 0 {
		return s, posture.Invalid("maxIdleTimeMillis", "must not be negative", s.MaxIdleTimeMillis)
	}
	if s.TerminatorStrategy = strings.TrimSpace(in.TerminatorStrategy); s.TerminatorStrategy == "" {
		s.TerminatorStrategy = DefaultTerminatorStrategy
	}
	s.Configs = []string{}
	byType := map[string]string{}
	for i, ref := range in.Configs {
		cfg, err := a.config(ref)
		if err != nil {
			return s, posture.Invalid(fmt.Sprintf("configs[%d]", i), "no config with this id or name", ref)
		}
		if other, dup := byType[cfg.ConfigTypeID]; dup && other != cfg.ID {
			return s, posture.Invalid(fmt.Sprintf("configs[%d]", i), "a service has at most one config of each config type", ref)
		}
		if _, dup := byType[cfg.ConfigTypeID]; !dup {
			byType[cfg.ConfigTypeID] = cfg.ID
			s.Configs = append(s.Configs, cfg.ID)
		}
	}
	return s, nil
}

// config resolves a config by id or name.
func (a *API) config(ref string) (posture.Config, error) {
	cfg, err := get[posture.Config](a.Store, "config", ref)
	if err == nil {
		return cfg, nil
	}
	id, nerr := a.Store.IDByName(posture.KindConfig, ref)
	if nerr != nil {
		if errors.Is(nerr, posture.ErrNotFound) {
			return cfg, err
		}
		return cfg, nerr
	}
	return get[posture.Config](a.Store, "config", id)
}

// serviceView is a service with no config asked for, as in its detail and
// in the lists of a policy's or an identity's services.
func (a *API) serviceView(s posture.Service) any {
	return a.serviceViewWith(s, map[string]map[string]any{})
}

// serviceViewWith is a service with its configs of the types the request
// asks for (api.AskedConfigs), as the controller's management answers fill
// them in a list of services (its detail leaves them out).
func (a *API) serviceViewWith(s posture.Service, config map[string]map[string]any) any {
	links := api.SelfLink(string(posture.KindService), s.ID)
	for _, sub := range []string{"service-policies", "configs", "edge-routers"} {
		links[sub] = api.Link{Href: "./services/" + s.ID + "/" + sub}
	}
	return map[string]any{
		"id": s.ID, "name": s.Name, "roleAttributes": s.RoleAttributes, "configs": s.Configs, "config": config,
		"encryptionRequired": s.EncryptionRequired, "maxIdleTimeMillis": s.MaxIdleTimeMillis,
		"terminatorStrategy": s.TerminatorStrategy, "tags": s.Tags,
		// The caller is an administrator, who may do everything with a
		// service; posture queries are an identity's, asked on the client API.
		"permissions": []string{"Bind", "Dial"}, "postureQueries": []any{},
		"createdAt": api.Time(s.CreatedAt), "updatedAt": api.Time(s.UpdatedAt), "_links": links,
	}
}

type configTypeInput struct {
	Name   *string        `json:"name,omitempty"`
	Schema map[string]any `json:"schema,omitempty"`
	Tags   posture.Tags   `json:"tags,omitempty"`
}

func (a *API) configTypes() *resource[posture.ConfigType, configTypeInput] {
	return &resource[posture.ConfigType, configTypeInput]{
		a: a, kind: posture.KindConfigType, noun: "config type",
		input: func(t posture.ConfigType, _ time.Time) configTypeInput {
			return configTypeInput{Name: &t.Name, Schema: t.Schema, Tags: t.Tags}
		},
		build: func(in configTypeInput, old *posture.ConfigType, now time.Time) (posture.ConfigType, error) {
			var t posture.ConfigType
			var err error
			if old != nil {
				t.ID, t.CreatedAt = old.ID, old.CreatedAt
			} else {
				t.ID, t.CreatedAt = posture.NewID(), now
			}
			t.UpdatedAt = now
			if t.Name, err = name("name", in.Name); err != nil {
				return t, err
			}
			if err := a.unique(posture.KindConfigType, t.Name, t.ID); err != nil {
				return t, err
			}
			if t.Schema = in.Schema; t.Schema == nil {
				t.Schema = map[string]any{}
			}
			if _, _, err := configSchema(t.Schema); err != nil {
				return t, posture.Invalid("schema", "must be a JSON Schema: "+err.Error(), nil)
			}
			t.Tags, err = tags(in.Tags)
			return t, err
		},
		view: pure(func(t posture.ConfigType) any {
			return map[string]any{"id": t.ID, "name": t.Name, "schema": t.Schema, "tags": t.Tags,
				"createdAt": api.Time(t.CreatedAt), "updatedAt": api.Time(t.UpdatedAt),
				"_links": api.SelfLink(string(posture.KindConfigType), t.ID)}
		}),
		canDelete: func(t posture.ConfigType) error {
			ids, err := a.Store.ConfigsOfType(t.ID)
			if err != nil {
				return err
			}
			if len(ids) > 0 {
				return posture.Errorf(posture.CodeReferenced, "config type %q is used by %d config(s)", t.Name, len(ids))
			}
			return nil
		},
	}
}

type configInput struct {
	Name         *string        `json:"name,omitempty"`
	ConfigTypeID string         `json:"configTypeId,omitempty"`
	Data         map[string]any `json:"data,omitempty"`
	Tags         posture.Tags   `json:"tags,omitempty"`
}

func (a *API) configs() *resource[posture.Config, configInput] {
	return &resource[posture.Config, configInput]{
		a: a, kind: posture.KindConfig, noun: "config",
		input: func(c posture.Config, _ time.Time) configInput {
			return configInput{Name: &c.Name, ConfigTypeID: c.ConfigTypeID, Data: c.Data, Tags: c.Tags}
		},
		build: func(in configInput, old *posture.Config, now time.Time) (posture.Config, error) {
			var c posture.Config
			var err error
			if old != nil {
				c.ID, c.CreatedAt = old.ID, old.CreatedAt
			} else {
				c.ID, c.CreatedAt = posture.NewID(), now
			}
			c.UpdatedAt = now
			if c.Name, err = name("name", in.Name); err != nil {
				return c, err
			}
			if err := a.unique(posture.KindConfig, c.Name, c.ID); err != nil {
				return c, err
			}
			// A config's type cannot change: an update that names none
			// (the client's ConfigUpdate has no configTypeId) keeps it.
			if old != nil && in.ConfigTypeID == "" {
				in.ConfigTypeID = old.ConfigTypeID
			}
			ct, err := a.configType(in.ConfigTypeID)
			if err != nil {
				return c, posture.Invalid("configTypeId", "no config type with this id or name", in.ConfigTypeID)
			}
			if old != nil && ct.ID != old.ConfigTypeID {
				return c, posture.Invalid("configTypeId", "the config type of a config cannot change", in.ConfigTypeID)
			}
			c.ConfigTypeID = ct.ID
			if in.Data == nil {
				return c, posture.Invalid("data", "is required: a JSON object", nil)
			}
			if err := checkConfigData(ct, in.Data); err != nil {
				return c, err
			}
			c.Data = in.Data
			c.Tags, err = tags(in.Tags)
			return c, err
		},
		view: pure(a.configView),
		canDelete: func(cfg posture.Config) error {
			services, err := list[posture.Service](a.Store)
			if err != nil {
				return err
			}
			for _, s := range services {
				for _, id := range s.Configs {
					if id == cfg.ID {
						return posture.Errorf(posture.CodeReferenced, "config %q is used by service %q", cfg.Name, s.Name)
					}
				}
			}
			return nil
		},
	}
}

func (a *API) configType(ref string) (posture.ConfigType, error) {
	t, err := get[posture.ConfigType](a.Store, "config type", ref)
	if err == nil {
		return t, nil
	}
	id, nerr := a.Store.IDByName(posture.KindConfigType, ref)
	if nerr != nil {
		return t, err
	}
	return get[posture.ConfigType](a.Store, "config type", id)
}

func (a *API) configView(c posture.Config) any {
	typeName := ""
	if t, err := get[posture.ConfigType](a.Store, "config type", c.ConfigTypeID); err == nil {
		typeName = t.Name
	}
	return map[string]any{"id": c.ID, "name": c.Name, "configTypeId": c.ConfigTypeID,
		"configType": api.Ref(string(posture.KindConfigType), c.ConfigTypeID, typeName),
		"data":       c.Data, "tags": c.Tags, "createdAt": api.Time(c.CreatedAt), "updatedAt": api.Time(c.UpdatedAt),
		"_links": api.SelfLink(string(posture.KindConfig), c.ID)}
}

// configSchema compiles a config type's schema: JSON Schema of the draft its
// $schema names (draft 4 to 2020-12; 2020-12 without one). References
// resolve within the schema only: nothing is fetched, no file is read. It
// returns the schema with the number of its schemas once its references
// are written out (schemaNodes), and refuses one that could take
// exponential time to check data against (anyOf of two references to a
// definition that does the same, 22 levels deep, held 7 GB).
func configSchema(schema map[string]any) (*jsonschema.Schema, int, error) {
	c := jsonschema.NewCompiler()
	c.UseLoader(jsonschema.SchemeURLLoader{})
	const loc = "urn:postured:config-type"
	if err := c.AddResource(loc, schema); err != nil {
		return nil, 0, err
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return nil, 0, err
	}
	n, err := schemaNodes(compiled)
	if err != nil {
		return nil, 0, err
	}
	return compiled, n, nil
}

// maxSchemaNodes bounds a config type's schema with its references written
// out: a hundred times OpenZiti's intercept.v1. maxSchemaWork bounds the
// data values times those schemas that a config's check may take (each
// value can be checked against each schema once: 1,000 anyOf branches
// against 10,000 array items took 7 s and 2.7 GB).
const (
	maxSchemaNodes = 10_000
	maxSchemaWork  = 250_000
)

// schemaNodes counts the schemas of a compiled schema as the validator
// walks them, each reference counted as the schema it resolves to (the
// compiler's resolution, whatever the base URI), boolean schemas too. It
// refuses a schema that refers to itself, dynamic references (resolved
// only while validating) and a count past maxSchemaNodes.
func schemaNodes(root *jsonschema.Schema) (int, error) {
	sizes := map[*jsonschema.Schema]int{}
	active := map[*jsonschema.Schema]bool{} // being counted: a reference back to one is a cycle
	var size func(s *jsonschema.Schema) (int, error)
	size = func(s *jsonschema.Schema) (int, error) {
		if s == nil {
			return 0, nil
		}
		if n, ok := sizes[s]; ok {
			return n, nil
		}
		if active[s] {
			return 0, errors.New("the schema refers to itself (recursive schemas are not taken)")
		}
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			return 0, errors.New("dynamic references ($dynamicRef, $recursiveRef) are not taken")
		}
		active[s] = true
		defer delete(active, s)
		n := 1
		for _, c := range subschemas(s) {
			m, err := size(c)
			if err != nil {
				return 0, err
			}
			if n += m; n > maxSchemaNodes {
				return 0, fmt.Errorf("the schema holds more than %d schemas once its references are written out", maxSchemaNodes)
			}
		}
		sizes[s] = n
		return n, nil
	}
	return size(root)
}

// subschemas are the schemas s applies to a value or its parts.
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.Not, s.If, s.Then, s.Else, s.PropertyNames, s.UnevaluatedProperties,
		s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, s.PrefixItems...)
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	for _, v := range s.Dependencies {
		if c, ok := v.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.AdditionalItems, s.Items} {
		switch c := v.(type) {
		case *jsonschema.Schema:
			out = append(out, c)
		case []*jsonschema.Schema:
			out = append(out, c...)
		}
	}
	return out
}

// dataValues counts the JSON values of config data.
func dataValues(v any) int {
	n := 1
	switch x := v.(type) {
	case map[string]any:
		for _, c := range x {
			n += dataValues(c)
		}
	case []any:
		for _, c := range x {
			n += dataValues(c)
		}
	}
	return n
}

// checkConfigData refuses config data that its type's schema does not
// accept, as the controller does: 400 on data, with where and why.
func checkConfigData(t posture.ConfigType, data map[string]any) error {
	schema, nodes, err := configSchema(t.Schema)
	if err != nil {
		// A type stored before schemas were checked: nothing to hold data to.
		return nil
	}
	if values := dataValues(data); values*nodes > maxSchemaWork {
		return posture.Invalid("data", fmt.Sprintf("holds %d values, too many to check against the %d schemas of config type %s (at most %d values times schemas)",
			values, nodes, t.Name, maxSchemaWork), nil)
	}
	err = schema.Validate(any(data))
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	// The first cause that has none of its own says where and why.
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	reason := ve.ErrorKind.LocalizedString(english)
	if len(reason) > maxSchemaReason {
		reason = strings.ToValidUTF8(reason[:maxSchemaReason], "") + "..."
	}
	at := "/" + strings.Join(ve.InstanceLocation, "/")
	return posture.Invalid("data", fmt.Sprintf("does not match the schema of config type %s: at %q: %s", t.Name, at, reason), nil)
}

// english prints the schema library's reasons; maxSchemaReason bounds one
// (a pattern's reason quotes the whole value).
var english = message.NewPrinter(language.English)

const maxSchemaReason = 300
