package projections

import (
	"errors"
	"strings"

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
