package posture

import "time"

// ExternalJWTSigner is an outside issuer of JWTs (an identity provider)
// whose tokens identities may authenticate with
// (POST /authenticate?method=ext-jwt). A token is matched to its signer by
// the issuer, verified with the signer's certificate key or its JWKS, must
// carry the signer's audience, and names an identity in the claim
// ClaimsProperty: the identity's externalId when UseExternalID is set, its id
// otherwise.
type ExternalJWTSigner struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Issuer   string `json:"issuer"`
	Audience string `json:"audience"`
	// Exactly one of CertPEM and JWKSEndpoint is set.
	CertPEM     string `json:"certPem,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"` // of CertPEM
	// Kid is the key id the signer's tokens name in their header.
	Kid             string    `json:"kid,omitempty"`
	JWKSEndpoint    string    `json:"jwksEndpoint,omitempty"`
	ClaimsProperty  string    `json:"claimsProperty"`
	UseExternalID   bool      `json:"useExternalId"`
	Enabled         bool      `json:"enabled"`
	ExternalAuthURL string    `json:"externalAuthUrl,omitempty"`
	ClientID        string    `json:"clientId,omitempty"`
	Scopes          []string  `json:"scopes"`
	Tags            Tags      `json:"tags"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// DefaultClaimsProperty is the claim that names the identity when a signer
// names none.
const DefaultClaimsProperty = "sub"
