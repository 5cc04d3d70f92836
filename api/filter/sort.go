package filter

import (
	"cmp"
	"slices"
	"strings"
	"time"

	posture "github.com/seed-0809debe/posture"
)

// ParseSort parses the separate `sort` query parameter: a comma-separated
// list of fields, each optionally followed by asc or desc (case-insensitive),
// such as "name asc, createdAt desc". A blank parameter yields nil. Every
// error is a *posture.Error with Code posture.CodeInvalidSort whose Message
// says what is wrong and at which 1-based character position.
func ParseSort(s string) ([]SortField, error) { return ParseSortWith(s, Options{}) }

// ParseSortWith is ParseSort with options; a field not admitted by
// opts.Fields is an INVALID_SORT_IDENTIFIER error.
func ParseSortWith(s string, opts Options) ([]SortField, error) {
	p, err := newParser(s, opts, posture.CodeInvalidSort, "sort")
	if err != nil {
		return nil, err
	}
	if p.peek().kind == tEOF {
		return nil, nil
	}
	fields, serr := p.sortFields()
	if serr == nil {
		if t := p.next(); t.kind != tEOF {
			serr = p.unexpected(t, `"asc", "desc", "," or the end of the sort`)
		}
	}
	if serr != nil {
		return nil, p.error(serr)
	}
	return fields, nil
}

// SortRecords sorts recs in place by the keys in order, stably: records
// equal under every key keep their order. Fields are looked up as in a
// filter (dotted paths; missing is null). Values of one type compare
// naturally (numbers numerically, strings byte-wise, RFC 3339 date-time
// strings as instants, false before true); across types the ascending order
// is null (and missing), booleans, numbers, date-times, other strings, then
// arrays and objects (which compare equal). Desc reverses the whole order of
// its key, so nulls come first ascending and last descending.
func SortRecords(recs []map[string]any, by []SortField) { SortRecordsWith(recs, by, Options{}) }

// SortRecordsWith is SortRecords with the options the sort was parsed
// with: an alias sorts by its field, a reference by its id.
func SortRecordsWith(recs []map[string]any, by []SortField, opts Options) {
	if len(by) == 0 || len(recs) < 2 {
		return
	}
	m := len(by)
	paths := make([]path, m)
	for j, f := range by {
		paths[j] = opts.path(f.Field)
	}
	// Decorate: compute each record's keys once.
	keys := make([]sortKey, len(recs)*m)
	for i, rec := range recs {
		for j := range paths {
			keys[i*m+j] = makeSortKey(paths[j].get(rec))
		}
	}
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		for j := range by {
			c := keys[a*m+j].compare(&keys[b*m+j])
			if by[j].Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	sorted := make([]map[string]any, len(recs))
	for i, k := range idx {
		sorted[i] = recs[k]
	}
	copy(recs, sorted)
}

// Ranks of sort keys across types, in ascending order.
const (
	rankNull = iota
	rankBool
	rankNumber
	rankTime
	rankString
	rankOther
)

// sortKey is a record value prepared for sorting.
type sortKey struct {
	rank int
	n    float64 // numbers; booleans as 0 and 1
	s    string
	t    time.Time
}

func makeSortKey(v any) sortKey {
	switch x := norm(v).(type) {
	case nil:
		return sortKey{rank: rankNull}
	case bool:
		if x {
			return sortKey{rank: rankBool, n: 1}
		}
		return sortKey{rank: rankBool}
	case float64:
		return sortKey{rank: rankNumber, n: x}
	case string:
		if t, ok := asTime(x); ok {
			return sortKey{rank: rankTime, t: t}
		}
		return sortKey{rank: rankString, s: x}
	case time.Time:
		return sortKey{rank: rankTime, t: x}
	}
	return sortKey{rank: rankOther}
}

func (k *sortKey) compare(o *sortKey) int {
	if c := cmp.Compare(k.rank, o.rank); c != 0 {
		return c
	}
	switch k.rank {
	case rankBool, rankNumber:
		return cmp.Compare(k.n, o.n)
	case rankTime:
		return k.t.Compare(o.t)
	case rankString:
		return strings.Compare(k.s, o.s)
	}
	return 0
}
