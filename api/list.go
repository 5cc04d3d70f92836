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
// zero entity (Sample). Aliases are the names a filter or sort may also
// use for fields of the views, as the OpenZiti controller names them (a
// config's type for the view's configType).
type Fields struct {
	Of      reflect.Type
	Sample  func() any
	Aliases map[string]string
}

// ListOf is List for views that are maps, with what else their fields are.
func ListOf[T any](c echo.Context, items []T, known Fields) error {
	params, err := ParseList(c)
	if err != nil {
		return err
	}
	var opts filter.Options
	if params.Filter != "" || params.Sort != "" {
		opts = listOptions(items, known)
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
	filter.SortRecordsWith(recs, by, opts)
	out := make([]T, len(recs))
	for i, m := range recs {
		out[i] = items[m[pos].(int)]
	}
	return PaginateFields(c, params, out, filterable)
}

// filterableFields are the fields a list names in meta.filterableFields,
// as the OpenZiti controller does: those of its items' type (for views held
// as interfaces, of the known entity's, with the references a view of it
// shows and the aliases), sorted, without the patterns that stand for
// anything below a map and without links. A filter may also name a view's
// own keys (listOptions).
func filterableFields[T any](known Fields) []string {
	key := filterableKey{t: reflect.TypeFor[T]()}
	if key.t.Kind() == reflect.Interface {
		if key.t, key.viewed = known.Of, true; key.t == nil {
			return nil
		}
	}
	if f, ok := filterable.Load(key); ok {
		return f.([]string)
	}
	names := fieldsOf(key.t)
	if key.viewed {
		names = slices.Clone(names)
		if known.Sample != nil {
			refs := map[string]bool{}
			viewShape(known.Sample(), map[string]bool{}, refs)
			for n := range refs {
				names = append(names, n)
			}
		}
		for a := range known.Aliases {
			names = append(names, a)
		}
	}
	var out []string
	for _, n := range names {
		if !strings.HasSuffix(n, ".*") && !slices.Contains(strings.Split(n, "."), "_links") {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	filterable.Store(key, out)
	return out
}

// filterableKey is the key of the filterableFields cache: the items' type,
// or the known entity's type of views held as interfaces (viewed).
type filterableKey struct {
	t      reflect.Type
	viewed bool
}

// filterable caches filterableFields.
var filterable sync.Map // filterableKey -> []string

// listOptions are what a filter or sort may name on items: the fields of
// their type; for views held as interfaces, those of every type among
// them, a map's own keys (and anything below them), the known entity's
// fields, and a sample view's for an empty list (no restriction when a
// view's fields cannot be told). Among them, the references to other
// entities compare by their id, and the known aliases stand for fields.
func listOptions[T any](items []T, known Fields) filter.Options {
	opts := filter.Options{Aliases: known.Aliases}
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Interface {
		s := shapeOf(t)
		opts.Fields, opts.Refs = s.fields, s.refs
		return opts
	}
	names, refs := map[string]bool{}, map[string]bool{}
	told := true
	for _, it := range items {
		told = viewShape(it, names, refs) && told
	}
	if len(items) == 0 {
		told = known.Sample != nil && viewShape(known.Sample(), names, refs)
	}
	if known.Of != nil {
		s := shapeOf(known.Of)
		told = told && s.fields != nil
		for _, n := range s.fields {
			names[n] = true
		}
		for _, n := range s.refs {
			refs[n] = true
		}
	}
	for n := range refs {
		opts.Refs = append(opts.Refs, n)
	}
	if told {
		opts.Fields = make([]string, 0, len(names))
		for n := range names {
			opts.Fields = append(opts.Fields, n)
		}
	}
	return opts
}

// viewShape adds the fields and references of a view to names and refs:
// a map's keys (and anything below them), among which those holding a
// reference; a struct's fields. It reports whether the view's fields can
// be told.
func viewShape(v any, names, refs map[string]bool) bool {
	rv := reflect.ValueOf(v)
	switch {
	case !rv.IsValid():
		return true
	case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String:
		it := rv.MapRange()
		for it.Next() {
			k := it.Key().String()
			names[k], names[k+".*"] = true, true
			e := it.Value()
			if e.Kind() == reflect.Interface && !e.IsNil() {
				e = e.Elem()
			}
			if e.IsValid() && refType(e.Type()) {
				refs[k] = true
			}
		}
		return true
	}
	s := shapeOf(rv.Type())
	for _, n := range s.fields {
		names[n] = true
	}
	for _, n := range s.refs {
		refs[n] = true
	}
	return s.fields != nil
}

// shape is what a filter or sort may name on items of one type: the names
// of their fields (nil: any name) and, among them, the references.
type shape struct {
	fields, refs []string
}

// shapes caches shapeOf by type.
var shapes sync.Map // reflect.Type -> shape

var marshaler = reflect.TypeFor[json.Marshaler]()

// fieldsOf lists the fields a filter or sort may name on items of type t:
// the names of their JSON form, dotted into nested objects, with "name.*"
// below a map or a free-form value. Nil (any name) for items whose JSON
// form reflection cannot tell: maps, free-form values, their own encoding.
func fieldsOf(t reflect.Type) []string { return shapeOf(t).fields }

// shapeOf is fieldsOf with the fields among them that hold a reference to
// another entity (refType), or an array of them.
func shapeOf(t reflect.Type) shape {
	if s, ok := shapes.Load(t); ok {
		return s.(shape)
	}
	var s shape
	st := t
	if st.Kind() == reflect.Pointer {
		st = st.Elem()
	}
	if st.Kind() == reflect.Struct && !st.Implements(marshaler) && !reflect.PointerTo(st).Implements(marshaler) {
		s.fields = structFields(st, "", 0, []string{}, &s.refs)
	}
	shapes.Store(t, s)
	return s
}

// refType reports whether values of type t are references to other
// entities, as EntityRef is: objects with an "id", or arrays of them.
func refType(t reflect.Type) bool {
	if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "id" && f.IsExported() {
			return true
		}
	}
	return false
}

func structFields(t reflect.Type, prefix string, depth int, out []string, refs *[]string) []string {
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
			out = structFields(ft, prefix, depth, out, refs)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, prefix+name)
		if refType(f.Type) {
			*refs = append(*refs, prefix+name)
		}
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
			out = structFields(ft, prefix+name+".", depth+1, out, refs)
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
