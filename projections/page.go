package projections

import (
	"github.com/seed-0809debe/posture"
)

// Checks reads every posture check, in id order.
func (s *Store) Checks() ([]posture.Check, error) { return List[posture.Check](s) }

// Service reads the service with the id.
func (s *Store) Service(id string) (posture.Service, error) { return Get[posture.Service](s, id) }
