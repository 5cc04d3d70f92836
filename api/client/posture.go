package client

import "github.com/seed-0809debe/posture/api"

// Store is what the posture, service and session operations read
// (projections.Store implements it).
type Store interface{}

// postureRoutes are posture responses, services and sessions.
func (a *API) postureRoutes() []api.Route { return nil }
