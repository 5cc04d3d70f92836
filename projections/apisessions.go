package projections

import (
	"time"

	"github.com/seed-0809debe/posture"
)

func init() {
	on(func(tx *Tx, e posture.Event, p posture.APISessionCreated) error {
		s := p.APISession
		if err := tx.putRaw(uniqueKey(KindAPISession, "token", s.TokenHash), []byte(s.ID)); err != nil {
			return err
		}
		if err := tx.putRaw(relationKey(posture.KindIdentity, s.IdentityID, KindAPISession, s.ID), nil); err != nil {
			return err
		}
		tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, "API session started ("+s.AuthMethod+")", nil)
		if err := startSessionPosture(tx, s); err != nil {
			return err
		}
		return tx.put(entityKey(KindAPISession, s.ID), s)
	})
	on(func(tx *Tx, e posture.Event, p posture.APISessionTouched) error {
		var s posture.APISession
		found, err := getJSON(tx.r(), entityKey(KindAPISession, p.ID), &s)
		if err != nil || !found || !p.At.After(s.LastActivityAt) {
			return err
		}
		s.LastActivityAt = p.At
		return tx.put(entityKey(KindAPISession, s.ID), s)
	})
	on(func(tx *Tx, e posture.Event, p posture.APISessionDeleted) error {
		if found, err := getJSON(tx.r(), entityKey(KindAPISession, p.ID), &posture.APISession{}); err != nil || !found {
			return err
		}
		tx.history(p.IdentityID, p.ID, posture.HistoryAPISession, "API session ended ("+p.Reason+")", nil)
		return deleteAPISession(tx, p.ID)
	})
}

func deleteAPISession(tx *Tx, id string) error {
	var s posture.APISession
	found, err := getJSON(tx.r(), entityKey(KindAPISession, id), &s)
	if err != nil || !found {
		return err
	}
	if err := tx.del(uniqueKey(KindAPISession, "token", s.TokenHash)); err != nil {
		return err
	}
	if err := endSessionCertificates(tx, id); err != nil {
		return err
	}
	if err := tx.del(relationKey(posture.KindIdentity, s.IdentityID, KindAPISession, id)); err != nil {
		return err
	}
	if err := endSessionPosture(tx, id); err != nil {
		return err
	}
	return tx.del(entityKey(KindAPISession, id))
}

// APISession returns the API session with the id.
func (s *Store) APISession(id string) (posture.APISession, error) {
	return getEntity[posture.APISession](s.r(), KindAPISession, id)
}

// APISessionByTokenHash returns the API session whose token hashes to h.
func (s *Store) APISessionByTokenHash(h string) (posture.APISession, error) {
	return byUnique[posture.APISession](s.r(), KindAPISession, "token", h)
}

// APISessions lists every API session in id order.
func (s *Store) APISessions() ([]posture.APISession, error) {
	return listEntities[posture.APISession](s.db, KindAPISession)
}

// IdleAPISessions lists the API sessions whose last activity is before t.
func (s *Store) IdleAPISessions(before time.Time) ([]posture.APISession, error) {
	var out []posture.APISession
	err := scanJSON(s.db, entityPrefix(KindAPISession), func(a posture.APISession) bool {
		if a.LastActivityAt.Before(before) {
			out = append(out, a)
		}
		return true
	})
	return out, err
}
