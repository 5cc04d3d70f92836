package projections

import "github.com/seed-0809debe/posture"

// External JWT signer keys (besides the entity record):
//
//	u/external-jwt-signers/name/<name>      -> id
//	u/external-jwt-signers/issuer/<issuer>  -> id
func init() {
	onEntity(entityHooks[posture.ExternalJWTSigner]{})
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
