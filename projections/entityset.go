package projections

import (
	"hash/maphash"
	"sort"
)

// entitySet is the entities of one kind as the role graph keeps them: ids
// numbered by slot, each slot's role attributes as attribute numbers, and
// for each attribute the set of slots that have it. Apart from the ids, it
// holds numbers only: a million identities are a few maps and arrays the
// garbage collector has no pointers to follow in, where maps of strings to
// slices and sets of strings cost it several pointers per identity at every
// collection (docs/performance.md, fifth round). Even an id's slot is found
// through a hash of the id, checked against ids.
type entitySet struct {
	byHash map[uint64]int32 // hash of an id -> its slot, for the first id with that hash
	clash  map[string]int32 // id -> slot, for an id whose hash another id had first
	hash   func(id string) uint64
	ids    []string // slot -> id
	used   []bool   // slot -> whether an entity has it
	spans  []span   // slot -> its attribute numbers in pool
	pool   []int32  // attribute numbers of every slot, in runs
	dead   int      // entries of pool no slot uses any more
	free   []int32  // slots to reuse

	numbers map[string]int32     // attribute -> number
	names   []string             // number -> attribute
	members []map[int32]struct{} // number -> the slots with it (nil: none)
}

// span is a run of pool.
type span struct{ off, n int32 }

func newEntitySet() *entitySet {
	seed := maphash.MakeSeed()
	return &entitySet{
		byHash: map[uint64]int32{}, clash: map[string]int32{},
		hash:    func(id string) uint64 { return maphash.String(seed, id) },
		numbers: map[string]int32{},
	}
}

// slot finds an entity's slot.
func (s *entitySet) slot(id string) (int32, bool) {
	if slot, ok := s.byHash[s.hash(id)]; ok && s.ids[slot] == id {
		return slot, true
	}
	slot, ok := s.clash[id]
	return slot, ok
}

// index makes an entity's slot found by its id.
func (s *entitySet) index(id string, slot int32) {
	h := s.hash(id)
	if _, taken := s.byHash[h]; taken {
		s.clash[id] = slot
		return
	}
	s.byHash[h] = slot
}

// unindex forgets an entity's slot. An id of the same hash in clash stays
// found there.
func (s *entitySet) unindex(id string, slot int32) {
	h := s.hash(id)
	if at, ok := s.byHash[h]; ok && at == slot {
		delete(s.byHash, h)
		return
	}
	delete(s.clash, id)
}

// set records an entity with its attributes, replacing what it had.
func (s *entitySet) set(id string, attrs []string) {
	s.drop(id)
	var slot int32
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
		s.ids[slot], s.used[slot] = id, true
	} else {
		slot = int32(len(s.ids))
		s.ids, s.used = append(s.ids, id), append(s.used, true)
		s.spans = append(s.spans, span{})
	}
	s.index(id, slot)
	s.spans[slot] = span{int32(len(s.pool)), int32(len(attrs))}
	for _, a := range attrs {
		n, ok := s.numbers[a]
		if !ok {
			n = int32(len(s.names))
			s.numbers[a] = n
			s.names = append(s.names, a)
			s.members = append(s.members, nil)
		}
		s.pool = append(s.pool, n)
		if s.members[n] == nil {
			s.members[n] = map[int32]struct{}{}
		}
		s.members[n][slot] = struct{}{}
	}
}

// drop forgets an entity.
func (s *entitySet) drop(id string) {
	slot, ok := s.slot(id)
	if !ok {
		return
	}
	for _, n := range s.attrNumbers(slot) {
		delete(s.members[n], slot) // an attribute named twice is deleted once
		if len(s.members[n]) == 0 {
			s.members[n] = nil
		}
	}
	s.dead += int(s.spans[slot].n)
	s.spans[slot] = span{}
	s.unindex(id, slot)
	s.ids[slot], s.used[slot] = "", false
	s.free = append(s.free, slot)
	if s.dead > 1024 && s.dead > len(s.pool)/2 {
		s.compact()
	}
}

// compact rewrites pool without the runs of dropped or replaced entities.
func (s *entitySet) compact() {
	pool := make([]int32, 0, len(s.pool)-s.dead)
	for slot, sp := range s.spans {
		run := s.pool[sp.off : sp.off+sp.n]
		s.spans[slot] = span{int32(len(pool)), sp.n}
		pool = append(pool, run...)
	}
	s.pool, s.dead = pool, 0
}

func (s *entitySet) attrNumbers(slot int32) []int32 {
	sp := s.spans[slot]
	return s.pool[sp.off : sp.off+sp.n]
}

// attrs returns an entity's attributes, as it was given them, and whether
// it exists.
func (s *entitySet) attrs(id string) ([]string, bool) {
	slot, ok := s.slot(id)
	if !ok {
		return nil, false
	}
	nums := s.attrNumbers(slot)
	out := make([]string, len(nums))
	for i, n := range nums {
		out[i] = s.names[n]
	}
	return out, true
}

func (s *entitySet) has(id string) bool {
	_, ok := s.slot(id)
	return ok
}

// each calls fn for every entity, in no particular order.
func (s *entitySet) each(fn func(id string)) {
	for slot, id := range s.ids {
		if s.used[slot] {
			fn(id)
		}
	}
}

// withAttr is the set of slots with an attribute (nil: none).
func (s *entitySet) withAttr(a string) map[int32]struct{} {
	n, ok := s.numbers[a]
	if !ok {
		return nil
	}
	return s.members[n]
}

// attributes lists, sorted, the attributes some entity has.
func (s *entitySet) attributes() []string {
	out := []string{}
	for n, m := range s.members {
		if m != nil {
			out = append(out, s.names[n])
		}
	}
	sort.Strings(out)
	return out
}
