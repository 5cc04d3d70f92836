package projections

import (
	"github.com/seed-0809debe/posture"
)

func init() {
	on(func(tx *Tx, e posture.Event, p posture.IdentityCreated) error {
		return putIdentity(tx, nil, p.Identity)
	})
	on(func(tx *Tx, e posture.Event, p posture.IdentityUpdated) error {
		var old posture.Identity
		found, err := getJSON(tx.b, entityKey(KindIdentity, p.Identity.ID), &old)
		if err != nil || !found {
			return err // an update of a deleted identity changes nothing
		}
		return putIdentity(tx, &old, p.Identity)
	})
	on(func(tx *Tx, e posture.Event, p posture.IdentityDeleted) error {
		var old posture.Identity
		found, err := getJSON(tx.b, entityKey(KindIdentity, p.ID), &old)
		if err != nil || !found {
			return err
		}
		auths, err := childIDs(tx.b, KindIdentity, p.ID, KindAuthenticator)
		if err != nil {
			return err
		}
		for _, id := range auths {
			if err := deleteAuthenticator(tx, id); err != nil {
				return err
			}
		}
		sessions, err := childIDs(tx.b, KindIdentity, p.ID, KindAPISession)
		if err != nil {
			return err
		}
		for _, id := range sessions {
			if err := deleteAPISession(tx, id); err != nil {
				return err
			}
		}
		if err := tx.del(uniqueKey(KindIdentity, "name", old.Name)); err != nil {
			return err
		}
		return tx.del(entityKey(KindIdentity, p.ID))
	})
}

func putIdentity(tx *Tx, old *posture.Identity, id posture.Identity) error {
	if old != nil && old.Name != id.Name {
		if err := tx.del(uniqueKey(KindIdentity, "name", old.Name)); err != nil {
			return err
		}
	}
	if err := tx.putRaw(uniqueKey(KindIdentity, "name", id.Name), []byte(id.ID)); err != nil {
		return err
	}
	return tx.put(entityKey(KindIdentity, id.ID), id)
}

// Identity returns the identity with the id.
func (s *Store) Identity(id string) (posture.Identity, error) {
	return getEntity[posture.Identity](s.db, KindIdentity, id)
}

// IdentityByName returns the identity with the name.
func (s *Store) IdentityByName(name string) (posture.Identity, error) {
	return byUnique[posture.Identity](s.db, KindIdentity, "name", name)
}

// Identities lists every identity in id order.
func (s *Store) Identities() ([]posture.Identity, error) {
	return listEntities[posture.Identity](s.db, KindIdentity)
}

// getEntity reads an entity or returns posture.ErrNotFound.
func getEntity[T any](r reader, kind, id string) (T, error) {
	var v T
	found, err := getJSON(r, entityKey(kind, id), &v)
	if err == nil && !found {
		err = posture.ErrNotFound
	}
	return v, err
}

// byUnique reads the entity that a unique index points to.
func byUnique[T any](r reader, kind, index, value string) (T, error) {
	id, found, err := getString(r, uniqueKey(kind, index, value))
	if err != nil || !found {
		var zero T
		if err == nil {
			err = posture.ErrNotFound
		}
		return zero, err
	}
	return getEntity[T](r, kind, id)
}

// listEntities lists every entity of a kind in id order.
func listEntities[T any](r reader, kind string) ([]T, error) {
	var out []T
	err := scanJSON(r, entityPrefix(kind), func(v T) bool {
		out = append(out, v)
		return true
	})
	return out, err
}
