package projections

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
)

func init() {
	on(func(tx *Tx, e posture.Event, p posture.APISessionCreated) error {
		s := p.APISession
		// A login that raced a disable (decided on a node that had not yet
		// applied it) starts no session: its token must not work once the
		// identity is enabled again.
		identity, found, err := getOld[posture.Identity](tx, posture.KindIdentity, s.IdentityID)
		if err != nil {
			return err
		}
		if found && identity.IsDisabled(e.At) {
			tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, "API session refused (identity disabled)", nil)
			return nil
		}
		// So does a login that checked a password or certificate whose
		// authenticator, or the CA that verified the certificate, was
		// deleted (revoked) before the login was recorded: the delete
		// ended the sessions there were, not this one.
		gone, err := credentialGone(tx, s)
		if err != nil {
			return err
		}
		if gone != "" {
			tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, "API session refused ("+gone+")", nil)
			return nil
		}
		if err := tx.putRaw(uniqueKey(posture.KindAPISession, "token", s.TokenHash), []byte(s.ID)); err != nil {
			return err
		}
		if err := tx.putRaw(relationKey(posture.KindIdentity, s.IdentityID, posture.KindAPISession, s.ID), nil); err != nil {
			return err
		}
		tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, "API session started ("+s.AuthMethod+")", nil)
		if err := startSessionPosture(tx, s); err != nil {
			return err
		}
		if err := putClientInfo(tx, e, s); err != nil {
			return err
		}
		if err := tx.put(entityKey(posture.KindAPISession, s.ID), s); err != nil {
			return err
		}
		return evictAPISessions(tx, s)
	})
	on(func(tx *Tx, e posture.Event, p posture.APISessionTouched) error {
		var s posture.APISession
		found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, p.ID), &s)
		if err != nil || !found || !p.At.After(s.LastActivityAt) {
			return err
		}
		s.LastActivityAt = p.At
		return tx.put(entityKey(posture.KindAPISession, s.ID), s)
	})
	on(func(tx *Tx, e posture.Event, p posture.APISessionDeleted) error {
		if found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, p.ID), &posture.APISession{}); err != nil || !found {
			return err
		}
		tx.history(p.IdentityID, p.ID, posture.HistoryAPISession, "API session ended ("+p.Reason+")", nil)
		return deleteAPISession(tx, p.ID)
	})
	on(func(tx *Tx, e posture.Event, p posture.APISessionsEnded) error {
		return deleteAPISessions(tx, p.IdentityID, p.Reason)
	})
}

// MaxAPISessions bounds an identity's API sessions: past it, a new one ends
// the least recently used others (the latest activity first, then the
// earliest id), so that a client that logs in again and again without
// logging out cannot grow what every node keeps in memory. It is part of
// the projection's rules (every node and every replay must end the same
// sessions), not a setting.
const MaxAPISessions = 128

// evictAPISessions ends the identity's API sessions beyond MaxAPISessions,
// never the one just started, and counts them (Evicted).
func evictAPISessions(tx *Tx, started posture.APISession) error {
	ids := tx.graph.sessionsOf(started.IdentityID)
	if len(ids) <= MaxAPISessions {
		return nil
	}
	others := make([]posture.APISession, 0, len(ids))
	for _, id := range ids {
		var s posture.APISession
		found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, id), &s)
		if err != nil {
			return err
		}
		if found && id != started.ID {
			others = append(others, s)
		}
	}
	slices.SortFunc(others, func(a, b posture.APISession) int {
		if c := a.LastActivityAt.Compare(b.LastActivityAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	for _, s := range others[:max(0, len(others)+1-MaxAPISessions)] {
		tx.history(s.IdentityID, s.ID, posture.HistoryAPISession, fmt.Sprintf("API session ended (the least recently used of more than %d)", MaxAPISessions), nil)
		if err := deleteAPISession(tx, s.ID); err != nil {
			return err
		}
		if tx.derived == nil { // not an overlay's
			tx.evicted.Add(1)
		}
	}
	return nil
}

// Evicted counts the API sessions this store ended since it was opened
// because their identity had more than MaxAPISessions.
func (s *Store) Evicted() uint64 { return s.evicted.Load() }

func deleteAPISession(tx *Tx, id string) error {
	var s posture.APISession
	found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, id), &s)
	if err != nil || !found {
		return err
	}
	if err := tx.del(uniqueKey(posture.KindAPISession, "token", s.TokenHash)); err != nil {
		return err
	}
	if err := endSessionCertificates(tx, id); err != nil {
		return err
	}
	if err := tx.del(relationKey(posture.KindIdentity, s.IdentityID, posture.KindAPISession, id)); err != nil {
		return err
	}
	if err := endSessionPosture(tx, id); err != nil {
		return err
	}
	return tx.del(entityKey(posture.KindAPISession, id))
}

// clientInfoKey is where the latest client report of an identity is kept:
//
//	e/identity-clients/<identityId>  posture.ClientInfo
func clientInfoKey(identityID string) []byte {
	return entityKey(posture.KindIdentityClient, identityID)
}

// putClientInfo keeps what a new API session's client reported (envInfo,
// sdkInfo) as the identity's latest; a report of neither leaves it.
func putClientInfo(tx *Tx, e posture.Event, s posture.APISession) error {
	if s.EnvInfo == nil && s.SDKInfo == nil {
		return nil
	}
	info := posture.ClientInfo{IdentityID: s.IdentityID}
	if _, err := getJSON(tx.r(), clientInfoKey(s.IdentityID), &info); err != nil {
		return err
	}
	if s.EnvInfo != nil {
		info.EnvInfo = s.EnvInfo
	}
	if s.SDKInfo != nil {
		info.SDKInfo = s.SDKInfo
	}
	info.UpdatedAt = e.At
	return tx.put(clientInfoKey(s.IdentityID), info)
}

// ClientInfo returns what the identity's clients last reported; an identity
// whose clients reported nothing has a ClientInfo with neither set.
func (s *Store) ClientInfo(identityID string) (posture.ClientInfo, error) {
	info := posture.ClientInfo{IdentityID: identityID}
	_, err := getJSON(s.r(), clientInfoKey(identityID), &info)
	return info, err
}

// HasAPISession reports whether the identity has at least one API session.
func (s *Store) HasAPISession(identityID string) (bool, error) {
	found := false
	err := scan(s.r(), relationPrefix(posture.KindIdentity, identityID, posture.KindAPISession), func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// APISession returns the API session with the id.
func (s *Store) APISession(id string) (posture.APISession, error) {
	return getEntity[posture.APISession](s.r(), posture.KindAPISession, id)
}

// APISessionByTokenHash returns the API session whose token hashes to h.
func (s *Store) APISessionByTokenHash(h string) (posture.APISession, error) {
	return byUnique[posture.APISession](s.r(), posture.KindAPISession, "token", h)
}

// APISessions lists every API session in id order.
func (s *Store) APISessions() ([]posture.APISession, error) {
	return listEntities[posture.APISession](s.db, posture.KindAPISession)
}

// IdleAPISessions lists the API sessions whose last activity is before t.
func (s *Store) IdleAPISessions(before time.Time) ([]posture.APISession, error) {
	var out []posture.APISession
	err := scanJSON(s.db, entityPrefix(posture.KindAPISession), func(a posture.APISession) bool {
		if a.LastActivityAt.Before(before) {
			out = append(out, a)
		}
		return true
	})
	return out, err
}

// credentialGone says what of an API session's credential was deleted or
// changed before the session was recorded: its authenticator (deleted, or
// changed after the login read it), the third-party CA that verified its
// certificate or the signer of its external JWT ("": none).
func credentialGone(tx *Tx, s posture.APISession) (string, error) {
	if s.AuthenticatorID != "" {
		au, found, err := getOld[posture.Authenticator](tx, posture.KindAuthenticator, s.AuthenticatorID)
		if err != nil {
			return "", err
		}
		if !found {
			return "authenticator deleted", nil
		}
		if !s.CredentialAt.IsZero() && !s.CredentialAt.Equal(au.UpdatedAt) {
			return "authenticator changed after the login read it", nil
		}
	}
	if s.SignerID != "" {
		if _, found, err := getOld[posture.ExternalJWTSigner](tx, posture.KindExternalJWTSigner, s.SignerID); err != nil {
			return "", err
		} else if !found {
			return "its external JWT signer deleted", nil
		}
	}
	if s.CAID != "" {
		if _, found, err := getOld[posture.CA](tx, posture.KindCA, s.CAID); err != nil {
			return "", err
		} else if !found {
			return "its certificate's CA deleted", nil
		}
	}
	return "", nil
}
