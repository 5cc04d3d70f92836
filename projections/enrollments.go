package projections

import (
	"github.com/seed-0809debe/posture"
)

// Enrollment and certificate keys (besides the entity records):
//
//	u/enrollments/tokenHash/<sha256 of the token>         -> enrollment id
//	u/enrollments/username/<username>                     -> enrollment id (updb)
//	r/identities/<id>/enrollments/<enrollmentId>          an identity's enrollments
//	e/cert-extensions/<authenticatorId>                   pending extension (posture.CertExtension)
//	r/identities/<id>/cert-extensions/<authenticatorId>   an identity's pending extensions
//	e/session-certificates/<id>                           ephemeral certificate (posture.SessionCertificate)
//	r/api-sessions/<id>/session-certificates/<certId>     an API session's certificates
//	u/edge-routers/fingerprint/<fp>                       -> router id (current client certificate)
//	u/edge-routers/enrollmentTokenHash/<sha256 of token>  -> router id (pending enrollment)
func init() {
	onEntity(entityHooks[posture.Enrollment]{})
	on(func(tx *Tx, e posture.Event, p posture.IdentityEnrolled) error {
		if p.EnrollmentID != "" {
			enr, found, err := getOld[posture.Enrollment](tx, posture.KindEnrollment, p.EnrollmentID)
			if err != nil || !found {
				// Already consumed: the token worked once.
				return err
			}
			if err := deleteEntity(tx, enr); err != nil {
				return err
			}
		}
		if p.Identity != nil && p.Identity.ID != "" {
			if err := putEntity(tx, *p.Identity); err != nil {
				return err
			}
		}
		a := p.Authenticator
		if a.ID == "" {
			return nil
		}
		if _, found, err := getOld[posture.Identity](tx, posture.KindIdentity, a.IdentityID); err != nil || !found {
			return err
		}
		if err := credential(tx, a.IdentityID, authenticatorName(a)+" created by enrollment ("+p.Method+")"); err != nil {
			return err
		}
		return putEntity(tx, a)
	})
	on(func(tx *Tx, e posture.Event, p posture.CertExtended) error {
		x := p.Extension
		if _, found, err := getOld[posture.Authenticator](tx, posture.KindAuthenticator, x.AuthenticatorID); err != nil || !found {
			return err
		}
		if err := tx.putRaw(relationKey(posture.KindIdentity, x.IdentityID, posture.KindCertExtension, x.AuthenticatorID), nil); err != nil {
			return err
		}
		return tx.put(entityKey(posture.KindCertExtension, x.AuthenticatorID), x)
	})
	on(func(tx *Tx, e posture.Event, p posture.CertExtensionVerified) error {
		var x posture.CertExtension
		found, err := getJSON(tx.r(), entityKey(posture.KindCertExtension, p.AuthenticatorID), &x)
		if err != nil || !found || x.Fingerprint != p.Fingerprint {
			return err
		}
		a, found, err := getOld[posture.Authenticator](tx, posture.KindAuthenticator, p.AuthenticatorID)
		if err != nil {
			return err
		}
		if err := dropCertExtension(tx, x.IdentityID, x.AuthenticatorID); err != nil || !found {
			return err
		}
		a.CertPEM, a.Fingerprint, a.UpdatedAt = x.CertPEM, x.Fingerprint, e.At
		if err := credential(tx, a.IdentityID, authenticatorName(a)+" changed: certificate extended"); err != nil {
			return err
		}
		return putEntity(tx, a)
	})
	on(func(tx *Tx, e posture.Event, p posture.RouterEnrolled) error {
		r, found, err := getOld[posture.EdgeRouter](tx, posture.KindEdgeRouter, p.RouterID)
		if err != nil || !found || r.LookupHash() == "" || r.LookupHash() != p.LookupHash() {
			return err
		}
		r.RouterEnrollment = posture.RouterEnrollment{
			IsVerified: true, Fingerprint: p.Fingerprint, CertPEM: p.CertPEM, ServerFingerprint: p.ServerFingerprint,
		}
		r.UpdatedAt = e.At
		return putEntity(tx, r)
	})
	on(func(tx *Tx, e posture.Event, p posture.RouterCertificatesRenewed) error {
		r, found, err := getOld[posture.EdgeRouter](tx, posture.KindEdgeRouter, p.RouterID)
		if err != nil || !found || !r.IsVerified || r.Fingerprint != p.PreviousFingerprint {
			return err
		}
		r.Fingerprint, r.CertPEM, r.ServerFingerprint = p.Fingerprint, p.CertPEM, p.ServerFingerprint
		r.UpdatedAt = e.At
		return putEntity(tx, r)
	})
	on(func(tx *Tx, e posture.Event, p posture.SessionCertificateCreated) error {
		c := p.Certificate
		if c.ID == "" {
			return nil
		}
		var s posture.APISession
		found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, c.APISessionID), &s)
		if err != nil || !found {
			// The API session ended first: its certificates are gone too.
			return err
		}
		if err := tx.putRaw(relationKey(posture.KindAPISession, c.APISessionID, posture.KindSessionCertificate, c.ID), nil); err != nil {
			return err
		}
		return tx.put(entityKey(posture.KindSessionCertificate, c.ID), c)
	})
	on(func(tx *Tx, e posture.Event, p posture.SessionCertificateDeleted) error {
		return deleteSessionCertificate(tx, p.APISessionID, p.ID)
	})
}

func deleteSessionCertificate(tx *Tx, apiSessionID, id string) error {
	if id == "" {
		return nil
	}
	if err := tx.del(relationKey(posture.KindAPISession, apiSessionID, posture.KindSessionCertificate, id)); err != nil {
		return err
	}
	return tx.del(entityKey(posture.KindSessionCertificate, id))
}

// endSessionCertificates removes the ephemeral certificates of an API
// session that ends.
func endSessionCertificates(tx *Tx, apiSessionID string) error {
	ids, err := childIDs(tx.b, posture.KindAPISession, apiSessionID, posture.KindSessionCertificate)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := deleteSessionCertificate(tx, apiSessionID, id); err != nil {
			return err
		}
	}
	return nil
}

func dropCertExtension(tx *Tx, identityID, authenticatorID string) error {
	if err := tx.del(relationKey(posture.KindIdentity, identityID, posture.KindCertExtension, authenticatorID)); err != nil {
		return err
	}
	return tx.del(entityKey(posture.KindCertExtension, authenticatorID))
}

// dropAuthenticatorExtension removes the pending extension of a deleted
// authenticator.
func dropAuthenticatorExtension(tx *Tx, a posture.Authenticator) error {
	return dropCertExtension(tx, a.IdentityID, a.ID)
}

// deleteIdentityEnrollments removes the enrollments and pending certificate
// extensions of a deleted identity.
func deleteIdentityEnrollments(tx *Tx, identityID string) error {
	if err := deleteChildren[posture.Enrollment](tx, posture.KindIdentity, identityID); err != nil {
		return err
	}
	ids, err := childIDs(tx.b, posture.KindIdentity, identityID, posture.KindCertExtension)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := dropCertExtension(tx, identityID, id); err != nil {
			return err
		}
	}
	return nil
}

// Enrollment returns the enrollment with the id.
func (s *Store) Enrollment(id string) (posture.Enrollment, error) {
	return Get[posture.Enrollment](s, id)
}

// EnrollmentByToken returns the enrollment with the one-time token (found
// by its hash).
func (s *Store) EnrollmentByToken(token string) (posture.Enrollment, error) {
	return byUnique[posture.Enrollment](s.r(), posture.KindEnrollment, "tokenHash", posture.HashToken(token))
}

// EnrollmentByUsername returns the updb enrollment that presets the
// username.
func (s *Store) EnrollmentByUsername(username string) (posture.Enrollment, error) {
	return byUnique[posture.Enrollment](s.r(), posture.KindEnrollment, "username", username)
}

// IdentityEnrollments lists the enrollments of one identity.
func (s *Store) IdentityEnrollments(identityID string) ([]posture.Enrollment, error) {
	ids, err := childIDs(s.db, posture.KindIdentity, identityID, posture.KindEnrollment)
	if err != nil {
		return nil, err
	}
	out := make([]posture.Enrollment, 0, len(ids))
	for _, id := range ids {
		e, err := s.Enrollment(id)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// CertExtension returns the pending extension of a cert authenticator.
func (s *Store) CertExtension(authenticatorID string) (posture.CertExtension, error) {
	return getEntity[posture.CertExtension](s.db, posture.KindCertExtension, authenticatorID)
}

// EdgeRouter returns the edge router with the id.
func (s *Store) EdgeRouter(id string) (posture.EdgeRouter, error) {
	return Get[posture.EdgeRouter](s, id)
}

// EdgeRouterByEnrollmentToken returns the edge router whose pending
// enrollment has the token.
func (s *Store) EdgeRouterByEnrollmentToken(token string) (posture.EdgeRouter, error) {
	return byUnique[posture.EdgeRouter](s.r(), posture.KindEdgeRouter, "enrollmentTokenHash", posture.HashToken(token))
}

// EdgeRouterByFingerprint returns the edge router whose current client
// certificate has the fingerprint.
func (s *Store) EdgeRouterByFingerprint(fp string) (posture.EdgeRouter, error) {
	return byUnique[posture.EdgeRouter](s.r(), posture.KindEdgeRouter, "fingerprint", fp)
}

// SessionCertificate returns the ephemeral certificate with the id.
func (s *Store) SessionCertificate(id string) (posture.SessionCertificate, error) {
	return getEntity[posture.SessionCertificate](s.db, posture.KindSessionCertificate, id)
}

// SessionCertificates lists the ephemeral certificates of an API session.
func (s *Store) SessionCertificates(apiSessionID string) ([]posture.SessionCertificate, error) {
	ids, err := childIDs(s.db, posture.KindAPISession, apiSessionID, posture.KindSessionCertificate)
	if err != nil {
		return nil, err
	}
	out := make([]posture.SessionCertificate, 0, len(ids))
	for _, id := range ids {
		c, err := s.SessionCertificate(id)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}
