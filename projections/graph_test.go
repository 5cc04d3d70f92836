package projections

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/seed-0809debe/posture"
)

// TestGraphSelectsAsTheRolesSay checks the graph's selections against
// posture.MatchRoles over every entity, through random creations, changes
// of attributes (with repeats and slots reused) and deletions of identities,
// services and policies.
func TestGraphSelectsAsTheRolesSay(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := newGraph()
	identities, services := map[string][]string{}, map[string][]string{}
	policies := map[string]posture.ServicePolicy{}
	attrs := func() []string {
		out := []string{}
		for range r.IntN(4) {
			out = append(out, fmt.Sprintf("a%d", r.IntN(8)))
		}
		return out
	}
	roles := func(prefix string, n int) []string {
		switch r.IntN(6) {
		case 0:
			return []string{posture.RoleAll}
		case 1:
			return []string{fmt.Sprintf("@%s%d", prefix, r.IntN(n)), fmt.Sprintf("#a%d", r.IntN(8))}
		case 2:
			return nil
		default:
			out := []string{}
			for range 1 + r.IntN(3) {
				out = append(out, fmt.Sprintf("#a%d", r.IntN(8)))
			}
			return out
		}
	}
	semantic := func() string { return []string{posture.AllOf, posture.AnyOf}[r.IntN(2)] }
	brute := func(all map[string][]string, roles []string, semantic string) []string {
		out := []string{}
		for id, a := range all {
			if posture.MatchRoles(roles, semantic, id, a) {
				out = append(out, id)
			}
		}
		sort.Strings(out)
		return out
	}
	// An entity of the kind is set or removed.
	change := func(kind posture.Kind, id string, all map[string][]string, entity func(id string, a []string) posture.Entity) {
		if r.IntN(5) == 0 {
			g.remove(kind, id)
			delete(all, id)
			return
		}
		a := attrs()
		g.put(entity(id, a))
		all[id] = a
	}
	for step := range 3000 {
		switch k := r.IntN(10); {
		case k < 4:
			change(posture.KindIdentity, fmt.Sprintf("i%d", r.IntN(200)), identities, func(id string, a []string) posture.Entity {
				return posture.Identity{ID: id, RoleAttributes: a}
			})
		case k < 7:
			change(posture.KindService, fmt.Sprintf("s%d", r.IntN(50)), services, func(id string, a []string) posture.Entity {
				return posture.Service{ID: id, RoleAttributes: a}
			})
		default:
			id := fmt.Sprintf("p%d", r.IntN(30))
			if r.IntN(5) == 0 {
				g.remove(posture.KindServicePolicy, id)
				delete(policies, id)
			} else {
				p := posture.ServicePolicy{ID: id, Type: posture.Dial, Semantic: semantic(),
					IdentityRoles: roles("i", 200), ServiceRoles: roles("s", 50)}
				g.put(p)
				policies[id] = p
			}
		}
		if step%50 != 0 {
			continue
		}
		for id, p := range policies {
			if got, want := g.selected(posture.KindServicePolicy, id, FieldIdentityRoles), brute(identities, p.IdentityRoles, p.Semantic); !slices.Equal(got, want) {
				t.Fatalf("step %d: policy %s %v %s selects identities %v, want %v", step, id, p.IdentityRoles, p.Semantic, got, want)
			}
			if got, want := g.selected(posture.KindServicePolicy, id, FieldServiceRoles), brute(services, p.ServiceRoles, p.Semantic); !slices.Equal(got, want) {
				t.Fatalf("step %d: policy %s %v %s selects services %v, want %v", step, id, p.ServiceRoles, p.Semantic, got, want)
			}
		}
		for id, a := range identities {
			want := []string{}
			for pid, p := range policies {
				if posture.MatchRoles(p.IdentityRoles, p.Semantic, id, a) {
					want = append(want, pid)
				}
			}
			sort.Strings(want)
			if got := g.selecting(posture.KindServicePolicy, FieldIdentityRoles, id); !slices.Equal(got, want) && len(got)+len(want) > 0 {
				t.Fatalf("step %d: identity %s %v is selected by %v, want %v", step, id, a, got, want)
			}
		}
		inUse := []string{}
		for _, a := range identities {
			inUse = append(inUse, a...)
		}
		slices.Sort(inUse)
		if got, want := g.attributes(posture.KindIdentity), slices.Compact(inUse); !slices.Equal(got, want) {
			t.Fatalf("step %d: identity attributes %v, want %v", step, got, want)
		}
	}
}

// TestEntitySetWithClashingHashes runs an entity set whose hash gives three
// values in all, so that most ids share one, against a map, through random
// sets and drops.
func TestEntitySetWithClashingHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	s := newEntitySet()
	s.hash = func(id string) uint64 { return uint64(len(id) % 3) }
	want := map[string][]string{}
	for step := range 5000 {
		id := fmt.Sprintf("e%d", r.IntN(300))
		if r.IntN(3) == 0 {
			s.drop(id)
			delete(want, id)
		} else {
			a := []string{fmt.Sprintf("a%d", r.IntN(5))}
			s.set(id, a)
			want[id] = a
		}
		if step%100 != 0 {
			continue
		}
		for i := range 300 {
			id := fmt.Sprintf("e%d", i)
			got, ok := s.attrs(id)
			if a, has := want[id]; ok != has || !slices.Equal(got, a) {
				t.Fatalf("step %d: %s has %v (%v), want %v (%v)", step, id, got, ok, a, has)
			}
		}
		var each []string
		s.each(func(id string) { each = append(each, id) })
		slices.Sort(each)
		if keys := slices.Sorted(maps.Keys(want)); !slices.Equal(each, keys) {
			t.Fatalf("step %d: each gives %v, want %v", step, each, keys)
		}
		for a := range 5 {
			attr := fmt.Sprintf("a%d", a)
			var got, exp []string
			for slot := range s.withAttr(attr) {
				got = append(got, s.ids[slot])
			}
			for id, as := range want {
				if slices.Contains(as, attr) {
					exp = append(exp, id)
				}
			}
			slices.Sort(got)
			slices.Sort(exp)
			if !slices.Equal(got, exp) {
				t.Fatalf("step %d: %s is had by %v, want %v", step, attr, got, exp)
			}
		}
	}
}
