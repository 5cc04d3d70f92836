package projections

import (
	"errors"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/seed-0809debe/posture"
)

// IdentitiesByNamePrefix reads at most limit identities whose name starts
// with prefix, in name order, from the unique name index (the keys
// u/identities/name/<name>): it reads the matches and no more, so that a
// search of a large fleet does not scan it. An identity deleted or renamed
// between the index's read and its own is left out.
func (s *Store) IdentitiesByNamePrefix(prefix string, limit int) ([]posture.Identity, error) {
	if limit <= 0 {
		return nil, nil
	}
	r := s.r()
	var ids []string
	err := scan(r, uniqueKey(posture.KindIdentity, "name", prefix), func(_, value []byte) (bool, error) {
		ids = append(ids, string(value))
		return len(ids) < limit, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]posture.Identity, 0, len(ids))
	for _, id := range ids {
		v, err := getEntity[posture.Identity](r, posture.KindIdentity, id)
		if errors.Is(err, posture.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if strings.HasPrefix(v.Name, prefix) {
			out = append(out, v)
		}
	}
	return out, nil
}

// IdentityPage reads at most limit identities in name order, starting
// after the name ("": from the first), through the name index: it reads
// the page and no more, so that a listing of a large fleet does not scan
// it. The index and the identities are read at one cursor, so that each
// identity listed has the name it is listed under.
func (s *Store) IdentityPage(afterName string, limit int) ([]posture.Identity, error) {
	prefix := uniqueKey(posture.KindIdentity, "name", "")
	lower := prefix
	if afterName != "" {
		lower = append(uniqueKey(posture.KindIdentity, "name", afterName), 0)
	}
	var out []posture.Identity
	err := s.view(func(r reader) error {
		it, err := r.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
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
