package api

import (
	"cmp"
	"time"

	"github.com/seed-0809debe/posture"
)

// EntityRef is a reference to another entity in a detail view.
type EntityRef struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Entity string `json:"entity"`
	Links  Links  `json:"_links"`
}

// Ref builds an EntityRef.
func Ref(collection, id, name string) EntityRef {
	return EntityRef{ID: id, Name: name, Entity: collection, Links: SelfLink(collection, id)}
}

// AuthQuery is an outstanding authentication requirement of an API session.
type AuthQuery struct {
	TypeID     string `json:"typeId"`
	Provider   string `json:"provider"`
	Format     string `json:"format,omitempty"`
	HTTPMethod string `json:"httpMethod,omitempty"`
	HTTPURL    string `json:"httpUrl,omitempty"`
	MinLength  int    `json:"minLength,omitempty"`
	MaxLength  int    `json:"maxLength,omitempty"`
}

// APISessionView is currentApiSessionDetail.
type APISessionView struct {
	ID                   string       `json:"id"`
	Token                string       `json:"token,omitempty"` // the caller's own only
	IdentityID           string       `json:"identityId"`
	Identity             EntityRef    `json:"identity"`
	AuthenticatorID      string       `json:"authenticatorId"`
	IPAddress            string       `json:"ipAddress"`
	ConfigTypes          []string     `json:"configTypes"`
	IsMFARequired        bool         `json:"isMfaRequired"`
	IsMFAComplete        bool         `json:"isMfaComplete"`
	IsCertExtendable     bool         `json:"isCertExtendable"`
	LastActivityAt       Time         `json:"lastActivityAt"`
	CachedLastActivityAt Time         `json:"cachedLastActivityAt"`
	ExpiresAt            Time         `json:"expiresAt"`
	ExpirationSeconds    int64        `json:"expirationSeconds"`
	AuthQueries          []AuthQuery  `json:"authQueries"`
	CreatedAt            Time         `json:"createdAt"`
	UpdatedAt            Time         `json:"updatedAt"`
	Tags                 posture.Tags `json:"tags"`
	Links                Links        `json:"_links"`
}

// MFAAuthQuery is the authQueries entry of an API session waiting for a TOTP.
var MFAAuthQuery = AuthQuery{
	TypeID: "MFA", Provider: "ziti", Format: "alphaNumeric", HTTPMethod: "POST",
	HTTPURL: "./authenticate/mfa", MinLength: 4, MaxLength: 6,
}

// SessionView renders the caller's API session, with its token.
func SessionView(p *Principal, timeout time.Duration) APISessionView {
	v := NewAPISessionView(p.Session, p.Identity.Name, timeout)
	v.Token = p.Token
	v.Links = Links{"self": {Href: "./current-api-session"}}
	return v
}

// NewAPISessionView renders an API session of a named identity, without
// its token (which only its holder knows: the log keeps a hash).
func NewAPISessionView(s posture.APISession, identityName string, timeout time.Duration) APISessionView {
	queries := []AuthQuery{}
	if s.MFARequired && !s.MFAComplete {
		queries = append(queries, MFAAuthQuery)
	}
	return APISessionView{
		ID:                   s.ID,
		IdentityID:           s.IdentityID,
		Identity:             Ref("identities", s.IdentityID, identityName),
		AuthenticatorID:      s.AuthenticatorID,
		IPAddress:            s.IPAddress,
		ConfigTypes:          s.ConfigTypes,
		IsMFARequired:        s.MFARequired,
		IsMFAComplete:        s.MFAComplete,
		IsCertExtendable:     s.CertExtendable,
		LastActivityAt:       Time(s.LastActivityAt),
		CachedLastActivityAt: Time(s.LastActivityAt),
		ExpiresAt:            Time(s.LastActivityAt.Add(timeout)),
		ExpirationSeconds:    int64(timeout.Seconds()),
		AuthQueries:          queries,
		CreatedAt:            Time(s.CreatedAt),
		UpdatedAt:            Time(s.LastActivityAt),
		Tags:                 posture.Tags{},
		Links:                SelfLink("api-sessions", s.ID),
	}
}

// AuthenticatorView is an authenticator as both APIs show it; never with
// the password hash.
type AuthenticatorView struct {
	ID                string       `json:"id"`
	Method            string       `json:"method"`
	IdentityID        string       `json:"identityId"`
	Identity          EntityRef    `json:"identity"`
	Username          string       `json:"username,omitempty"`
	CertPEM           string       `json:"certPem,omitempty"`
	Fingerprint       string       `json:"fingerprint,omitempty"`
	IsIssuedByNetwork bool         `json:"isIssuedByNetwork"`
	Tags              posture.Tags `json:"tags"`
	CreatedAt         Time         `json:"createdAt"`
	UpdatedAt         Time         `json:"updatedAt"`
	Links             Links        `json:"_links"`
}

// NewAuthenticatorView renders an authenticator of a named identity, with
// its self link under the collection it was read from ("authenticators",
// "current-identity/authenticators").
func NewAuthenticatorView(au posture.Authenticator, identityName, collection string) AuthenticatorView {
	t := au.Tags
	if t == nil {
		t = posture.Tags{}
	}
	return AuthenticatorView{
		ID: au.ID, Method: au.Method, IdentityID: au.IdentityID, Identity: Ref("identities", au.IdentityID, identityName),
		Username: au.Username, CertPEM: au.CertPEM, Fingerprint: au.Fingerprint, IsIssuedByNetwork: au.IsIssuedByNetwork,
		Tags: t, CreatedAt: Time(au.CreatedAt), UpdatedAt: Time(au.UpdatedAt), Links: SelfLink(collection, au.ID),
	}
}

// DefaultAuthPolicyID is the auth policy every identity answers with:
// postured has one set of login rules, the real controller's default
// policy.
const DefaultAuthPolicyID = "default"

// AuthenticatorSummary is an entry of an identity's authenticators map.
type AuthenticatorSummary struct {
	ID          string `json:"id"`
	Username    string `json:"username,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// IdentityFacts are what an identity's view shows beyond its record.
type IdentityFacts struct {
	Authenticators []posture.Authenticator
	// Client is what its clients last reported at authenticate.
	Client        posture.ClientInfo
	HasAPISession bool
	MFAEnabled    bool
	// Enrollment is the enrollments map by method (never nil in the view).
	Enrollment map[string]any
	// Now is the moment shown: a timed disable that ended shows as enabled.
	Now time.Time
}

// orEmpty is m, or an empty map for nil: the wire shows {} rather than
// null.
func orEmpty[M ~map[K]V, K comparable, V any](m M) M {
	if m == nil {
		return M{}
	}
	return m
}

// IdentityView renders identityDetail, as both APIs show it (the management
// API's identities, the client API's current-identity), with the fields the
// real controller always sends.
func IdentityView(i posture.Identity, f IdentityFacts, links Links) map[string]any {
	auths := map[string]AuthenticatorSummary{}
	for _, au := range f.Authenticators {
		auths[au.Method] = AuthenticatorSummary{ID: au.ID, Username: au.Username, Fingerprint: au.Fingerprint}
	}
	env, sdk := posture.EnvInfo{}, posture.SDKInfo{}
	if f.Client.EnvInfo != nil {
		env = *f.Client.EnvInfo
	}
	if f.Client.SDKInfo != nil {
		sdk = *f.Client.SDKInfo
	}
	enrollment := f.Enrollment
	if enrollment == nil {
		enrollment = map[string]any{}
	}
	var externalID any
	if i.ExternalID != "" {
		externalID = i.ExternalID
	}
	t := i.Tags
	if t == nil {
		t = posture.Tags{}
	}
	disabled := i.IsDisabled(f.Now)
	v := map[string]any{
		"id": i.ID, "name": i.Name, "typeId": i.Type, "type": Ref("identity-types", i.Type, i.Type),
		"isAdmin": i.IsAdmin, "isDefaultAdmin": i.IsDefaultAdmin, "roleAttributes": i.RoleAttributes,
		"externalId": externalID, "disabled": disabled, "tags": t,
		"authenticators": auths, "isMfaEnabled": f.MFAEnabled, "enrollment": enrollment,
		"authPolicyId": DefaultAuthPolicyID, "authPolicy": Ref("auth-policies", DefaultAuthPolicyID, "Default"),
		"envInfo": env, "sdkInfo": sdk,
		"hasApiSession": f.HasAPISession, "hasEdgeRouterConnection": false,
		"appData": orEmpty(i.AppData), "defaultHostingCost": i.DefaultHostingCost, "defaultHostingPrecedence": cmp.Or(i.DefaultHostingPrecedence, "default"),
		"serviceHostingCosts": orEmpty(i.ServiceHostingCosts), "serviceHostingPrecedences": orEmpty(i.ServiceHostingPrecedences),
		"createdAt": Time(i.CreatedAt), "updatedAt": Time(i.UpdatedAt), "_links": links,
	}
	if disabled && i.DisabledAt != nil {
		v["disabledAt"] = Time(*i.DisabledAt)
		if i.DisabledUntil != nil {
			v["disabledUntil"] = Time(*i.DisabledUntil)
		}
	}
	return v
}
