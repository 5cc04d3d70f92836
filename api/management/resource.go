package management

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// resource is the create, read, update, patch and delete of one kind of
// entity, all as events. Create, update and patch share one validation
// path: the body is decoded into the kind's input form (for a patch, over
// the current state's input form) and build turns it into a record or a
// field error.
type resource[T posture.Entity, In any] struct {
	a    *API
	kind posture.Kind
	noun string // for messages: "posture check"
	// input is an entity's current state in input form (for PATCH), as
	// shown at now (the moment build is given too).
	input func(e T, now time.Time) In
	// build validates an input and returns the new record. old is nil on
	// create. It runs inside the model change, so it sees the latest state.
	build func(in In, old *T, now time.Time) (T, error)
	// view is the entity as the API shows it.
	view func(T) (any, error)
	// listView, when set, is the view in a list as the request asks for it
	// (a service's configs of the asked types).
	listView func(c echo.Context) func(T) (any, error)
	// aliases are groups of input keys that spell the same field; a patch
	// that sets one clears the others from the current state.
	aliases [][]string
	// keepOnNull are input keys whose null in a patch leaves the current
	// value: what the entity cannot be without (a check's list of
	// operating systems), which OpenZiti's generated clients send as null
	// in every patch that does not set it.
	keepOnNull []string
	// canDelete refuses the deletion of an entity still in use.
	canDelete func(T) error
	// shred says that the entity owns sealed secrets: deleting it
	// destroys its data key, so that nothing of them stays readable.
	shred bool
}

// found is what a read answers: NOT_FOUND, naming the noun and the id, for
// a missing entity; other errors as they are.
func found[T any](v T, err error, noun, id string) (T, error) {
	if errors.Is(err, posture.ErrNotFound) {
		return v, posture.NotFound(noun, id)
	}
	return v, err
}

// get reads an entity or answers NOT_FOUND.
func get[T posture.Entity](s EntityReader, noun, id string) (T, error) {
	var v T
	raw, err := s.RawEntity(v.EntityKind(), id)
	if raw, err = found(raw, err, noun, id); err != nil {
		return v, err
	}
	return v, json.Unmarshal(raw, &v)
}

// list reads every entity of a kind.
func list[T posture.Entity](s EntityReader) ([]T, error) {
	var zero T
	raws, err := s.Raw(zero.EntityKind())
	if err != nil {
		return nil, err
	}
	out := make([]T, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *resource[T, In]) routes() []api.Route {
	base := "/" + string(r.kind)
	return []api.Route{
		{Method: http.MethodGet, Path: base, Access: api.Admin, Handler: r.list},
		{Method: http.MethodPost, Path: base, Access: api.Admin, Handler: r.create},
		{Method: http.MethodGet, Path: base + "/:id", Access: api.Admin, Handler: r.detail},
		{Method: http.MethodPut, Path: base + "/:id", Access: api.Admin, Handler: r.update},
		{Method: http.MethodPatch, Path: base + "/:id", Access: api.Admin, Handler: r.patch},
		{Method: http.MethodDelete, Path: base + "/:id", Access: api.Admin, Handler: r.delete},
	}
}

func (r *resource[T, In]) views(items []T, view func(T) (any, error)) ([]any, error) {
	out := make([]any, len(items))
	for i, it := range items {
		v, err := view(it)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// pure adapts a view that reads nothing (and so cannot fail).
func pure[T any](view func(T) any) func(T) (any, error) {
	return func(e T) (any, error) { return view(e), nil }
}

func (r *resource[T, In]) list(c echo.Context) error {
	items, err := list[T](r.a.Store)
	if err != nil {
		return err
	}
	// roleFilter (repeatable) and roleSemantic select entities with role
	// attributes as a policy's roles would (wire reference 4.1).
	roles, err := api.RoleQuery(c)
	if err != nil {
		return err
	}
	if roles != nil {
		items = slices.DeleteFunc(items, func(e T) bool {
			a, ok := any(e).(posture.Attributed)
			return ok && !roles(a.EntityID(), a.Attributes())
		})
	}
	view := r.view
	if r.listView != nil {
		view = r.listView(c)
	}
	views, err := r.views(items, view)
	if err != nil {
		return err
	}
	return listViews(c, views, view)
}

// listViews answers one page of the views of entities of type T: a filter
// or sort may name the entity's fields and the keys its views show, and
// the names the OpenZiti controller gives some of them (filterAliases).
func listViews[T posture.Entity](c echo.Context, views []any, view func(T) (any, error)) error {
	t := reflect.TypeFor[T]()
	return api.ListOf(c, views, api.Fields{Of: t, Sample: func() any { return sampleView(view) }, Aliases: filterAliases[t]})
}

// filterAliases are the names the OpenZiti controller's filters give to
// fields of views by another: a config's type is its configType reference.
var filterAliases = map[reflect.Type]map[string]string{
	reflect.TypeFor[posture.Config](): {"type": "configType"},
}

// sampleView is the view of a zero entity: the keys an empty list's filter
// may name (nil when the view cannot show one).
func sampleView[T any](view func(T) (any, error)) (v any) {
	defer func() {
		if recover() != nil {
			v = nil
		}
	}()
	var zero T
	v, err := view(zero)
	if err != nil {
		return nil
	}
	return v
}

func (r *resource[T, In]) detail(c echo.Context) error {
	e, err := get[T](r.a.Store, r.noun, c.Param("id"))
	if err != nil {
		return err
	}
	v, err := r.view(e)
	if err != nil {
		return err
	}
	return api.OK(c, v)
}

func (r *resource[T, In]) create(c echo.Context) error {
	var in In
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	var id string
	err := r.a.Writer.Model(c, func() ([]posture.Payload, error) {
		e, err := r.build(in, nil, r.a.Writer.Now().UTC())
		if err != nil {
			return nil, err
		}
		id = e.EntityID()
		return []posture.Payload{posture.Created[T]{Entity: e}}, nil
	})
	if err != nil {
		return err
	}
	return api.CreatedAt(c, string(r.kind), id)
}

func (r *resource[T, In]) update(c echo.Context) error {
	var in In
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	return r.change(c, func(T, time.Time) (In, error) { return in, nil })
}

func (r *resource[T, In]) patch(c echo.Context) error {
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	var fields map[string]json.RawMessage
	if err := api.DecodeBytes(body, &fields); err != nil {
		return err
	}
	if fields == nil { // an empty body, or null: a patch of nothing is a mistake
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON object of the fields to change"}
	}
	for k, v := range fields {
		if string(v) == "null" && slices.ContainsFunc(r.keepOnNull, func(keep string) bool { return strings.EqualFold(keep, k) }) {
			delete(fields, k)
		}
	}
	return r.change(c, func(old T, now time.Time) (In, error) { return r.merge(old, now, fields) })
}

// merge applies a patch's top-level fields over the current state's input
// form at now: a field present in the patch replaces the current value
// whole.
func (r *resource[T, In]) merge(old T, now time.Time, fields map[string]json.RawMessage) (In, error) {
	var in In
	cur, err := json.Marshal(r.input(old, now))
	if err != nil {
		return in, err
	}
	var merged map[string]json.RawMessage
	if err := json.Unmarshal(cur, &merged); err != nil {
		return in, err
	}
	// Field names match without regard to case, as in a create or an
	// update: "NAME" replaces the current "name" rather than sitting beside
	// it, where the decoder would pick one by their order; an alias
	// ("ATTRIBUTES") replaces every spelling of its field. Two spellings in
	// one patch both reach the build, as in a create, which refuses them
	// when they differ.
	spells := func(group []string, k string) bool {
		return slices.ContainsFunc(group, func(a string) bool { return strings.EqualFold(a, k) })
	}
	for k := range fields {
		for cur := range merged {
			if strings.EqualFold(cur, k) || slices.ContainsFunc(r.aliases, func(g []string) bool { return spells(g, k) && spells(g, cur) }) {
				delete(merged, cur)
			}
		}
	}
	maps.Copy(merged, fields)
	data, err := json.Marshal(merged)
	if err != nil {
		return in, err
	}
	return in, api.DecodeBytes(data, &in)
}

// change runs an update or a patch as a model change; input and build see
// one moment.
func (r *resource[T, In]) change(c echo.Context, input func(old T, now time.Time) (In, error)) error {
	id := c.Param("id")
	err := r.a.Writer.Model(c, func() ([]posture.Payload, error) {
		old, err := get[T](r.a.Store, r.noun, id)
		if err != nil {
			return nil, err
		}
		now := r.a.Writer.Now().UTC()
		in, err := input(old, now)
		if err != nil {
			return nil, err
		}
		e, err := r.build(in, &old, now)
		if err != nil {
			return nil, err
		}
		if same, err := api.Unchanged(old, e); err != nil || same {
			return nil, err // an update that changes nothing records nothing
		}
		return []posture.Payload{posture.Updated[T]{Entity: e}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

func (r *resource[T, In]) delete(c echo.Context) error {
	id := c.Param("id")
	err := r.a.Writer.Model(c, func() ([]posture.Payload, error) {
		old, err := get[T](r.a.Store, r.noun, id)
		if err != nil {
			return nil, err
		}
		if r.canDelete != nil {
			if err := r.canDelete(old); err != nil {
				return nil, err
			}
		}
		return []posture.Payload{posture.Deleted[T]{ID: id}}, nil
	})
	if err != nil {
		return err
	}
	if r.shred {
		if err := api.DestroySecrets(c.Request().Context(), r.a.Secrets, id); err != nil {
			return fmt.Errorf("the %s was deleted, but its secrets' data key was not destroyed: %w", r.noun, err)
		}
	}
	return api.Empty(c)
}

// decodeObject decodes a JSON object body; anything else is
// COULD_NOT_PARSE_BODY.
func decodeObject(c echo.Context, v any) error {
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	var probe map[string]json.RawMessage
	if err := api.Decode(c, &probe); err != nil {
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] != '{' {
			return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON object"}
		}
		return err // an object, but not valid JSON, more after it, or too deep: said as it is
	}
	return api.Decode(c, v)
}
