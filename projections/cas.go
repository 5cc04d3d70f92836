package projections

import "github.com/seed-0809debe/posture"

// CA keys (besides the entity record):
//
//	u/cas/name/<name>                -> id
//	u/cas/fingerprint/<fingerprint>  -> id
func init() {
	onEntity(entityHooks[posture.CA]{beforeDelete: func(tx *Tx, old posture.CA) error {
		// ottca enrollments of a deleted CA can never complete.
		enrollments, err := listEntities[posture.Enrollment](tx.b, posture.KindEnrollment)
		if err != nil {
			return err
		}
		for _, e := range enrollments {
			if e.CAID == old.ID {
				if err := deleteEntity(tx, e); err != nil {
					return err
				}
			}
		}
		return nil
	}})
	on(func(tx *Tx, e posture.Event, p posture.CAVerified) error {
		ca, found, err := getOld[posture.CA](tx, posture.KindCA, p.ID)
		if err != nil || !found || ca.IsVerified {
			return err
		}
		ca.IsVerified, ca.UpdatedAt = true, e.At
		return putEntity(tx, ca)
	})
}

// CA returns the CA with the id.
func (s *Store) CA(id string) (posture.CA, error) { return Get[posture.CA](s, id) }

// CAs lists every CA in id order.
func (s *Store) CAs() ([]posture.CA, error) { return List[posture.CA](s) }
