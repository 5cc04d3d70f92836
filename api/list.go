package api

import (
	"encoding/json"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/filter"
)

// List answers one page of items after the request's filter and sort. The
// filter's own `sort by`, `skip` and `limit` clauses win over the sort,
// offset and limit parameters. Items are matched and sorted on their JSON
// form, so filters name the fields the wire shows.
func List[T any](c echo.Context, items []T) error {
	params, err := ParseList(c)
	if err != nil {
		return err
	}
	q, err := filter.Parse(params.Filter)
	if err != nil {
		return err
	}
	by := q.Sort
	if len(by) == 0 && params.Sort != "" {
		if by, err = filter.ParseSort(params.Sort); err != nil {
			return err
		}
	}
	if q.Skip != nil {
		params.Offset = min(max(*q.Skip, 0), MaxOffset)
	}
	if q.Limit != nil {
		params.Limit = normalizeLimit(*q.Limit)
	}
	if !q.HasPredicate() && len(by) == 0 {
		return Paginate(c, params, items)
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
	return Paginate(c, params, out)
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
