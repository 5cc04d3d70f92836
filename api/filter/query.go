package filter

import (
	"strconv"
	"strings"
)

// Query is a parsed filter: a predicate over records plus the filter's own
// sort, skip and limit clauses. The zero Query (and a nil *Query) has no
// predicate and no clauses and matches every record. A Query is not changed
// by its methods and may be used from several goroutines at once.
type Query struct {
	// Sort is the `sort by` clause; nil when the filter has none.
	Sort []SortField
	// Skip is the `skip N` clause; nil when the filter has none.
	Skip *int64
	// Limit is the `limit N` clause; nil when the filter has none and
	// LimitNone (-1) for `limit none`.
	Limit *int64

	pred node // nil: matches everything
}

// LimitNone is the value of Query.Limit for `limit none`.
const LimitNone = -1

// SortField is one key of a sort order.
type SortField struct {
	Field string // dotted field path, such as name or tags.env
	Desc  bool   // descending; ascending (nulls first) when false
}

// String is the canonical form of the key: the field, followed by " desc"
// when descending.
func (f SortField) String() string {
	if f.Desc {
		return f.Field + " desc"
	}
	return f.Field
}

// Match reports whether rec satisfies the query's predicate. A query without
// a predicate matches every record. Match ignores the sort, skip and limit
// clauses, never fails and never modifies rec.
func (q *Query) Match(rec map[string]any) bool {
	if q == nil || q.pred == nil {
		return true
	}
	return q.pred.match(rec)
}

// HasPredicate reports whether the query has a predicate, that is, whether
// Match can reject a record.
func (q *Query) HasPredicate() bool { return q != nil && q.pred != nil }

// String is the canonical form of the query: keywords in lower case, minimal
// parentheses, literals normalized, clauses in the order sort by, skip,
// limit. Parse(q.String()) yields a query equal to q. A negative Limit is
// written as `limit none`.
func (q *Query) String() string {
	if q == nil {
		return ""
	}
	var b strings.Builder
	if q.pred != nil {
		q.pred.write(&b)
	}
	space := func() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
	}
	if len(q.Sort) > 0 {
		space()
		b.WriteString("sort by ")
		for i, f := range q.Sort {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.String())
		}
	}
	if q.Skip != nil {
		space()
		b.WriteString("skip " + strconv.FormatInt(*q.Skip, 10))
	}
	if q.Limit != nil {
		space()
		if *q.Limit < 0 {
			b.WriteString("limit none")
		} else {
			b.WriteString("limit " + strconv.FormatInt(*q.Limit, 10))
		}
	}
	return b.String()
}
