package client

import "github.com/seed-0809debe/posture/api"

// IdentityStore is what the current-identity, MFA and external JWT signer
// operations read (projections.Store implements it).
type IdentityStore interface{}

// identityRoutes are the current identity's operations: MFA, authenticators,
// the identity itself, external JWT signers.
func (a *API) identityRoutes() []api.Route { return nil }
