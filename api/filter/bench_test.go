package filter

import (
	"fmt"
	"testing"
	"time"
)

// benchRecords builds n identity-like records.
func benchRecords(n int) []map[string]any {
	types := []string{"User", "Device", "Service", "Router"}
	attrs := []string{"sales", "emea", "ops", "dev", "apac", "finance"}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := make([]map[string]any, n)
	for i := range recs {
		ra := []any{}
		for j := range i % 4 {
			ra = append(ra, attrs[(i+j)%len(attrs)])
		}
		recs[i] = map[string]any{
			"id":             fmt.Sprintf("id%05d", i),
			"name":           fmt.Sprintf("identity-%d", i),
			"type":           types[i%len(types)],
			"isAdmin":        i%17 == 0,
			"roleAttributes": ra,
			"tags":           map[string]any{"env": []string{"prod", "dev"}[i%2], "tier": float64(i % 5)},
			"createdAt":      start.Add(time.Duration(i) * time.Minute).Format(time.RFC3339),
		}
	}
	return recs
}

const benchFilter = `(type in ["User", "Device"] and anyOf(roleAttributes) = "emea" or name icontains "-99") ` +
	`and tags.env = "prod" and not isAdmin = true and createdAt > datetime(2024-01-02T00:00:00Z) ` +
	`sort by name desc limit 50`

// BenchmarkParseMatch parses a filter and matches it against 10,000
// records, as one list request does.
func BenchmarkParseMatch(b *testing.B) {
	recs := benchRecords(10000)
	b.ReportAllocs()
	for b.Loop() {
		q, err := Parse(benchFilter)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if q.Match(r) {
				n++
			}
		}
		if n == 0 {
			b.Fatal("no match")
		}
	}
}

// BenchmarkParse is the parse alone.
func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(benchFilter); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSortRecords sorts 10,000 records by two keys.
func BenchmarkSortRecords(b *testing.B) {
	recs := benchRecords(10000)
	by := []SortField{{Field: "type"}, {Field: "createdAt", Desc: true}}
	work := make([]map[string]any, len(recs))
	b.ReportAllocs()
	for b.Loop() {
		copy(work, recs)
		SortRecords(work, by)
	}
}
