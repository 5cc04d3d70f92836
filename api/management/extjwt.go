package management

import "github.com/seed-0809debe/posture/api"

// extJWTRoutes are the external JWT signer operations.
func (a *API) extJWTRoutes() []api.Route { return nil }
