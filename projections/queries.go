package projections

import (
	"encoding/json"
	"errors"

	"github.com/cockroachdb/pebble/v2"

	"github.com/seed-0809debe/posture"
)

// RawEntity reads one entity as its stored JSON, or posture.ErrNotFound.
func (s *Store) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	data, closer, err := s.r().Get(entityKey(kind, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, posture.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	return append(json.RawMessage(nil), data...), nil
}

// IDByName returns the id of the entity of a kind with the name, or
// posture.ErrNotFound.
func (s *Store) IDByName(kind posture.Kind, name string) (string, error) {
	id, found, err := getString(s.r(), uniqueKey(kind, "name", name))
	if err == nil && !found {
		err = posture.ErrNotFound
	}
	return id, err
}

// Selecting lists, sorted, the policies of a kind whose role field (for
// example FieldIdentityRoles) selects the entity with the id.
func (s *Store) Selecting(policyKind posture.Kind, field, id string) []string {
	return s.graph.selecting(policyKind, field, id)
}

// Selected lists, sorted, the ids of the entities a policy's role field
// selects.
func (s *Store) Selected(policyKind posture.Kind, policyID, field string) []string {
	return s.graph.selected(policyKind, policyID, field)
}

// RoleAttributes lists, sorted and distinct, the role attributes used by the
// entities of a kind.
func (s *Store) RoleAttributes(kind posture.Kind) []string { return s.graph.attributes(kind) }

// ServicesFor lists, sorted by service id, the services an identity may
// reach with the type (Dial or Bind; "" for both) and, for each, the
// service policies that grant it. It walks the role graph: the policies
// that select the identity, then the services each selects.
func (s *Store) ServicesFor(identityID, typ string) []posture.Grant {
	links := s.graph.grants(posture.KindServicePolicy, FieldIdentityRoles, FieldServiceRoles, identityID, typ)
	policies := make([]string, len(links))
	var out []posture.Grant
	for i, l := range links {
		policies[i] = l.policy
		if len(out) == 0 || out[len(out)-1].ServiceID != l.target {
			out = append(out, posture.Grant{ServiceID: l.target})
		}
		g := &out[len(out)-1]
		g.Policies = policies[i-len(g.Policies) : i+1 : i+1]
	}
	return out
}

// Reachable lists, sorted, what the policies of a kind that select an entity
// through one role field select through another: the services of the
// service policies that select an identity, the edge routers of the edge
// router policies that select it, and so on; only through policies of the
// type typ when it is not "" (Dial or Bind, of service policies).
func (s *Store) Reachable(policyKind posture.Kind, from, id, to, typ string) []string {
	links := s.graph.grants(policyKind, from, to, id, typ)
	out := make([]string, 0, len(links))
	for _, l := range links {
		if len(out) == 0 || out[len(out)-1] != l.target {
			out = append(out, l.target)
		}
	}
	return out
}

// Granting lists, sorted, the service policies of a type ("" for both)
// that grant an identity a service: those that select both.
func (s *Store) Granting(identityID, serviceID, typ string) []string {
	return s.graph.granting(identityID, serviceID, typ)
}
