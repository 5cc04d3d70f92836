package projections

import (
	"github.com/seed-0809debe/posture"
)

func init() {
	on(func(tx *Tx, e posture.Event, p posture.AuthenticatorCreated) error {
		return putAuthenticator(tx, nil, p.Authenticator)
	})
	on(func(tx *Tx, e posture.Event, p posture.AuthenticatorUpdated) error {
		var old posture.Authenticator
		found, err := getJSON(tx.b, entityKey(KindAuthenticator, p.Authenticator.ID), &old)
		if err != nil || !found {
			return err
		}
		return putAuthenticator(tx, &old, p.Authenticator)
	})
	on(func(tx *Tx, e posture.Event, p posture.AuthenticatorDeleted) error {
		return deleteAuthenticator(tx, p.ID)
	})
}

func putAuthenticator(tx *Tx, old *posture.Authenticator, a posture.Authenticator) error {
	if old != nil {
		if err := unindexAuthenticator(tx, *old); err != nil {
			return err
		}
	}
	if a.Username != "" {
		if err := tx.putRaw(uniqueKey(KindAuthenticator, "username", a.Username), []byte(a.ID)); err != nil {
			return err
		}
	}
	if a.Fingerprint != "" {
		if err := tx.putRaw(uniqueKey(KindAuthenticator, "fingerprint", a.Fingerprint), []byte(a.ID)); err != nil {
			return err
		}
	}
	if err := tx.putRaw(relationKey(KindIdentity, a.IdentityID, KindAuthenticator, a.ID), nil); err != nil {
		return err
	}
	return tx.put(entityKey(KindAuthenticator, a.ID), a)
}

func unindexAuthenticator(tx *Tx, a posture.Authenticator) error {
	if a.Username != "" {
		if err := tx.del(uniqueKey(KindAuthenticator, "username", a.Username)); err != nil {
			return err
		}
	}
	if a.Fingerprint != "" {
		if err := tx.del(uniqueKey(KindAuthenticator, "fingerprint", a.Fingerprint)); err != nil {
			return err
		}
	}
	return nil
}

func deleteAuthenticator(tx *Tx, id string) error {
	var a posture.Authenticator
	found, err := getJSON(tx.b, entityKey(KindAuthenticator, id), &a)
	if err != nil || !found {
		return err
	}
	if err := unindexAuthenticator(tx, a); err != nil {
		return err
	}
	if err := tx.del(relationKey(KindIdentity, a.IdentityID, KindAuthenticator, id)); err != nil {
		return err
	}
	return tx.del(entityKey(KindAuthenticator, id))
}

// Authenticator returns the authenticator with the id.
func (s *Store) Authenticator(id string) (posture.Authenticator, error) {
	return getEntity[posture.Authenticator](s.db, KindAuthenticator, id)
}

// AuthenticatorByUsername returns the password authenticator of a username.
func (s *Store) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	return byUnique[posture.Authenticator](s.db, KindAuthenticator, "username", username)
}

// AuthenticatorByFingerprint returns the certificate authenticator of a
// certificate fingerprint.
func (s *Store) AuthenticatorByFingerprint(fp string) (posture.Authenticator, error) {
	return byUnique[posture.Authenticator](s.db, KindAuthenticator, "fingerprint", fp)
}

// Authenticators lists every authenticator in id order.
func (s *Store) Authenticators() ([]posture.Authenticator, error) {
	return listEntities[posture.Authenticator](s.db, KindAuthenticator)
}

// IdentityAuthenticators lists the authenticators of one identity.
func (s *Store) IdentityAuthenticators(identityID string) ([]posture.Authenticator, error) {
	ids, err := childIDs(s.db, KindIdentity, identityID, KindAuthenticator)
	if err != nil {
		return nil, err
	}
	out := make([]posture.Authenticator, 0, len(ids))
	for _, id := range ids {
		a, err := s.Authenticator(id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}
