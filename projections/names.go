package projections

import (
	"errors"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-0809debe/posture"
)

// IdentitiesByNamePrefix reads at most limit identities whose name starts
// with prefix, in name order, from the unique name index (the keys
// u/identities/name/<name>): it reads the matches and no more, so that a
// search of a large fleet does not scan it.
func (s *Store) IdentitiesByNamePrefix(prefix string, limit int) ([]posture.Identity, error) {
	lower := uniqueKey(posture.KindIdentity, "name", prefix)
	return s.identitiesByName(lower, prefixEnd(lower), limit)
}

// IdentityPage reads at most limit identities in name order, starting
// after the name ("": from the first), through the name index: it reads
// the page and no more, so that a listing of a large fleet does not scan
// it.
func (s *Store) IdentityPage(afterName string, limit int) ([]posture.Identity, error) {
	prefix := uniqueKey(posture.KindIdentity, "name", "")
	lower := prefix
	if afterName != "" {
		lower = append(uniqueKey(posture.KindIdentity, "name", afterName), 0)
	}
	return s.identitiesByName(lower, prefixEnd(prefix), limit)
}

// identitiesByName reads at most limit identities whose name index keys
// are in [lower, upper), in name order. The index and the identities are
// read at one cursor, so that each identity listed has the name it is
// listed under.
func (s *Store) identitiesByName(lower, upper []byte, limit int) ([]posture.Identity, error) {
	var out []posture.Identity
	err := s.view(func(r reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
			v, err := getEntity[posture.Identity](r, posture.KindIdentity, string(it.Value()))
			if errors.Is(err, posture.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return it.Error()
	})
	return out, err
}
