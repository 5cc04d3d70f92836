package projections

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-0809debe/posture"
)

// kv is a secondary key of an entity and its value.
type kv struct {
	key   []byte
	value []byte
}

// secondaryKeys lists the index and relation keys an entity owns: unique
// indexes (name, username, fingerprint) point to its id; relations link it
// to its parent.
func secondaryKeys(e posture.Entity) []kv {
	id := []byte(e.EntityID())
	kind := e.EntityKind()
	var out []kv
	unique := func(index, value string) {
		if value != "" {
			out = append(out, kv{uniqueKey(kind, index, value), id})
		}
	}
	switch v := e.(type) {
	case posture.Identity:
		unique("name", v.Name)
		unique("externalId", v.ExternalID)
	case posture.Authenticator:
		unique("username", v.Username)
		unique("fingerprint", v.Fingerprint)
		out = append(out, kv{relationKey(posture.KindIdentity, v.IdentityID, kind, v.ID), nil})
	case posture.Check:
		unique("name", v.Name)
		if k, ok := enforceIndex(v); ok {
			out = append(out, kv{k, nil})
		}
	case posture.Service:
		unique("name", v.Name)
		for _, c := range v.Configs {
			out = append(out, kv{relationKey(posture.KindConfig, c, kind, v.ID), nil})
		}
	case posture.Config:
		unique("name", v.Name)
		out = append(out, kv{relationKey(posture.KindConfigType, v.ConfigTypeID, kind, v.ID), nil})
	case posture.ConfigType:
		unique("name", v.Name)
	case posture.ServicePolicy:
		unique("name", v.Name)
	case posture.EdgeRouter:
		unique("name", v.Name)
		unique("fingerprint", v.Fingerprint)
		unique("enrollmentTokenHash", v.LookupHash())
	case posture.EdgeRouterPolicy:
		unique("name", v.Name)
	case posture.ServiceEdgeRouterPolicy:
		unique("name", v.Name)
	case posture.ExternalJWTSigner:
		unique("name", v.Name)
		unique("issuer", v.Issuer)
	case posture.Webhook:
		unique("name", v.Name)
	case posture.CA:
		unique("name", v.Name)
		unique("fingerprint", v.Fingerprint)
	case posture.Enrollment:
		unique("tokenHash", v.LookupHash())
		unique("username", v.Username)
		out = append(out, kv{relationKey(posture.KindIdentity, v.IdentityID, kind, v.ID), nil})
	}
	return out
}

// entityHooks are a kind's side effects beyond storing the record.
type entityHooks[T posture.Entity] struct {
	// afterCreate runs once a new record is stored.
	afterCreate func(tx *Tx, created T) error
	// afterUpdate runs once the new record is stored, before the API
	// sessions it may touch are re-evaluated.
	afterUpdate func(tx *Tx, old, updated T) error
	// beforeDelete runs with the old record before it is removed.
	beforeDelete func(tx *Tx, old T) error
}

// onEntity registers the created, updated and deleted handlers of a kind.
// An update or delete of a missing entity changes nothing.
func onEntity[T posture.Entity](h entityHooks[T]) {
	on(func(tx *Tx, e posture.Event, p posture.Created[T]) error {
		before := tx.graph.identitySelectors(p.Entity.EntityKind(), p.Entity.EntityID())
		if err := putEntity(tx, p.Entity); err != nil {
			return err
		}
		if h.afterCreate != nil {
			if err := h.afterCreate(tx, p.Entity); err != nil {
				return err
			}
		}
		return reevaluateChange(tx, p.Entity.EntityKind(), p.Entity.EntityID(), before)
	})
	on(func(tx *Tx, e posture.Event, p posture.Updated[T]) error {
		old, found, err := getOld[T](tx, p.Entity.EntityKind(), p.Entity.EntityID())
		if err != nil || !found {
			return err
		}
		before := tx.graph.identitySelectors(p.Entity.EntityKind(), p.Entity.EntityID())
		if err := putEntity(tx, p.Entity); err != nil {
			return err
		}
		if h.afterUpdate != nil {
			if err := h.afterUpdate(tx, old, p.Entity); err != nil {
				return err
			}
		}
		return reevaluateChange(tx, p.Entity.EntityKind(), p.Entity.EntityID(), before)
	})
	on(func(tx *Tx, e posture.Event, p posture.Deleted[T]) error {
		var zero T
		kind := zero.EntityKind()
		old, found, err := getOld[T](tx, kind, p.ID)
		if err != nil || !found {
			return err
		}
		if h.beforeDelete != nil {
			if err := h.beforeDelete(tx, old); err != nil {
				return err
			}
		}
		before := tx.graph.identitySelectors(kind, p.ID)
		if err := deleteEntity(tx, old); err != nil {
			return err
		}
		return reevaluateChange(tx, kind, p.ID, before)
	})
}

// reevaluateChange re-evaluates the API sessions of the identities that a
// change of a check, a policy, a service or an identity may touch: those
// selected by the policies involved before or after the change.
func reevaluateChange(tx *Tx, kind posture.Kind, id string, before []selector) error {
	switch kind {
	case posture.KindIdentity:
		return reevaluate(tx, id, tx.graph.sessionsOf(id), tx.event.At, true)
	case posture.KindCheck, posture.KindServicePolicy, posture.KindService:
		selectors := append(before, tx.graph.identitySelectors(kind, id)...)
		if len(selectors) == 0 {
			return nil
		}
		return reevaluateAll(tx, tx.event.At, func(identityID string) bool {
			return tx.graph.selectedByAny(selectors, identityID)
		})
	}
	return nil
}

func getOld[T posture.Entity](tx *Tx, kind posture.Kind, id string) (T, bool, error) {
	var old T
	found, err := getJSON(tx.r(), entityKey(kind, id), &old)
	return old, found, err
}

// putEntity stores a record, replacing its secondary keys, and updates the
// role graph.
func putEntity[T posture.Entity](tx *Tx, e T) error {
	kind, id := e.EntityKind(), e.EntityID()
	old, found, err := getOld[T](tx, kind, id)
	if err != nil {
		return err
	}
	if found {
		for _, k := range secondaryKeys(old) {
			if err := tx.del(k.key); err != nil {
				return err
			}
		}
	}
	for _, k := range secondaryKeys(e) {
		if err := tx.putRaw(k.key, k.value); err != nil {
			return err
		}
	}
	tx.graph.put(e)
	return tx.put(entityKey(kind, id), e)
}

// deleteChildren deletes the entities of type T related to a parent.
func deleteChildren[T posture.Entity](tx *Tx, parent posture.Kind, parentID string) error {
	var zero T
	kind := zero.EntityKind()
	ids, err := childIDs(tx.b, parent, parentID, kind)
	if err != nil {
		return err
	}
	for _, id := range ids {
		old, found, err := getOld[T](tx, kind, id)
		if err != nil {
			return err
		}
		if found {
			if err := deleteEntity(tx, old); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteEntity removes a record, its secondary keys and its place in the
// role graph, and strips "@id" from the policies that named it.
func deleteEntity[T posture.Entity](tx *Tx, old T) error {
	for _, k := range secondaryKeys(old) {
		if err := tx.del(k.key); err != nil {
			return err
		}
	}
	kind, id := old.EntityKind(), old.EntityID()
	tx.graph.remove(kind, id)
	if err := tx.del(entityKey(kind, id)); err != nil {
		return err
	}
	return stripReferences(tx, kind, id)
}

// stripReferences removes "@id" of a deleted entity from every policy's role
// lists that select its kind.
func stripReferences(tx *Tx, kind posture.Kind, id string) error {
	for _, ref := range tx.graph.referencing(kind, id) {
		if err := stripFrom(tx, ref.policyKind, ref.policyID, "@"+id); err != nil {
			return err
		}
	}
	return nil
}

func stripFrom(tx *Tx, policyKind posture.Kind, policyID, role string) error {
	drop := func(roles []string) []string {
		return slices.DeleteFunc(slices.Clone(roles), func(r string) bool { return r == role })
	}
	switch policyKind {
	case posture.KindServicePolicy:
		p, found, err := getOld[posture.ServicePolicy](tx, policyKind, policyID)
		if err != nil || !found {
			return err
		}
		p.IdentityRoles, p.ServiceRoles, p.PostureCheckRoles = drop(p.IdentityRoles), drop(p.ServiceRoles), drop(p.PostureCheckRoles)
		return putEntity(tx, p)
	case posture.KindEdgeRouterPolicy:
		p, found, err := getOld[posture.EdgeRouterPolicy](tx, policyKind, policyID)
		if err != nil || !found {
			return err
		}
		p.IdentityRoles, p.EdgeRouterRoles = drop(p.IdentityRoles), drop(p.EdgeRouterRoles)
		return putEntity(tx, p)
	case posture.KindServiceEdgeRouterPolicy:
		p, found, err := getOld[posture.ServiceEdgeRouterPolicy](tx, policyKind, policyID)
		if err != nil || !found {
			return err
		}
		p.ServiceRoles, p.EdgeRouterRoles = drop(p.ServiceRoles), drop(p.EdgeRouterRoles)
		return putEntity(tx, p)
	}
	return nil
}

func init() {
	onEntity(entityHooks[posture.Identity]{afterUpdate: endSessionsOnDisable, beforeDelete: func(tx *Tx, old posture.Identity) error {
		if err := deleteChildren[posture.Authenticator](tx, posture.KindIdentity, old.ID); err != nil {
			return err
		}
		if err := deleteAPISessions(tx, old.ID, ""); err != nil {
			return err
		}
		if err := deleteMFA(tx, old.ID); err != nil {
			return err
		}
		if err := deleteIdentityEnrollments(tx, old.ID); err != nil {
			return err
		}
		if err := tx.del(clientInfoKey(old.ID)); err != nil {
			return err
		}
		if err := dropServiceConfigs(tx, old.ID); err != nil {
			return err
		}
		if err := dropFleetFailures(tx, old.ID); err != nil {
			return err
		}
		return dropIdentityPosture(tx, old.ID)
	}})
	onEntity(entityHooks[posture.Authenticator]{
		afterCreate: func(tx *Tx, a posture.Authenticator) error {
			return credential(tx, a.IdentityID, authenticatorName(a)+" created")
		},
		afterUpdate: func(tx *Tx, old, a posture.Authenticator) error {
			var changed []string
			if old.Username != a.Username {
				changed = append(changed, "username "+strconv.Quote(old.Username)+" -> "+strconv.Quote(a.Username))
			}
			if old.PasswordHashSealed != a.PasswordHashSealed || old.PasswordHash != a.PasswordHash {
				changed = append(changed, "password")
			}
			if old.CertPEM != a.CertPEM {
				changed = append(changed, "certificate")
			}
			if len(changed) == 0 {
				changed = append(changed, "tags")
			}
			return credential(tx, a.IdentityID, authenticatorName(a)+" changed: "+strings.Join(changed, ", "))
		},
		beforeDelete: func(tx *Tx, old posture.Authenticator) error {
			if err := credential(tx, old.IdentityID, authenticatorName(old)+" deleted"); err != nil {
				return err
			}
			if err := dropAuthenticatorExtension(tx, old); err != nil {
				return err
			}
			return endAuthenticatorSessions(tx, old, "its authenticator was deleted", nil)
		},
	})
	onEntity(entityHooks[posture.Check]{})
	onEntity(entityHooks[posture.Service]{})
	onEntity(entityHooks[posture.Config]{afterUpdate: func(tx *Tx, _, cfg posture.Config) error {
		// The services that carry the config change for their clients:
		// their service-update indicator moves, as for a change of the
		// service, so that they read them again.
		services, err := childIDs(tx.b, posture.KindConfig, cfg.ID, posture.KindService)
		if err != nil {
			return err
		}
		for _, id := range services {
			if err := reevaluateChange(tx, posture.KindService, id, nil); err != nil {
				return err
			}
		}
		// So do the identities that have it as a config of their own.
		return markServiceConfigUsers(tx, cfg.ID)
	}, beforeDelete: func(tx *Tx, old posture.Config) error {
		// Their services' own configs come back in its place.
		return markServiceConfigUsers(tx, old.ID)
	}})
	onEntity(entityHooks[posture.ConfigType]{})
	onEntity(entityHooks[posture.ServicePolicy]{})
	onEntity(entityHooks[posture.EdgeRouter]{})
	onEntity(entityHooks[posture.EdgeRouterPolicy]{})
	onEntity(entityHooks[posture.ServiceEdgeRouterPolicy]{})
}

// endSessionsOnDisable ends the API sessions of an identity disabled anew
// (POST /identities/:id/disable, or an update that disables it: a new
// disabledAt), so that a token of before the disable does not work again
// once the identity is enabled. Identities disabled before disabledAt
// existed keep theirs, as they did.
func endSessionsOnDisable(tx *Tx, old, updated posture.Identity) error {
	if updated.DisabledAt == nil || old.DisabledAt != nil && old.DisabledAt.Equal(*updated.DisabledAt) {
		return nil
	}
	return deleteAPISessions(tx, updated.ID, "identity disabled")
}

// endAuthenticatorSessions ends the API sessions that logged in with an
// authenticator (those of them that match, if match is not nil), recording
// why: a deleted one, as the controller does (a removed password or
// certificate must not keep working through a token it got before), or one
// whose CA was deleted.
func endAuthenticatorSessions(tx *Tx, a posture.Authenticator, why string, match func(posture.APISession) bool) error {
	for _, id := range tx.graph.sessionsOf(a.IdentityID) {
		var s posture.APISession
		found, err := getJSON(tx.r(), entityKey(posture.KindAPISession, id), &s)
		if err != nil {
			return err
		}
		if !found || s.AuthenticatorID != a.ID || match != nil && !match(s) {
			continue
		}
		tx.history(a.IdentityID, id, posture.HistoryAPISession, "API session ended ("+why+")", nil)
		if err := deleteAPISession(tx, id); err != nil {
			return err
		}
	}
	return nil
}

// deleteAPISessions deletes an identity's API sessions, recording why in
// its history when a reason is given.
func deleteAPISessions(tx *Tx, identityID, reason string) error {
	sessions, err := childIDs(tx.b, posture.KindIdentity, identityID, posture.KindAPISession)
	if err != nil {
		return err
	}
	for _, id := range sessions {
		if reason != "" {
			tx.history(identityID, id, posture.HistoryAPISession, "API session ended ("+reason+")", nil)
		}
		if err := deleteAPISession(tx, id); err != nil {
			return err
		}
	}
	return nil
}

// Get reads one entity of a kind, or returns posture.ErrNotFound.
func Get[T posture.Entity](s *Store, id string) (T, error) {
	var zero T
	return getEntity[T](s.r(), zero.EntityKind(), id)
}

// ByName reads the entity of a kind with the name, or posture.ErrNotFound.
func ByName[T posture.Entity](s *Store, name string) (T, error) {
	var zero T
	return byUnique[T](s.r(), zero.EntityKind(), "name", name)
}

// List reads every entity of a kind, in id order.
func List[T posture.Entity](s *Store) ([]T, error) {
	var zero T
	return listEntities[T](s.db, zero.EntityKind())
}

// Raw reads every entity of a kind as its stored JSON, in id order.
func (s *Store) Raw(kind posture.Kind) ([]json.RawMessage, error) {
	var out []json.RawMessage
	err := scan(s.db, entityPrefix(kind), func(_, value []byte) (bool, error) {
		out = append(out, append(json.RawMessage(nil), value...))
		return true, nil
	})
	return out, err
}

// Count counts the entities of a kind.
func (s *Store) Count(kind posture.Kind) (int, error) {
	n := 0
	err := scan(s.db, entityPrefix(kind), func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// Any reports whether an entity of the kind exists.
func (s *Store) Any(kind posture.Kind) (bool, error) {
	found := false
	err := scan(s.db, entityPrefix(kind), func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// Identity returns the identity with the id.
func (s *Store) Identity(id string) (posture.Identity, error) { return Get[posture.Identity](s, id) }

// IdentityByName returns the identity with the name.
func (s *Store) IdentityByName(name string) (posture.Identity, error) {
	return ByName[posture.Identity](s, name)
}

// ServiceByName returns the service with the name.
func (s *Store) ServiceByName(name string) (posture.Service, error) {
	return ByName[posture.Service](s, name)
}

// IdentityByExternalID returns the identity with the external id.
func (s *Store) IdentityByExternalID(externalID string) (posture.Identity, error) {
	return byUnique[posture.Identity](s.r(), posture.KindIdentity, "externalId", externalID)
}

// Identities lists every identity in id order.
func (s *Store) Identities() ([]posture.Identity, error) { return List[posture.Identity](s) }

// Authenticator returns the authenticator with the id.
func (s *Store) Authenticator(id string) (posture.Authenticator, error) {
	return Get[posture.Authenticator](s, id)
}

// AuthenticatorByUsername returns the password authenticator of a username.
func (s *Store) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	return byUnique[posture.Authenticator](s.r(), posture.KindAuthenticator, "username", username)
}

// AuthenticatorByFingerprint returns the certificate authenticator of a
// certificate fingerprint.
func (s *Store) AuthenticatorByFingerprint(fp string) (posture.Authenticator, error) {
	return byUnique[posture.Authenticator](s.r(), posture.KindAuthenticator, "fingerprint", fp)
}

// IdentityAuthenticators lists the authenticators of one identity.
func (s *Store) IdentityAuthenticators(identityID string) ([]posture.Authenticator, error) {
	var out []posture.Authenticator
	err := s.view(func(r reader) error {
		ids, err := childIDs(r, posture.KindIdentity, identityID, posture.KindAuthenticator)
		if err != nil {
			return err
		}
		out = make([]posture.Authenticator, 0, len(ids))
		for _, id := range ids {
			a, err := getEntity[posture.Authenticator](r, posture.KindAuthenticator, id)
			if err != nil {
				return fmt.Errorf("authenticator %s of identity %s: %w", id, identityID, err)
			}
			out = append(out, a)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ConfigsOfType lists the ids of the configs of a config type.
func (s *Store) ConfigsOfType(configTypeID string) ([]string, error) {
	return childIDs(s.db, posture.KindConfigType, configTypeID, posture.KindConfig)
}

// getEntity reads an entity or returns posture.ErrNotFound.
func getEntity[T any](r reader, kind posture.Kind, id string) (T, error) {
	var v T
	found, err := getJSON(r, entityKey(kind, id), &v)
	if err == nil && !found {
		err = posture.ErrNotFound
	}
	return v, err
}

// byUnique reads the entity that a unique index points to.
func byUnique[T any](r reader, kind posture.Kind, index, value string) (T, error) {
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
func listEntities[T any](r reader, kind posture.Kind) ([]T, error) {
	var out []T
	err := scanJSON(r, entityPrefix(kind), func(v T) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// authenticatorName is an authenticator as an identity's history names it.
func authenticatorName(a posture.Authenticator) string {
	name := a.Method + " authenticator " + a.ID
	if a.Username != "" {
		name += " (" + strconv.Quote(a.Username) + ")"
	}
	return name
}

// credential records a change of an identity's credentials in its
// history, with who made it: the event's actor, the identity itself, an
// admin (by name), or an operator of the log (user@host).
func credential(tx *Tx, identityID, what string) error {
	by := tx.event.Actor
	switch {
	case by == identityID:
		by = "the identity itself"
	case by != "":
		if id, found, err := getOld[posture.Identity](tx, posture.KindIdentity, by); err != nil {
			return err
		} else if found {
			by = "admin " + strconv.Quote(id.Name)
		}
	}
	if by != "" {
		what += ", by " + by
	}
	tx.history(identityID, "", posture.HistoryCredential, what, nil)
	return nil
}
