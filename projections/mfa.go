package projections

import (
	"slices"

	"github.com/seed-0809debe/posture"
)

// MFA keys:
//
//	e/mfa/<identityId>  the identity's enrollment (posture.MFA)
func mfaKey(identityID string) []byte { return entityKey(posture.KindMFA, identityID) }

func init() {
	on(func(tx *Tx, e posture.Event, p posture.MFAEnrolled) error {
		m := p.MFA
		if m.IdentityID == "" {
			return nil
		}
		if _, found, err := getOld[posture.Identity](tx, posture.KindIdentity, m.IdentityID); err != nil || !found {
			return err
		}
		if m.RecoveryCodes == nil {
			m.RecoveryCodes = []string{}
		}
		m.Verified = false
		m.CreatedAt, m.UpdatedAt = e.At, e.At
		if err := credential(tx, m.IdentityID, "MFA enrollment started"); err != nil {
			return err
		}
		return tx.put(mfaKey(m.IdentityID), m)
	})
	on(func(tx *Tx, e posture.Event, p posture.MFAVerified) error {
		return changeMFA(tx, e, p.IdentityID, p.Used, "MFA enrolled (verified with a code)", func(m *posture.MFA) { m.Verified = true })
	})
	on(func(tx *Tx, e posture.Event, p posture.MFACodeUsed) error {
		return changeMFA(tx, e, p.IdentityID, p.Used, "", nil)
	})
	on(func(tx *Tx, e posture.Event, p posture.MFARecoveryCodesReplaced) error {
		return changeMFA(tx, e, p.IdentityID, p.Used, "MFA recovery codes replaced", func(m *posture.MFA) {
			m.RecoveryNonceSealed, m.RecoveryNonce = p.RecoveryNonceSealed, p.RecoveryNonce
			m.RecoveryCodes = slices.Clone(p.RecoveryCodes)
			if m.RecoveryCodes == nil {
				m.RecoveryCodes = []string{}
			}
		})
	})
	on(func(tx *Tx, e posture.Event, p posture.MFARemoved) error {
		if p.IdentityID == "" {
			return nil
		}
		if found, err := getJSON(tx.r(), mfaKey(p.IdentityID), new(posture.MFA)); err != nil {
			return err
		} else if found {
			what := "MFA removed"
			if tx.event.Actor == "" { // who it was: the actor says better
				what += " (by the " + p.By + ")"
			}
			if err := credential(tx, p.IdentityID, what); err != nil {
				return err
			}
		}
		if err := deleteMFA(tx, p.IdentityID); err != nil {
			return err
		}
		// The identity's API sessions lose their MFA posture (implemented
		// with the posture projection).
		return clearMFAPosture(tx, p.IdentityID)
	})
}

// changeMFA consumes a code of an enrollment and applies f to it, and
// records what in the identity's history when it is a change of its
// credentials. A change of a missing enrollment changes nothing.
func changeMFA(tx *Tx, e posture.Event, identityID string, used posture.MFACode, what string, f func(*posture.MFA)) error {
	if identityID == "" {
		return nil
	}
	var m posture.MFA
	found, err := getJSON(tx.r(), mfaKey(identityID), &m)
	if err != nil || !found {
		return err
	}
	if what != "" {
		if err := credential(tx, identityID, what); err != nil {
			return err
		}
	}
	if used.Counter > m.LastCounter {
		m.LastCounter, m.LastCounterAPISession = used.Counter, used.APISessionID
	}
	if used.RecoveryHash != "" {
		m.RecoveryCodes = slices.DeleteFunc(m.RecoveryCodes, func(h string) bool { return h == used.RecoveryHash })
	}
	if f != nil {
		f(&m)
	}
	m.UpdatedAt = e.At
	return tx.put(mfaKey(identityID), m)
}

// deleteMFA removes an identity's enrollment (MFA removed, identity deleted).
func deleteMFA(tx *Tx, identityID string) error { return tx.del(mfaKey(identityID)) }

// MFA returns the identity's MFA enrollment, or posture.ErrNotFound.
func (s *Store) MFA(identityID string) (posture.MFA, error) {
	return getEntity[posture.MFA](s.db, posture.KindMFA, identityID)
}
