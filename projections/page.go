package projections

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/seed-0809debe/posture"
)

// Page reads at most limit entities of a kind in id order, starting after
// the id (""; from the first). It reads the page and no more, so that a
// listing of a large fleet does not scan it.
func Page[T posture.Entity](s *Store, after string, limit int) ([]T, error) {
	var zero T
	prefix := entityPrefix(zero.EntityKind())
	lower := prefix
	if after != "" {
		lower = append(entityKey(zero.EntityKind(), after), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := make([]T, 0, min(limit, 1024))
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		var v T
		if err := unmarshal(it.Value(), &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", it.Key(), err)
		}
		out = append(out, v)
	}
	return out, it.Error()
}

// IdentityPage reads a page of identities (see Page).
func (s *Store) IdentityPage(after string, limit int) ([]posture.Identity, error) {
	return Page[posture.Identity](s, after, limit)
}

// Checks reads every posture check, in id order.
func (s *Store) Checks() ([]posture.Check, error) { return List[posture.Check](s) }

// Service reads the service with the id.
func (s *Store) Service(id string) (posture.Service, error) { return Get[posture.Service](s, id) }
