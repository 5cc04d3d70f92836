package filter

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	posture "github.com/seed-0809debe/posture"
)

// dump renders a predicate fully parenthesized, to show its structure.
func dump(n node) string {
	var b strings.Builder
	var walk func(n node)
	list := func(op string, xs []node) {
		b.WriteString("(" + op)
		for _, x := range xs {
			b.WriteByte(' ')
			walk(x)
		}
		b.WriteByte(')')
	}
	walk = func(n node) {
		switch n := n.(type) {
		case nil:
			b.WriteString("<nil>")
		case orNode:
			list("or", n)
		case andNode:
			list("and", n)
		case notNode:
			list("not", []node{n.x})
		default:
			b.WriteByte('{')
			n.write(&b)
			b.WriteByte('}')
		}
	}
	walk(n)
	return b.String()
}

func int64p(n int64) *int64 { return &n }

// parseTests are valid filters with their structure and canonical form
// (empty canon: the input is already canonical). They also seed FuzzParse.
var parseTests = []struct {
	in    string
	tree  string
	canon string
}{
	{"", "<nil>", ""},
	{"   ", "<nil>", ""},
	{"true", "{true}", ""},
	{"FALSE", "{false}", "false"},
	{`name = "x"`, `{name = "x"}`, ""},
	{`name="x"`, `{name = "x"}`, `name = "x"`},
	{`a != 1`, `{a != 1}`, ""},
	{`a < 1.5`, `{a < 1.5}`, ""},
	{`a <= -2`, `{a <= -2}`, ""},
	{`a > 1e3`, `{a > 1000}`, "a > 1000"},
	{`a >= 0.000001`, `{a >= 1e-06}`, "a >= 1e-06"},
	{`a = true`, `{a = true}`, ""},
	{`a = null`, `{a = null}`, ""},
	{`a != NULL`, `{a != null}`, "a != null"},
	{`tags.env = "prod"`, `{tags.env = "prod"}`, ""},
	{`createdAt > datetime(2024-01-02T03:04:05Z)`, `{createdAt > datetime(2024-01-02T03:04:05Z)}`, ""},
	{`createdAt > datetime( "2024-01-02T05:04:05.5+02:00" )`, `{createdAt > datetime(2024-01-02T05:04:05.5+02:00)}`,
		`createdAt > datetime(2024-01-02T05:04:05.5+02:00)`},
	{`name contains "a"`, `{name contains "a"}`, ""},
	{`name ICONTAINS "A"`, `{name icontains "A"}`, `name icontains "A"`},
	{`name not contains "a"`, `{name not contains "a"}`, ""},
	{`name NOT icontains "a"`, `{name not icontains "a"}`, `name not icontains "a"`},
	{`type in ["User", "Device"]`, `{type in ["User", "Device"]}`, ""},
	{`type not in ["User"]`, `{type not in ["User"]}`, ""},
	{`n in [1,2 , 3]`, `{n in [1, 2, 3]}`, "n in [1, 2, 3]"},
	{`x in [null, "a", 1, true, datetime(2024-01-02T03:04:05Z)]`, `{x in [null, "a", 1, true, datetime(2024-01-02T03:04:05Z)]}`, ""},
	{`n between 1 and 5`, `{n between 1 and 5}`, ""},
	{`n not between 1 and 5`, `{n not between 1 and 5}`, ""},
	{`n between "a" and "m"`, `{n between "a" and "m"}`, ""},
	{`d between datetime(2024-01-01T00:00:00Z) and datetime(2025-01-01T00:00:00Z)`,
		`{d between datetime(2024-01-01T00:00:00Z) and datetime(2025-01-01T00:00:00Z)}`, ""},
	{`anyOf(roleAttributes) = "a"`, `{anyOf(roleAttributes) = "a"}`, ""},
	{`ANYOF(roleAttributes) in ["a","b"]`, `{anyOf(roleAttributes) in ["a", "b"]}`, `anyOf(roleAttributes) in ["a", "b"]`},
	{`allof( roleAttributes ) != "a"`, `{allOf(roleAttributes) != "a"}`, `allOf(roleAttributes) != "a"`},
	{`anyOf(roleAttributes) not contains "x"`, `{anyOf(roleAttributes) not contains "x"}`, ""},
	{`isEmpty(roleAttributes)`, `{isEmpty(roleAttributes)}`, ""},
	{`not isempty(tags)`, `(not {isEmpty(tags)})`, "not isEmpty(tags)"},
	// Precedence: not > and > or.
	{`a = 1 or b = 2 and c = 3`, `(or {a = 1} (and {b = 2} {c = 3}))`, ""},
	{`a = 1 and b = 2 or c = 3`, `(or (and {a = 1} {b = 2}) {c = 3})`, ""},
	{`(a = 1 or b = 2) and c = 3`, `(and (or {a = 1} {b = 2}) {c = 3})`, ""},
	{`not a = 1 and b = 2`, `(and (not {a = 1}) {b = 2})`, ""},
	{`not (a = 1 and b = 2)`, `(not (and {a = 1} {b = 2}))`, ""},
	{`not not a = 1`, `(not (not {a = 1}))`, ""},
	{`not (not a = 1)`, `(not (not {a = 1}))`, "not not a = 1"},
	{`a = 1 or b = 2 or c = 3`, `(or {a = 1} {b = 2} {c = 3})`, ""},
	{`a = 1 or (b = 2 or c = 3)`, `(or {a = 1} {b = 2} {c = 3})`, "a = 1 or b = 2 or c = 3"},
	{`((a = 1))`, `{a = 1}`, "a = 1"},
	{`(a = 1 and b = 2) and (c = 3 or d = 4)`, `(and {a = 1} {b = 2} (or {c = 3} {d = 4}))`, "a = 1 and b = 2 and (c = 3 or d = 4)"},
	{`a = 1 AND b = 2 Or NOT c = 3`, `(or (and {a = 1} {b = 2}) (not {c = 3}))`, "a = 1 and b = 2 or not c = 3"},
	{`true and (false or x = 1)`, `(and {true} (or {false} {x = 1}))`, ""},
	// Trailing clauses.
	{`sort by name`, `<nil>`, ""},
	{`SORT BY name ASC, tags.env DESC, b`, `<nil>`, "sort by name, tags.env desc, b"},
	{`skip 10`, `<nil>`, ""},
	{`limit none`, `<nil>`, ""},
	{`Limit NONE`, `<nil>`, "limit none"},
	{`limit 0`, `<nil>`, ""},
	{`a = 1 sort by a desc skip 5 limit 10`, `{a = 1}`, ""},
	{`a = 1 limit 10 skip 5 sort by a`, `{a = 1}`, "a = 1 sort by a skip 5 limit 10"},
	{`(a = 1 or b = 2) limit 007`, `(or {a = 1} {b = 2})`, "a = 1 or b = 2 limit 7"},
	// Strings are quoted canonically.
	{`s = "tab\there \u0001 \"q\" \\ \/ é"`, `{s = "tab\there \u0001 \"q\" \\ / é"}`, `s = "tab\there \u0001 \"q\" \\ / é"`},
	// Literals are normalized.
	{`d = datetime(2024-01-02T03:04:05,5+00:00)`, `{d = datetime(2024-01-02T03:04:05.5Z)}`, `d = datetime(2024-01-02T03:04:05.5Z)`},
	{`d = datetime(9999-12-31T23:59:59.999999999-23:59)`, `{d = datetime(9999-12-31T23:59:59.999999999-23:59)}`, ""},
	{`n = 00012`, `{n = 12}`, `n = 12`},
	{`n = -0.0`, `{n = -0}`, `n = -0`},
	{`n = 1e21`, `{n = 1e+21}`, `n = 1e+21`},
	{`n = 123456789012345678901234567890`, `{n = 1.2345678901234568e+29}`, `n = 1.2345678901234568e+29`},
	{`_ = 1`, `{_ = 1}`, ""},
	// A dotted path may contain keywords.
	{`tags.sort = "x" and not.in = 1`, `(and {tags.sort = "x"} {not.in = 1})`, ""},
}

func TestParse(t *testing.T) {
	for _, tt := range parseTests {
		q, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := dump(q.pred); got != tt.tree {
			t.Errorf("Parse(%q) tree:\n got %s\nwant %s", tt.in, got, tt.tree)
		}
		canon := tt.canon
		if canon == "" && strings.TrimSpace(tt.in) != "" {
			canon = tt.in
		}
		if got := q.String(); got != canon {
			t.Errorf("Parse(%q).String():\n got %s\nwant %s", tt.in, got, canon)
		}
		// The canonical form parses to the same structure.
		q2, err := Parse(q.String())
		if err != nil {
			t.Errorf("Parse(%q) of the canonical form: %v", q.String(), err)
			continue
		}
		if got := dump(q2.pred); got != tt.tree {
			t.Errorf("Parse(%q) tree after round trip:\n got %s\nwant %s", q.String(), got, tt.tree)
		}
	}
}

func TestParseClauses(t *testing.T) {
	tests := []struct {
		in   string
		want Query
	}{
		{"", Query{}},
		{"a = 1", Query{}},
		{"sort by name", Query{Sort: []SortField{{Field: "name"}}}},
		{"sort by name desc, b asc, c", Query{Sort: []SortField{{Field: "name", Desc: true}, {Field: "b"}, {Field: "c"}}}},
		{"skip 3", Query{Skip: int64p(3)}},
		{"limit 25", Query{Limit: int64p(25)}},
		{"limit none", Query{Limit: int64p(LimitNone)}},
		{"a = 1 sort by createdAt desc skip 100 limit none", Query{
			Sort:  []SortField{{Field: "createdAt", Desc: true}},
			Skip:  int64p(100),
			Limit: int64p(-1),
		}},
		{"skip 9223372036854775807", Query{Skip: int64p(9223372036854775807)}},
		// Larger ones are the largest, cut as any large one is.
		{"Skip 9223372036854775808 limit 99999999999999999999", Query{Skip: int64p(9223372036854775807), Limit: int64p(9223372036854775807)}},
	}
	for _, tt := range tests {
		q, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		q.pred = nil
		if diff := cmp.Diff(&tt.want, q, cmp.AllowUnexported(Query{})); diff != "" {
			t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

// parseErrorTests are invalid filters with the exact message. They also
// seed FuzzParse.
var parseErrorTests = []struct {
	in  string
	msg string
}{
	{`a =`, `invalid filter at position 4: expected a value (a "string", number, true, false, null or datetime(...)) after "=", found end of filter`},
	{`a == 1`, `invalid filter at position 4: expected a value (a "string", number, true, false, null or datetime(...)) after "=", found "="`},
	{`a`, `invalid filter at position 2: expected an operator (=, !=, <, <=, >, >=, contains, icontains, in, between) after "a", found end of filter`},
	{`a 1`, `invalid filter at position 3: expected an operator (=, !=, <, <=, >, >=, contains, icontains, in, between) after "a", found "1"`},
	{`anyOf(x) 1`, `invalid filter at position 10: expected an operator (=, !=, <, <=, >, >=, contains, icontains, in, between) after anyOf(x), found "1"`},
	{`a = b`, `invalid filter at position 5: expected a value (a "string", number, true, false, null or datetime(...)) after "=", found "b"`},
	{`a = 1 and`, `invalid filter at position 10: expected a condition (a field such as name = "x", anyOf(...), allOf(...), isEmpty(...)), "(", "not", "true" or "false", found end of filter`},
	{`a = 1 or or b = 1`, `invalid filter at position 10: expected a condition (a field such as name = "x", anyOf(...), allOf(...), isEmpty(...)), "(", "not", "true" or "false", found "or" ("or" is a keyword and cannot be a field name)`},
	{`by = 1`, `invalid filter at position 1: expected a condition (a field such as name = "x", anyOf(...), allOf(...), isEmpty(...)), "(", "not", "true" or "false", found "by" ("by" is a keyword and cannot be a field name)`},
	{`a = 1 b = 2`, `invalid filter at position 7: expected "and", "or", "sort by", "skip", "limit" or the end of the filter, found "b"`},
	{`(a = 1`, `invalid filter at position 7: expected "and", "or" or ")" to close the "(" at position 1, found end of filter`},
	{`a = 1)`, `invalid filter at position 6: unexpected ")" without a matching "("`},
	{`()`, `invalid filter at position 2: expected a condition (a field such as name = "x", anyOf(...), allOf(...), isEmpty(...)), "(", "not", "true" or "false", found ")"`},
	{`a not = 1`, `invalid filter at position 7: expected "contains", "icontains", "in" or "between" after "not", found "="`},
	{`a < true`, `invalid filter at position 5: "<" compares only with a string, number or datetime, not a boolean`},
	{`a >= null`, `invalid filter at position 6: ">=" compares only with a string, number or datetime, not null`},
	{`a contains 1`, `invalid filter at position 12: "contains" needs a string, not a number`},
	{`a ICONTAINS null`, `invalid filter at position 13: "icontains" needs a string, not null`},
	{`a in 1`, `invalid filter at position 6: expected "[" after "in", found "1"`},
	{`a in []`, `invalid filter at position 7: the list after "in" is empty; it needs at least one value`},
	{`a in [1,]`, `invalid filter at position 9: expected a value (a "string", number, true, false, null or datetime(...)) after "in", found "]"`},
	{`a in [1 2]`, `invalid filter at position 9: expected "," or "]" in the list opened at position 6, found "2"`},
	{`a in [1`, `invalid filter at position 8: expected "," or "]" in the list opened at position 6, found end of filter`},
	{`a between 1`, `invalid filter at position 12: expected "and" between the bounds of "between", found end of filter`},
	{`a between 1 or 2`, `invalid filter at position 13: expected "and" between the bounds of "between", found "or"`},
	{`a between 1 and "z"`, `invalid filter at position 17: the bounds of "between" must have the same type, found a number and a string`},
	{`a between true and false`, `invalid filter at position 11: "between" needs a string, number or datetime bound, not a boolean`},
	{`a between 1 and null`, `invalid filter at position 17: "between" needs a string, number or datetime bound, not null`},
	{`anyOf x = 1`, `invalid filter at position 7: expected "(" after "anyOf", found "x"`},
	{`anyOf() = 1`, `invalid filter at position 7: expected a field name in anyOf(...), found ")"`},
	{`allOf(x = 1`, `invalid filter at position 9: expected ")" after allOf(x, found "="`},
	{`isEmpty(x) = 1`, `invalid filter at position 12: expected "and", "or", "sort by", "skip", "limit" or the end of the filter, found "="`},
	{`true = 1`, `invalid filter at position 6: expected "and", "or", "sort by", "skip", "limit" or the end of the filter, found "="`},
	{`sort name`, `invalid filter at position 6: expected "by" after "sort", found "name"`},
	{`sort by`, `invalid filter at position 8: expected a field name to sort by, found end of filter`},
	{`sort by a,`, `invalid filter at position 11: expected a field name to sort by, found end of filter`},
	{`sort by desc`, `invalid filter at position 9: expected a field name to sort by, found "desc" ("desc" is a keyword and cannot be a field name)`},
	{`sort by a up`, `invalid filter at position 11: expected "sort by", "skip", "limit" or the end of the filter, found "up"`},
	{`sort by a sort by b`, `invalid filter at position 11: the filter has more than one "sort by" clause`},
	{`skip 1 skip 2`, `invalid filter at position 8: the filter has more than one "skip" clause`},
	{`limit 1 limit 2`, `invalid filter at position 9: the filter has more than one "limit" clause`},
	{`skip -1`, `invalid filter at position 6: expected a non-negative integer after "skip", found "-1"`},
	{`skip 1.5`, `invalid filter at position 6: expected a non-negative integer after "skip", found "1.5"`},
	{`skip none`, `invalid filter at position 6: expected a non-negative integer after "skip", found "none"`},
	{`limit all`, `invalid filter at position 7: expected a non-negative integer or "none" after "limit", found "all"`},
	{`limit 1e3`, `invalid filter at position 7: expected a non-negative integer or "none" after "limit", found "1e3"`},
	{`limit 5 a = 1`, `invalid filter at position 9: expected "sort by", "skip", "limit" or the end of the filter, found "a"`},
	{`limit 5 and a = 1`, `invalid filter at position 9: expected "sort by", "skip", "limit" or the end of the filter, found "and"`},
	{`a = "x`, `invalid filter at position 5: unterminated string: missing closing "`},
	{`name = "héllo" and é`, `invalid filter at position 20: unexpected character 'é'`},
	{`a = datetime(yesterday)`, `invalid filter at position 14: invalid datetime "yesterday": expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z`},
	{`d = datetime(2024-02-30T00:00:00Z)`, `invalid filter at position 14: invalid datetime "2024-02-30T00:00:00Z": expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z`},
	{`d = datetime(2024-01-02t03:04:05z)`, `invalid filter at position 14: invalid datetime "2024-01-02t03:04:05z": expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z`},
	{`n = 1` + strings.Repeat("0", 400), `invalid filter at position 5: number 10000000000000000000000000000000... is out of range`},
	{`a = 1 and b = "` + strings.Repeat("x", 40) + `" c`, `invalid filter at position 58: expected "and", "or", "sort by", "skip", "limit" or the end of the filter, found "c"`},
	{`a = ` + strings.Repeat("x", 40), `invalid filter at position 5: expected a value (a "string", number, true, false, null or datetime(...)) after "=", found "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."`},
	{strings.Repeat("(", 101) + "a = 1" + strings.Repeat(")", 101), `invalid filter at position 101: the expression is nested more than 100 levels deep`},
	{strings.Repeat("not ", 101) + "a = 1", `invalid filter at position 401: the expression is nested more than 100 levels deep`},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range parseErrorTests {
		q, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %q", tt.in, q, tt.msg)
			continue
		}
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != posture.CodeInvalidFilter {
			t.Errorf("Parse(%q) error %#v is not an INVALID_FILTER *posture.Error", tt.in, err)
			continue
		}
		if pe.Message != tt.msg {
			t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.in, pe.Message, tt.msg)
		}
	}
}

func TestParseDepthLimit(t *testing.T) {
	ok := strings.Repeat("(", 100) + "a = 1" + strings.Repeat(")", 100)
	if _, err := Parse(ok); err != nil {
		t.Errorf("100 levels: %v", err)
	}
	ok = strings.Repeat("not ", 100) + "a = 1"
	if _, err := Parse(ok); err != nil {
		t.Errorf("100 nots: %v", err)
	}
	// Depth is nesting, not length.
	long := strings.Repeat("(a = 1) and ", 5000) + "a = 1"
	if _, err := Parse(long); err != nil {
		t.Errorf("long flat filter: %v", err)
	}
}

func TestParseWithFields(t *testing.T) {
	opts := Options{Fields: []string{"name", "roleAttributes", "tags.*", "createdAt"}}
	valid := []string{
		`name = "a"`,
		`tags.env = "prod"`,
		`tags.a.b = 1`,
		`anyOf(roleAttributes) = "x" sort by name, createdAt desc`,
		`isEmpty(roleAttributes)`,
	}
	for _, s := range valid {
		if _, err := ParseWith(s, opts); err != nil {
			t.Errorf("ParseWith(%q): %v", s, err)
		}
	}
	invalid := []struct{ in, msg string }{
		{`nme = "a"`, `invalid filter at position 1: unknown field "nme"; valid fields are createdAt, name, roleAttributes, tags.*`},
		{`tags = "a"`, `invalid filter at position 1: unknown field "tags"; valid fields are createdAt, name, roleAttributes, tags.*`},
		{`name = "a" sort by id`, `invalid filter at position 20: unknown field "id"; valid fields are createdAt, name, roleAttributes, tags.*`},
		{`allOf(roles) = "a"`, `invalid filter at position 7: unknown field "roles"; valid fields are createdAt, name, roleAttributes, tags.*`},
		{`isEmpty(name.x)`, `invalid filter at position 9: unknown field "name.x"; valid fields are createdAt, name, roleAttributes, tags.*`},
	}
	for _, tt := range invalid {
		_, err := ParseWith(tt.in, opts)
		if posture.CodeOf(err) != posture.CodeInvalidFilter {
			t.Errorf("ParseWith(%q) = %v, want INVALID_FILTER", tt.in, err)
			continue
		}
		if got := err.(*posture.Error).Message; got != tt.msg {
			t.Errorf("ParseWith(%q):\n got %s\nwant %s", tt.in, got, tt.msg)
		}
	}
	// An empty, non-nil list admits nothing; nil admits everything.
	if _, err := ParseWith(`a = 1`, Options{Fields: []string{}}); err == nil {
		t.Error("empty Fields admitted a field")
	}
	if _, err := ParseWith(`a = 1`, Options{}); err != nil {
		t.Errorf("nil Fields: %v", err)
	}
}

func TestQueryStringEdgeCases(t *testing.T) {
	var nilQuery *Query
	if got := nilQuery.String(); got != "" {
		t.Errorf("nil Query String = %q", got)
	}
	q := &Query{Sort: []SortField{}, Limit: int64p(-7)}
	if got := q.String(); got != "limit none" {
		t.Errorf("String = %q, want %q", got, "limit none")
	}
	if q.HasPredicate() || nilQuery.HasPredicate() {
		t.Error("HasPredicate true without a predicate")
	}
	q, _ = Parse("a = 1")
	if !q.HasPredicate() {
		t.Error("HasPredicate false with a predicate")
	}
}
