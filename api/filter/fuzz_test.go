package filter

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	posture "github.com/seed-0809debe/posture"
)

// FuzzParse checks that Parse never panics, that every error is an
// INVALID_FILTER *posture.Error with a position, and that the canonical form
// of every accepted filter parses back to the same query: the same String,
// the same clauses, and the same verdict on every test record.
func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add(tt.in)
	}
	for _, tt := range parseErrorTests {
		f.Add(tt.in)
	}
	for _, tt := range matchTests {
		f.Add(tt.filter)
	}
	recs := testRecords()
	f.Fuzz(func(t *testing.T, s string) {
		q, err := Parse(s)
		if err != nil {
			pe, ok := err.(*posture.Error)
			if !ok || pe.Code != posture.CodeInvalidFilter {
				t.Fatalf("Parse(%q) error %#v is not an INVALID_FILTER *posture.Error", s, err)
			}
			if !strings.HasPrefix(pe.Message, "invalid filter at position ") {
				t.Fatalf("Parse(%q) error message %q does not give a position", s, pe.Message)
			}
			if q != nil {
				t.Fatalf("Parse(%q) returned both a query and an error", s)
			}
			return
		}
		canon := q.String()
		q2, err := Parse(canon)
		if err != nil {
			t.Fatalf("canonical form %q of %q does not parse: %v", canon, s, err)
		}
		if got := q2.String(); got != canon {
			t.Fatalf("canonical form of %q is not stable:\n first %s\nsecond %s", s, canon, got)
		}
		if diff := cmp.Diff(q, q2, cmpopts.IgnoreUnexported(Query{})); diff != "" {
			t.Fatalf("clauses of %q differ after a round trip (-first +second):\n%s", s, diff)
		}
		for _, r := range recs {
			if q.Match(r) != q2.Match(r) {
				t.Fatalf("%q and its canonical form %q disagree on record %v", s, canon, r["id"])
			}
		}
	})
}

// FuzzParseSort checks that ParseSort never panics, that every error is an
// INVALID_SORT_IDENTIFIER *posture.Error, and that the fields it returns
// parse back from their canonical form.
func FuzzParseSort(f *testing.F) {
	for _, s := range []string{"", "name", "name asc, createdAt desc", "a,", "asc", "tags.env DESC", `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fields, err := ParseSort(s)
		if err != nil {
			if posture.CodeOf(err) != posture.CodeInvalidSort {
				t.Fatalf("ParseSort(%q) error %#v is not INVALID_SORT_IDENTIFIER", s, err)
			}
			return
		}
		var parts []string
		for _, f := range fields {
			parts = append(parts, f.String())
		}
		again, err := ParseSort(strings.Join(parts, ", "))
		if err != nil {
			t.Fatalf("canonical form of %q does not parse: %v", s, err)
		}
		if diff := cmp.Diff(fields, again); diff != "" {
			t.Fatalf("ParseSort(%q) round trip (-first +second):\n%s", s, diff)
		}
	})
}
