package projections

import (
	"fmt"
	"slices"
	"strings"

	"github.com/seed-0809debe/posture"
)

func sessionKeyIndex(s posture.Session) []byte {
	return uniqueKey(posture.KindSession, "key", sessionKey(s.APISessionID, s.Type, s.ServiceID))
}

// sessionKey is what identifies a session: one per API session, type and
// service.
func sessionKey(apiSessionID, typ, serviceID string) string {
	return apiSessionID + "|" + typ + "|" + serviceID
}

func init() {
	on(func(tx *Tx, e posture.Event, p posture.SessionCreated) error {
		s := p.Session
		var api posture.APISession
		if found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, s.APISessionID), &api); err != nil || !found {
			return err // the API session ended meanwhile: no session
		}
		// The API decided on the state it read. Another request of the API
		// session may have created the session first (it stays), and what
		// was applied since (a posture, check or policy change) may have
		// taken the grant away: neither creates a session.
		if _, found, err := getString(tx.r(), sessionKeyIndex(s)); err != nil || found {
			return err
		}
		st, _, err := loadSessionState(tx, s.APISessionID)
		if err != nil {
			return err
		}
		if !granted(tx.graph, s.IdentityID, s.ServiceID, s.Type, st.Policies) {
			sessionHistory(tx, s, "not created: no passing "+s.Type+" policy left when it was applied")
			return nil
		}
		if err := tx.putRaw(sessionKeyIndex(s), []byte(s.ID)); err != nil {
			return err
		}
		if err := tx.putRaw(relationKey(posture.KindAPISession, s.APISessionID, posture.KindSession, s.ID), nil); err != nil {
			return err
		}
		names := make([]string, len(p.Policies))
		for i, id := range p.Policies {
			names[i] = policyName(tx, id)
		}
		sessionHistory(tx, s, "created by policies "+strings.Join(names, ", "))
		if len(p.WouldDeny) > 0 {
			if err := recordWouldDeny(tx, e, p); err != nil {
				return err
			}
		}
		return tx.put(entityKey(posture.KindSession, s.ID), s)
	})
	on(func(tx *Tx, e posture.Event, p posture.SessionDeleted) error {
		var s posture.Session
		if found, err := getJSON(tx.r(), entityKey(posture.KindSession, p.ID), &s); err != nil || !found {
			return err
		}
		sessionHistory(tx, s, "deleted by the client")
		return deleteSession(tx, s)
	})
}

// sessionHistory records a session's creation or end in its identity's
// history.
func sessionHistory(tx *Tx, s posture.Session, what string) {
	service := serviceName(tx, s.ServiceID)
	summary := fmt.Sprintf("%s session %s for service %s %s", s.Type, s.ID, service, what)
	detail := map[string]string{"sessionId": s.ID, "serviceId": s.ServiceID, "type": s.Type}
	tx.history(s.IdentityID, s.APISessionID, posture.HistorySession, summary, detail)
}

func deleteSession(tx *Tx, s posture.Session) error {
	if err := tx.del(sessionKeyIndex(s)); err != nil {
		return err
	}
	if err := tx.del(relationKey(posture.KindAPISession, s.APISessionID, posture.KindSession, s.ID)); err != nil {
		return err
	}
	return tx.del(entityKey(posture.KindSession, s.ID))
}

// Session returns the session with the id.
func (s *Store) Session(id string) (posture.Session, error) {
	return getEntity[posture.Session](s.r(), posture.KindSession, id)
}

// Sessions lists every session in id order.
func (s *Store) Sessions() ([]posture.Session, error) {
	return listEntities[posture.Session](s.db, posture.KindSession)
}

// SessionFor returns the API session's session of a type for a service, if
// there is one.
func (s *Store) SessionFor(apiSessionID, typ, serviceID string) (posture.Session, error) {
	return byUnique[posture.Session](s.r(), posture.KindSession, "key", sessionKey(apiSessionID, typ, serviceID))
}

// IdentitySessions lists the sessions of an identity's API sessions, in id
// order.
func (s *Store) IdentitySessions(identityID string) ([]posture.Session, error) {
	var out []posture.Session
	for _, apiSessionID := range s.graph.sessionsOf(identityID) {
		ids, err := childIDs(s.db, posture.KindAPISession, apiSessionID, posture.KindSession)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if v, err := s.Session(id); err == nil && v.IdentityID == identityID {
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, func(a, b posture.Session) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// policyName and serviceName are an entity's name, or its id when it is
// gone. They decode the entity's own type, so that the decoded copy of a
// hot key is reused.
func policyName(tx *Tx, id string) string {
	var p posture.ServicePolicy
	return nameOr(tx, posture.KindServicePolicy, id, &p, &p.Name)
}

func serviceName(tx *Tx, id string) string {
	var s posture.Service
	return nameOr(tx, posture.KindService, id, &s, &s.Name)
}

func nameOr(tx *Tx, kind posture.Kind, id string, v any, name *string) string {
	if found, err := getJSON(tx.r(), entityKey(kind, id), v); err != nil || !found || *name == "" {
		return id
	}
	return *name
}
