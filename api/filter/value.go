package filter

import (
	"cmp"
	"encoding/json"
	"strings"
	"time"
)

// norm brings a record value to the types compare understands: every number
// becomes a float64. Values of other types are returned unchanged and
// compare as mismatches.
func norm(v any) any {
	switch x := v.(type) {
	case nil, string, float64, bool:
		return v
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return v
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case int16:
		return float64(x)
	case int8:
		return float64(x)
	case uint:
		return float64(x)
	case uint64:
		return float64(x)
	case uint32:
		return float64(x)
	case uint16:
		return float64(x)
	case uint8:
		return float64(x)
	case float32:
		return float64(x)
	}
	return v
}

// compare orders the normalized value v against l. ok is false when the two
// cannot be compared (the types differ), in which case every condition is
// false. Against null, v compares equal when it is nil and unequal (1)
// otherwise; against a boolean, equal or unequal (1).
func compare(v any, l *literal) (r int, ok bool) {
	switch l.kind {
	case kNull:
		if v == nil {
			return 0, true
		}
		return 1, true
	case kString:
		s, ok := v.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, l.s), true
	case kNumber:
		f, ok := v.(float64)
		if !ok {
			return 0, false
		}
		return cmp.Compare(f, l.n), true
	case kBool:
		b, ok := v.(bool)
		if !ok {
			return 0, false
		}
		if b == l.b {
			return 0, true
		}
		return 1, true
	case kTime:
		t, ok := asTime(v)
		if !ok {
			return 0, false
		}
		return t.Compare(l.t), true
	}
	return 0, false
}

// asTime reads a date-time value: an RFC 3339 string or a time.Time.
func asTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		if !looksLikeTime(x) {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339Nano, x)
		return t, err == nil
	case time.Time:
		return x, true
	}
	return time.Time{}, false
}

// looksLikeTime is a cheap test that s may be an RFC 3339 date-time.
func looksLikeTime(s string) bool {
	return len(s) >= len("2006-01-02T15:04:05Z") && s[4] == '-' && s[7] == '-' && s[10] == 'T'
}

// each calls f for every element of the set v until f returns false: the
// elements of an array, nothing for nil, or v itself for any other value.
func each(v any, f func(any) bool) {
	switch x := v.(type) {
	case nil:
	case []any:
		for _, e := range x {
			if !f(e) {
				return
			}
		}
	case []string:
		for _, e := range x {
			if !f(e) {
				return
			}
		}
	default:
		f(v)
	}
}
