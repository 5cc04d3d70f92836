package projections

import "sort"

// entitySet is the entities of one kind as the role graph keeps them: ids
// numbered by slot, each slot's role attributes as attribute numbers, and
// for each attribute the set of slots that have it. Apart from the ids, it
// holds numbers only: a million identities are a few maps and arrays the
// garbage collector has no pointers to follow in, where maps of strings to
// slices and sets of strings cost it several pointers per identity at every
// collection (docs/performance.md, fifth round).
type entitySet struct {
	slots map[string]int32 // id -> slot
	ids   []string         // slot -> id (a free slot keeps "")
	spans []span           // slot -> its attribute numbers in pool
	pool  []int32          // attribute numbers of every slot, in runs
	dead  int              // entries of pool no slot uses any more
	free  []int32          // slots to reuse

	numbers map[string]int32     // attribute -> number
	names   []string             // number -> attribute
	members []map[int32]struct{} // number -> the slots with it (nil: none)
}

// span is a run of pool.
type span struct{ off, n int32 }

func newEntitySet() *entitySet {
	return &entitySet{slots: map[string]int32{}, numbers: map[string]int32{}}
}

// set records an entity with its attributes, replacing what it had.
func (s *entitySet) set(id string, attrs []string) {
	s.drop(id)
	var slot int32
	if n := len(s.free); n > 0 {
		slot, s.free = s.free[n-1], s.free[:n-1]
		s.ids[slot] = id
	} else {
		slot = int32(len(s.ids))
		s.ids = append(s.ids, id)
		s.spans = append(s.spans, span{})
	}
	s.slots[id] = slot
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
	slot, ok := s.slots[id]
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
	s.ids[slot] = ""
	s.free = append(s.free, slot)
	delete(s.slots, id)
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
	slot, ok := s.slots[id]
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
	_, ok := s.slots[id]
	return ok
}

// each calls fn for every entity, in no particular order.
func (s *entitySet) each(fn func(id string)) {
	for id := range s.slots {
		fn(id)
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
