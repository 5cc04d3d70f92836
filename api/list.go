package api

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/filter"
)

// List answers one page of items after the request's filter and sort. The
// filter's own `sort by`, `skip` and `limit` clauses win over the sort,
// offset and limit parameters. Items are matched and sorted on their JSON
// form, so filters name the fields the wire shows; a filter or sort naming
// a field the items cannot have is refused (INVALID_FILTER,
// INVALID_SORT_IDENTIFIER), not read as "no match".
func List[T any](c echo.Context, items []T) error { return ListOf(c, items, Fields{}) }

// ListViews is List for items shown through view, which may be costly (a
// session's view unseals its token): without a filter or a sort, only the
// items of the page asked for are shown.
func ListViews[S, V any](c echo.Context, items []S, view func(S) (V, error)) error {
	params, err := ParseList(c)
	if err != nil {
		return err
	}
	all := params.Filter != "" || params.Sort != ""
	start, end := 0, len(items)
	if !all {
		start, end = pageBounds(params, len(items))
	}
	views := make([]V, 0, end-start)
	for _, it := range items[start:end] {
		v, err := view(it)
		if err != nil {
			return err
		}
		views = append(views, v)
	}
	if all {
		return List(c, views)
	}
	return PageOf(c, params, len(items), views)
}

// Fields tells List the fields of views whose keys vary (maps): the
// entity's own fields (Of, its type) and, for an empty list, a view of a
// zero entity (Sample).
type Fields struct {
	Of     reflect.Type
	Sample func() any
}

// ListOf is List for views that are maps, with what else their fields are.
func ListOf[T any](c echo.Context, items []T, known Fields) error {
	params, err := ParseList(c)
	if err != nil {
		return err
	}
	var opts filter.Options
	if params.Filter != "" || params.Sort != "" {
		opts.Fields = listFields(items, known)
	}
	q, err := filter.ParseWith(params.Filter, opts)
	if err != nil {
		return err
	}
	by := q.Sort
	if len(by) == 0 && params.Sort != "" {
		if by, err = filter.ParseSortWith(params.Sort, opts); err != nil {
			return err
		}
	}
	if q.Skip != nil {
		params.Offset = min(max(*q.Skip, 0), MaxOffset)
	}
	if q.Limit != nil {
		params.Limit = normalizeLimit(*q.Limit)
	}
	filterable := filterableFields[T](known)
	if !q.HasPredicate() && len(by) == 0 {
		return PaginateFields(c, params, items, filterable)
	}
	// Match on the JSON form; carry each record's position in a key no
	// field can have, so that the sorted records lead back to the items.
	const pos = "\x00pos"
	recs := make([]map[string]any, 0, len(items))
	for i, it := range items {
		m, err := asRecord(it)
		if err != nil {
			return err
		}
		if q.Match(m) {
			m[pos] = i
			recs = append(recs, m)
		}
	}
	filter.SortRecords(recs, by)
	out := make([]T, len(recs))
	for i, m := range recs {
		out[i] = items[m[pos].(int)]
	}
	return PaginateFields(c, params, out, filterable)
}

// filterableFields are the fields a list names in meta.filterableFields,
// as the OpenZiti controller does: those of its items' type (for views held
// as interfaces, of the known entity's), sorted, without the patterns that
// stand for anything below a map and without links. A filter may also
// name a view's own keys (listFields).
func filterableFields[T any](known Fields) []string {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Interface {
		if t = known.Of; t == nil {
			return nil
		}
	}
	if f, ok := filterable.Load(t); ok {
		return f.([]string)
	}
	var out []string
	for _, n := range fieldsOf(t) {
		if !strings.HasSuffix(n, ".*") && !slices.Contains(strings.Split(n, "."), "_links") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	filterable.Store(t, out)
	return out
}

// filterable caches filterableFields by type.
var filterable sync.Map // reflect.Type -> []string

// listFields are the names a filter or sort may use on items: the fields
// of their type; for views held as interfaces, those of every type among
// them, a map's own keys (and anything below them), the known entity's
// fields, and a sample view's for an empty list. Nil (any name) when a
// view's fields cannot be told.
func listFields[T any](items []T, known Fields) []string {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Interface {
		return fieldsOf(t)
	}
	names := map[string]bool{}
	add := func(v any) bool {
		rv := reflect.ValueOf(v)
		switch {
		case !rv.IsValid():
			return true
		case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String:
			for _, k := range rv.MapKeys() {
				names[k.String()], names[k.String()+".*"] = true, true
			}
			return true
		}
		f := fieldsOf(rv.Type())
		for _, n := range f {
			names[n] = true
		}
		return f != nil
	}
	for _, it := range items {
		if !add(it) {
			return nil
		}
	}
	if len(items) == 0 {
		if known.Sample == nil || !add(known.Sample()) {
			return nil
		}
	}
	if known.Of != nil {
		f := fieldsOf(known.Of)
		if f == nil {
			return nil
		}
		for _, n := range f {
			names[n] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	return out
}

// fields caches fieldsOf by type.
var fields sync.Map // reflect.Type -> []string

var marshaler = reflect.TypeFor[json.Marshaler]()

// fieldsOf lists the fields a filter or sort may name on items of type t:
// the names of their JSON form, dotted into nested objects, with "name.*"
// below a map or a free-form value. Nil (any name) for items whose JSON
// form reflection cannot tell: maps, free-form values, their own encoding.
func fieldsOf(t reflect.Type) []string {
	if f, ok := fields.Load(t); ok {
		return f.([]string)
	}
	var out []string
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() == reflect.Struct && !st.Implements(marshaler) && !reflect.PointerTo(st).Implements(marshaler) {
		out = structFields(st, "", 0, []string{})
	}
	fields.Store(t, out)
	return out
}

func structFields(t reflect.Type, prefix string, depth int, out []string) []string {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		// Promoted fields, as encoding/json promotes them: also those of
		// an embedded struct of an unexported type (not through a pointer).
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct && (f.IsExported() || f.Type.Kind() == reflect.Struct) {
			out = structFields(ft, prefix, depth, out)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, prefix+name)
		switch {
		case ft.Implements(marshaler) || reflect.PointerTo(ft).Implements(marshaler):
			// its own encoding (times, raw JSON): a value, or anything
			// below it when it encodes an object
			if ft.Kind() == reflect.Map || ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Uint8 {
				out = append(out, prefix+name+".*")
			}
		case ft.Kind() == reflect.Map || ft.Kind() == reflect.Interface:
			out = append(out, prefix+name+".*")
		case ft.Kind() == reflect.Struct && depth < 4:
			out = structFields(ft, prefix+name+".", depth+1, out)
		}
	}
	return out
}

func asRecord(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// RoleQuery reads a list's roleFilter (repeatable role expressions) and
// roleSemantic (AllOf, the default, or AnyOf): match reports whether an
// entity is selected; it is nil when no roleFilter was given.
func RoleQuery(c echo.Context) (match func(id string, attrs []string) bool, err error) {
	roles := c.QueryParams()["roleFilter"]
	semantic := c.QueryParam("roleSemantic")
	switch semantic {
	case "":
		semantic = posture.AllOf
	case posture.AllOf, posture.AnyOf:
	default:
		return nil, posture.Invalid("roleSemantic", "must be AllOf or AnyOf", semantic)
	}
	if len(roles) == 0 {
		return nil, nil
	}
	return func(id string, attrs []string) bool { return posture.MatchRoles(roles, semantic, id, attrs) }, nil
}
