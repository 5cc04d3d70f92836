package filter

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testRecords are entities in their JSON-decoded form, with a few Go values
// (an int, a time.Time) that callers may also pass.
func testRecords() []map[string]any {
	return []map[string]any{
		{
			"id": "i1", "name": "Alice", "type": "User", "age": 30.0, "isAdmin": true,
			"roleAttributes": []any{"sales", "emea"},
			"tags":           map[string]any{"env": "prod", "tier": 1.0},
			"createdAt":      "2024-01-02T03:04:05Z",
			"score":          json.Number("7.5"),
		},
		{
			"id": "i2", "name": "bob", "type": "Device", "age": 25.0, "isAdmin": false,
			"roleAttributes": []any{"sales"},
			"tags":           map[string]any{"env": "dev"},
			"createdAt":      "2024-06-01T00:00:00.5+02:00",
			"score":          json.Number("3"),
		},
		{
			"id": "i3", "name": "Carol Ann", "type": "User", "age": nil,
			"roleAttributes": []any{},
			"tags":           map[string]any{},
			"createdAt":      time.Date(2023, 12, 31, 23, 59, 59, 0, time.UTC),
		},
		{
			"id": "i4", "name": "dave", "type": "Service", "age": 41,
			"roleAttributes": []string{"emea", "ops"},
			"tags":           "oops",
			"createdAt":      "not a date",
			"extra":          []any{"emea", 7.0},
		},
		{"id": "i5"},
	}
}

func ids(recs []map[string]any) []string {
	out := []string{}
	for _, r := range recs {
		id, _ := r["id"].(string)
		out = append(out, id)
	}
	return out
}

// matchTests are filters with the ids of testRecords they match. They also
// seed FuzzParse.
var matchTests = []struct {
	filter string
	want   []string
}{
	{``, []string{"i1", "i2", "i3", "i4", "i5"}},
	{`true`, []string{"i1", "i2", "i3", "i4", "i5"}},
	{`false`, []string{}},
	// Comparisons of strings (byte-wise), numbers, booleans.
	{`name = "Alice"`, []string{"i1"}},
	{`name != "Alice"`, []string{"i2", "i3", "i4"}},
	{`name < "a"`, []string{"i1", "i3"}},
	{`name >= "c"`, []string{"i4"}},
	{`age > 26`, []string{"i1", "i4"}},
	{`age >= 25 and age <= 30`, []string{"i1", "i2"}},
	{`age = 41`, []string{"i4"}},
	{`age < 30.5`, []string{"i1", "i2"}},
	{`score > 5`, []string{"i1"}},
	{`score = 3`, []string{"i2"}},
	{`isAdmin = true`, []string{"i1"}},
	{`isAdmin != true`, []string{"i2"}},
	{`isAdmin = false`, []string{"i2"}},
	// Mismatched types are false either way.
	{`age = "30"`, []string{}},
	{`age != "30"`, []string{}},
	{`name > 1`, []string{}},
	{`isAdmin = "true"`, []string{}},
	{`roleAttributes = "sales"`, []string{}},
	// Null and missing fields.
	{`age = null`, []string{"i3", "i5"}},
	{`age != null`, []string{"i1", "i2", "i4"}},
	{`missing = null`, []string{"i1", "i2", "i3", "i4", "i5"}},
	{`missing != null`, []string{}},
	{`missing.deep = null`, []string{"i1", "i2", "i3", "i4", "i5"}},
	{`missing = "x" or missing != "x"`, []string{}},
	{`not missing = "x"`, []string{"i1", "i2", "i3", "i4", "i5"}},
	{`roleAttributes != null`, []string{"i1", "i2", "i3", "i4"}},
	// Nested fields.
	{`tags.env = "prod"`, []string{"i1"}},
	{`tags.env != "prod"`, []string{"i2"}},
	{`tags.env = null`, []string{"i3", "i4", "i5"}},
	{`tags.tier = 1`, []string{"i1"}},
	{`tags.env.x = null`, []string{"i1", "i2", "i3", "i4", "i5"}},
	// contains and icontains on strings.
	{`name contains "o"`, []string{"i2", "i3"}},
	{`name contains "A"`, []string{"i1", "i3"}},
	{`name icontains "A"`, []string{"i1", "i3", "i4"}},
	{`name not contains "o"`, []string{"i1", "i4"}},
	{`name not icontains "AL"`, []string{"i2", "i3", "i4"}},
	{`name contains ""`, []string{"i1", "i2", "i3", "i4"}},
	{`age contains "3"`, []string{}},
	{`age not contains "3"`, []string{}},
	// ... and on arrays: any element.
	{`roleAttributes contains "ale"`, []string{"i1", "i2"}},
	{`roleAttributes icontains "EMEA"`, []string{"i1", "i4"}},
	{`roleAttributes not contains "sales"`, []string{"i3", "i4"}},
	{`extra contains "7"`, []string{}},
	// anyOf / allOf.
	{`anyOf(roleAttributes) = "sales"`, []string{"i1", "i2"}},
	{`anyOf(roleAttributes) != "sales"`, []string{"i1", "i4"}},
	{`allOf(roleAttributes) = "sales"`, []string{"i2"}},
	{`allOf(roleAttributes) != "sales"`, []string{"i4"}},
	{`not anyOf(roleAttributes) = "sales"`, []string{"i3", "i4", "i5"}},
	{`anyOf(roleAttributes) in ["ops", "x"]`, []string{"i4"}},
	{`anyOf(roleAttributes) not in ["sales"]`, []string{"i1", "i4"}},
	{`allOf(roleAttributes) contains "e"`, []string{"i1", "i2"}},
	{`anyOf(roleAttributes) icontains "PS"`, []string{"i4"}},
	{`anyOf(roleAttributes) not contains "s"`, []string{"i1", "i4"}},
	{`anyOf(roleAttributes) < "f"`, []string{"i1", "i4"}},
	{`anyOf(extra) = 7`, []string{"i4"}},
	{`allOf(extra) = 7`, []string{}},
	{`anyOf(extra) between 5 and 10`, []string{"i4"}},
	{`anyOf(name) = "bob"`, []string{"i2"}},
	{`allOf(name) icontains "a"`, []string{"i1", "i3", "i4"}},
	{`anyOf(missing) = null`, []string{}},
	{`allOf(missing) = null`, []string{}},
	{`anyOf(tags.env) = "dev"`, []string{"i2"}},
	// isEmpty.
	{`isEmpty(roleAttributes)`, []string{"i3", "i5"}},
	{`isEmpty(tags)`, []string{"i3", "i5"}},
	{`not isEmpty(roleAttributes)`, []string{"i1", "i2", "i4"}},
	{`isEmpty(name)`, []string{"i5"}},
	// Date-times compare as instants against datetime(...).
	{`createdAt > datetime(2024-01-01T00:00:00Z)`, []string{"i1", "i2"}},
	{`createdAt = datetime(2024-05-31T22:00:00.5Z)`, []string{"i2"}},
	{`createdAt != datetime(2024-05-31T22:00:00.5Z)`, []string{"i1", "i3"}},
	{`createdAt < datetime(2024-01-02T04:04:05+01:00)`, []string{"i3"}},
	{`createdAt <= datetime(2024-01-02T04:04:05+01:00)`, []string{"i1", "i3"}},
	{`createdAt between datetime(2023-12-31T00:00:00Z) and datetime(2024-01-31T00:00:00Z)`, []string{"i1", "i3"}},
	{`createdAt not between datetime(2023-12-31T00:00:00Z) and datetime(2024-01-31T00:00:00Z)`, []string{"i2"}},
	{`createdAt in [datetime(2024-01-02T03:04:05Z), datetime(2023-12-31T23:59:59Z)]`, []string{"i1", "i3"}},
	// ... and as strings against a string.
	{`createdAt > "2024"`, []string{"i1", "i2", "i4"}},
	{`name = datetime(2024-01-02T03:04:05Z)`, []string{}},
	// in / not in / between.
	{`type in ["User", "Service"]`, []string{"i1", "i3", "i4"}},
	{`type not in ["User", "Service"]`, []string{"i2"}},
	{`age in [25, 41]`, []string{"i2", "i4"}},
	{`age in [null]`, []string{"i3", "i5"}},
	{`age not in [null, 25]`, []string{"i1", "i4"}},
	{`age in ["25", 41]`, []string{"i4"}},
	{`age between 25 and 30`, []string{"i1", "i2"}},
	{`age not between 26 and 40`, []string{"i2", "i4"}},
	{`age between 30 and 25`, []string{}},
	{`name between "a" and "c"`, []string{"i2"}},
	{`name not between "a" and "c"`, []string{"i1", "i3", "i4"}},
	// Logic, precedence and keyword case.
	{`not (type = "User" or type = "Device")`, []string{"i4", "i5"}},
	{`type = "User" and age > 20 or name = "bob"`, []string{"i1", "i2"}},
	{`type = "User" and (age > 20 or name = "bob")`, []string{"i1"}},
	{`name = "bob" or type = "User" and age > 20`, []string{"i1", "i2"}},
	{`not type = "User" and not type = "Device"`, []string{"i4", "i5"}},
	{`type = "User" AND NOT name ICONTAINS "carol"`, []string{"i1"}},
	{`TYPE = "User"`, []string{}},
	{`AnyOf(roleAttributes) IN ["ops"] Or IsEmpty(roleAttributes)`, []string{"i3", "i4", "i5"}},
	{`id != "i5" and isAdmin != null`, []string{"i1", "i2"}},
	// Clauses do not affect matching.
	{`name = "Carol Ann" sort by name limit 1`, []string{"i3"}},
	{`sort by name skip 3 limit none`, []string{"i1", "i2", "i3", "i4", "i5"}},
}

func TestMatch(t *testing.T) {
	recs := testRecords()
	for _, tt := range matchTests {
		q, err := Parse(tt.filter)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.filter, err)
			continue
		}
		var got []map[string]any
		for _, r := range recs {
			if q.Match(r) {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.filter, diff)
		}
		// The canonical form matches the same records.
		q2, err := Parse(q.String())
		if err != nil {
			t.Errorf("Parse(%q): %v", q.String(), err)
			continue
		}
		for _, r := range recs {
			if q.Match(r) != q2.Match(r) {
				t.Errorf("%q and its canonical form %q disagree on %v", tt.filter, q.String(), r["id"])
			}
		}
	}
}

func TestMatchNil(t *testing.T) {
	var q *Query
	if !q.Match(map[string]any{"a": 1.0}) {
		t.Error("nil query rejected a record")
	}
	if !(&Query{}).Match(nil) {
		t.Error("zero query rejected a nil record")
	}
	q, _ = Parse(`a = null and isEmpty(a) and b.c = null and not b.c != 1`)
	if !q.Match(nil) {
		t.Error("null tests failed on a nil record")
	}
}

func TestMatchDoesNotModify(t *testing.T) {
	recs := testRecords()
	q, _ := Parse(`anyOf(roleAttributes) icontains "E" or tags.env = "x" or createdAt > datetime(2020-01-01T00:00:00Z)`)
	for _, r := range recs {
		q.Match(r)
	}
	if diff := cmp.Diff(testRecords(), recs); diff != "" {
		t.Errorf("Match modified records (-want +got):\n%s", diff)
	}
}
