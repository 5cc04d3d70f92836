package filter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	posture "github.com/seed-0809debe/posture"
)

// refRecords are authenticator- and config-like records whose identity,
// configType and routers fields are references to other entities.
func refRecords() []map[string]any {
	ref := func(id, name string) map[string]any {
		return map[string]any{"id": id, "name": name, "entity": "identities",
			"_links": map[string]any{"self": map[string]any{"href": "./identities/" + id}}}
	}
	return []map[string]any{
		{"id": "a1", "method": "updb", "identity": ref("bob", "Bob"), "configType": ref("ct1", "host.v1"),
			"routers": []any{ref("r1", "edge-1"), ref("r2", "edge-2")}},
		{"id": "a2", "method": "cert", "identity": ref("bob", "Bob"), "configType": ref("ct2", "intercept.v1"),
			"routers": []any{}},
		{"id": "a3", "method": "updb", "identity": ref("carol", "Carol"), "configType": ref("ct1", "host.v1")},
		{"id": "a4", "method": "updb", "identity": ref("", ""), "configType": nil},
		{"id": "a5", "method": "updb"},
	}
}

var refOptions = Options{
	Fields:  []string{"id", "method", "identity", "identity.id", "identity.name", "configType", "configType.id", "configType.name", "routers"},
	Refs:    []string{"identity", "configType", "routers"},
	Aliases: map[string]string{"type": "configType"},
}

func TestMatchRefs(t *testing.T) {
	for _, tt := range []struct {
		filter string
		want   []string
	}{
		{`identity = "bob"`, []string{"a1", "a2"}},
		{`identity = "bob" and method = "updb"`, []string{"a1"}},
		{`identity.id = "bob"`, []string{"a1", "a2"}},
		{`identity.name = "Carol"`, []string{"a3"}},
		{`identity = "Bob"`, []string{}},
		{`identity != "bob"`, []string{"a3"}},
		{`not identity = "bob"`, []string{"a3", "a4", "a5"}},
		{`identity in ["carol", "bob"]`, []string{"a1", "a2", "a3"}},
		{`identity not in ["bob"]`, []string{"a3"}},
		{`identity contains "aro"`, []string{"a3"}},
		{`identity = null`, []string{"a4", "a5"}},
		{`identity != null`, []string{"a1", "a2", "a3"}},
		{`isEmpty(identity)`, []string{"a4", "a5"}},
		{`not isEmpty(identity)`, []string{"a1", "a2", "a3"}},
		{`identity > "c"`, []string{"a3"}},
		{`type = "ct1"`, []string{"a1", "a3"}},
		{`configType = "ct1"`, []string{"a1", "a3"}},
		{`type.name = "intercept.v1"`, []string{"a2"}},
		{`type.id in ["ct2"]`, []string{"a2"}},
		{`isEmpty(type)`, []string{"a4", "a5"}},
		{`anyOf(routers) = "r2"`, []string{"a1"}},
		{`allOf(routers) in ["r1", "r2"]`, []string{"a1"}},
		{`isEmpty(routers)`, []string{"a2", "a3", "a4", "a5"}},
	} {
		q, err := ParseWith(tt.filter, refOptions)
		if err != nil {
			t.Errorf("ParseWith(%q): %v", tt.filter, err)
			continue
		}
		var got []map[string]any
		for _, r := range refRecords() {
			if q.Match(r) {
				got = append(got, r)
			}
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.filter, diff)
		}
		// The canonical form keeps the names as written.
		q2, err := ParseWith(q.String(), refOptions)
		if err != nil {
			t.Errorf("ParseWith(%q): %v", q.String(), err)
			continue
		}
		for _, r := range refRecords() {
			if q.Match(r) != q2.Match(r) {
				t.Errorf("%q and its canonical form %q disagree on %v", tt.filter, q.String(), r["id"])
			}
		}
	}
	// Without Refs, a reference is an object and equals no string.
	q, err := Parse(`identity = "bob"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refRecords() {
		if q.Match(r) {
			t.Errorf("%v matched without Refs", r["id"])
		}
	}
}

func TestSortRefs(t *testing.T) {
	for _, tt := range []struct {
		sort string
		want []string
	}{
		// By the reference's id, references without one (null) first.
		{"identity, id desc", []string{"a5", "a4", "a2", "a1", "a3"}},
		{"identity desc, id", []string{"a3", "a1", "a2", "a4", "a5"}},
		{"identity.name desc, id", []string{"a3", "a1", "a2", "a4", "a5"}},
		{"type desc, id", []string{"a2", "a1", "a3", "a4", "a5"}},
	} {
		by, err := ParseSortWith(tt.sort, refOptions)
		if err != nil {
			t.Fatalf("ParseSortWith(%q): %v", tt.sort, err)
		}
		recs := refRecords()
		SortRecordsWith(recs, by, refOptions)
		if diff := cmp.Diff(tt.want, ids(recs)); diff != "" {
			t.Errorf("sort %s (-want +got):\n%s", tt.sort, diff)
		}
		q, err := ParseWith("sort by "+tt.sort, refOptions)
		if err != nil {
			t.Fatal(err)
		}
		recs = refRecords()
		SortRecordsWith(recs, q.Sort, refOptions)
		if diff := cmp.Diff(tt.want, ids(recs)); diff != "" {
			t.Errorf("sort by %s (-want +got):\n%s", tt.sort, diff)
		}
	}
}

func TestAliasFields(t *testing.T) {
	opts := Options{Fields: []string{"id", "configType", "configType.*"}, Aliases: map[string]string{"type": "configType", "kind": "nothing"}}
	for _, f := range []string{`type = "x"`, `type.name = "x"`, `configType = "x"`, `sort by type`} {
		if _, err := ParseWith(f, opts); err != nil {
			t.Errorf("ParseWith(%q): %v", f, err)
		}
	}
	// An alias of a field the records cannot have is refused as that field
	// would be, and the message lists the aliases that are admitted.
	_, err := ParseWith(`kind = "x"`, opts)
	want := `invalid filter at position 1: unknown field "kind"; valid fields are configType, configType.*, id, type`
	if pe, ok := err.(*posture.Error); !ok || pe.Code != posture.CodeInvalidFilter || pe.Message != want {
		t.Errorf("kind: %v, want %s", err, want)
	}
	if _, err := ParseSortWith("kind", opts); err == nil {
		t.Error("sort by an alias of an unknown field accepted")
	}
}
