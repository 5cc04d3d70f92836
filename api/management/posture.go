package management

import "github.com/seed-0809debe/posture/api"

// postureRoutes are the posture read models: posture data and failed
// service requests.
func (a *API) postureRoutes() []api.Route { return nil }
