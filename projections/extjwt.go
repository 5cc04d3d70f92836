package projections

import "github.com/seed-0809debe/posture"

// External JWT signer keys (besides the entity record):
//
//	u/external-jwt-signers/name/<name>      -> id
//	u/external-jwt-signers/issuer/<issuer>  -> id
func init() {
	onEntity(entityHooks[posture.ExternalJWTSigner]{beforeDelete: func(tx *Tx, old posture.ExternalJWTSigner) error {
		// A deleted signer is no longer trusted: the sessions of the
		// logins it verified end.
		sessions, err := listEntities[posture.APISession](tx.b, posture.KindAPISession)
		if err != nil {
			return err
		}
		for _, s := range sessions {
			if s.SignerID != old.ID {
				continue
			}
			tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, "API session ended (its external JWT signer was deleted)", nil)
			if err := deleteAPISession(tx, s.ID); err != nil {
				return err
			}
		}
		return nil
	}})
}

// ExternalJWTSigners lists every external JWT signer in id order.
func (s *Store) ExternalJWTSigners() ([]posture.ExternalJWTSigner, error) {
	return List[posture.ExternalJWTSigner](s)
}

// ExternalJWTSignerByIssuer returns the signer that trusts the issuer, or
// posture.ErrNotFound.
func (s *Store) ExternalJWTSignerByIssuer(issuer string) (posture.ExternalJWTSigner, error) {
	return byUnique[posture.ExternalJWTSigner](s.db, posture.KindExternalJWTSigner, "issuer", issuer)
}
