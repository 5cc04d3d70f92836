package projections_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// loadModel applies a model of the given size: identities with three role
// attributes (department, site, role), services with two (app, tier), and
// service policies selecting identities by one or two attributes and
// services by app attribute or by id.
func loadModel(tb testing.TB, identities, services, policies int) (*projections.Store, []string) {
	tb.Helper()
	s := openMem(tb, vfs.NewMem())
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []posture.Event
	seq := uint64(0)
	add := func(p posture.Payload) {
		seq++
		e := posture.MustEvent(p, now)
		e.Seq = seq
		batch = append(batch, e)
		if len(batch) == 512 {
			if err := s.Apply(batch); err != nil {
				tb.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	ids := make([]string, identities)
	for i := range identities {
		ids[i] = fmt.Sprintf("i%07d", i)
		add(posture.Created[posture.Identity]{Entity: posture.Identity{ID: ids[i], Name: ids[i], Type: posture.IdentityDevice,
			RoleAttributes: []string{fmt.Sprintf("dept-%d", rng.IntN(50)), fmt.Sprintf("site-%d", rng.IntN(20)), fmt.Sprintf("role-%d", rng.IntN(10))}}})
	}
	for i := range services {
		id := fmt.Sprintf("s%06d", i)
		add(posture.Created[posture.Service]{Entity: posture.Service{ID: id, Name: id,
			RoleAttributes: []string{fmt.Sprintf("app-%d", rng.IntN(500)), fmt.Sprintf("tier-%d", rng.IntN(10))}}})
	}
	for i := range policies {
		id := fmt.Sprintf("p%05d", i)
		p := posture.ServicePolicy{ID: id, Name: id, Type: posture.Dial, Semantic: posture.AllOf}
		if i%4 == 0 {
			p.Type = posture.Bind
		}
		switch i % 3 {
		case 0:
			p.IdentityRoles = []string{fmt.Sprintf("#dept-%d", rng.IntN(50))}
		case 1:
			p.IdentityRoles = []string{fmt.Sprintf("#dept-%d", rng.IntN(50)), fmt.Sprintf("#site-%d", rng.IntN(20))}
		case 2:
			p.Semantic = posture.AnyOf
			p.IdentityRoles = []string{fmt.Sprintf("#role-%d", rng.IntN(10)), fmt.Sprintf("@%s", ids[rng.IntN(len(ids))])}
		}
		if i%5 == 0 {
			p.ServiceRoles = []string{fmt.Sprintf("@s%06d", rng.IntN(services)), fmt.Sprintf("@s%06d", rng.IntN(services))}
		} else {
			p.ServiceRoles = []string{fmt.Sprintf("#app-%d", rng.IntN(500))}
		}
		add(posture.Created[posture.ServicePolicy]{Entity: p})
	}
	if len(batch) > 0 {
		if err := s.Apply(batch); err != nil {
			tb.Fatal(err)
		}
	}
	return s, ids
}

// BenchmarkServicesFor answers "the services identity X may dial, with
// their policies" on a model of 100,000 identities, 10,000 services and
// 2,000 policies, and reports the median and 99th percentile latency.
func BenchmarkServicesFor(b *testing.B) {
	s, ids := loadModel(b, 100_000, 10_000, 2_000)
	defer s.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	lat := make([]time.Duration, 0, b.N)
	grants := 0
	b.ResetTimer()
	for range b.N {
		id := ids[rng.IntN(len(ids))]
		start := time.Now()
		g := s.ServicesFor(id, posture.Dial)
		lat = append(lat, time.Since(start))
		grants += len(g)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(grants)/float64(b.N), "services/op")
}

// TestServicesForMatchesAScan checks the indexed answer against a plain
// scan of every policy on a smaller model.
func TestServicesForMatchesAScan(t *testing.T) {
	s, ids := loadModel(t, 2_000, 500, 200)
	defer s.Close()
	identities, _ := projections.List[posture.Identity](s)
	services, _ := projections.List[posture.Service](s)
	policies, _ := projections.List[posture.ServicePolicy](s)
	attrs := map[string][]string{}
	for _, i := range identities {
		attrs[i.ID] = i.RoleAttributes
	}
	for _, id := range ids[:200] {
		want := map[string][]string{}
		for _, p := range policies {
			if p.Type != posture.Dial || !posture.MatchRoles(p.IdentityRoles, p.Semantic, id, attrs[id]) {
				continue
			}
			for _, svc := range services {
				if posture.MatchRoles(p.ServiceRoles, p.Semantic, svc.ID, svc.RoleAttributes) {
					want[svc.ID] = append(want[svc.ID], p.ID)
				}
			}
		}
		got := s.ServicesFor(id, posture.Dial)
		if len(got) != len(want) {
			t.Fatalf("%s: %d services, a scan finds %d", id, len(got), len(want))
		}
		for _, g := range got {
			if !slices.Equal(g.Policies, want[g.ServiceID]) {
				t.Fatalf("%s → %s: policies %v, a scan finds %v", id, g.ServiceID, g.Policies, want[g.ServiceID])
			}
		}
	}
}
