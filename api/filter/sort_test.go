package filter

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	posture "github.com/seed-0809debe/posture"
)

func TestParseSort(t *testing.T) {
	tests := []struct {
		in   string
		want []SortField
	}{
		{"", nil},
		{"  ", nil},
		{"name", []SortField{{Field: "name"}}},
		{"name asc, createdAt desc", []SortField{{Field: "name"}, {Field: "createdAt", Desc: true}}},
		{"NAME DESC,tags.env ASC", []SortField{{Field: "NAME", Desc: true}, {Field: "tags.env"}}},
		{"a,b , c desc", []SortField{{Field: "a"}, {Field: "b"}, {Field: "c", Desc: true}}},
	}
	for _, tt := range tests {
		got, err := ParseSort(tt.in)
		if err != nil {
			t.Errorf("ParseSort(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseSort(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestParseSortErrors(t *testing.T) {
	tests := []struct {
		in   string
		opts Options
		msg  string
	}{
		{"name,", Options{}, `invalid sort at position 6: expected a field name to sort by, found end of sort`},
		{",name", Options{}, `invalid sort at position 1: expected a field name to sort by, found ","`},
		{"asc", Options{}, `invalid sort at position 1: expected a field name to sort by, found "asc" ("asc" is a keyword and cannot be a field name)`},
		{"name up", Options{}, `invalid sort at position 6: expected "asc", "desc", "," or the end of the sort, found "up"`},
		{"name asc desc", Options{}, `invalid sort at position 10: expected "asc", "desc", "," or the end of the sort, found "desc"`},
		{"name = 1", Options{}, `invalid sort at position 6: expected "asc", "desc", "," or the end of the sort, found "="`},
		{`"name"`, Options{}, `invalid sort at position 1: expected a field name to sort by, found "\"name\""`},
		{"na$me", Options{}, `invalid sort at position 3: unexpected character '$'`},
		{"name, id", Options{Fields: []string{"name"}}, `invalid sort at position 7: unknown field "id"; valid fields are name`},
	}
	for _, tt := range tests {
		_, err := ParseSortWith(tt.in, tt.opts)
		pe, ok := err.(*posture.Error)
		if !ok || pe.Code != posture.CodeInvalidSort {
			t.Errorf("ParseSort(%q) = %#v, want an INVALID_SORT_IDENTIFIER *posture.Error", tt.in, err)
			continue
		}
		if pe.Message != tt.msg {
			t.Errorf("ParseSort(%q):\n got %s\nwant %s", tt.in, pe.Message, tt.msg)
		}
	}
}

func TestSortRecords(t *testing.T) {
	tests := []struct {
		by   string
		want []string
	}{
		{"", []string{"i1", "i2", "i3", "i4", "i5"}},
		{"name", []string{"i5", "i1", "i3", "i2", "i4"}},
		{"name desc", []string{"i4", "i2", "i3", "i1", "i5"}},
		{"age", []string{"i3", "i5", "i2", "i1", "i4"}},
		{"age desc", []string{"i4", "i1", "i2", "i3", "i5"}},
		{"createdAt", []string{"i5", "i3", "i1", "i2", "i4"}},
		{"type, age desc", []string{"i5", "i2", "i4", "i1", "i3"}},
		{"tags.env", []string{"i3", "i4", "i5", "i2", "i1"}},
		{"tags.env desc, id desc", []string{"i1", "i2", "i5", "i4", "i3"}},
		{"score", []string{"i3", "i4", "i5", "i2", "i1"}},
		{"isAdmin desc", []string{"i1", "i2", "i3", "i4", "i5"}},
		{"roleAttributes", []string{"i5", "i1", "i2", "i3", "i4"}},
	}
	for _, tt := range tests {
		by, err := ParseSort(tt.by)
		if err != nil {
			t.Fatal(err)
		}
		recs := testRecords()
		SortRecords(recs, by)
		if diff := cmp.Diff(tt.want, ids(recs)); diff != "" {
			t.Errorf("sort %q (-want +got):\n%s", tt.by, diff)
		}
	}
}

func TestSortRecordsMixedTypes(t *testing.T) {
	vals := []any{true, "b", 2.0, []any{}, nil, false, "2024-01-01T00:00:00Z", "a", 1, "2023-01-01T00:00:00+05:00", map[string]any{}}
	var recs []map[string]any
	for i, v := range vals {
		recs = append(recs, map[string]any{"i": i, "v": v})
	}
	SortRecords(recs, []SortField{{Field: "v"}})
	var got []int
	for _, r := range recs {
		got = append(got, r["i"].(int))
	}
	// null, false, true, 1, 2, the two date-times by instant, "a", "b",
	// then the array and the object in their original order.
	want := []int{4, 5, 0, 8, 2, 9, 6, 7, 1, 3, 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSortRecordsStable(t *testing.T) {
	var recs []map[string]any
	for i := range 100 {
		recs = append(recs, map[string]any{"i": i, "k": float64(i % 3)})
	}
	SortRecords(recs, []SortField{{Field: "k", Desc: true}})
	prev := map[float64]int{}
	for n, r := range recs {
		k, i := r["k"].(float64), r["i"].(int)
		if n > 0 && recs[n-1]["k"].(float64) < k {
			t.Fatalf("not descending at %d", n)
		}
		if p, ok := prev[k]; ok && p > i {
			t.Fatalf("not stable: %d after %d for key %v", i, p, k)
		}
		prev[k] = i
	}
}
