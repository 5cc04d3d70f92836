package management

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// authPolicyView is an auth policy as the controller shows it. postured
// has one, the default every identity names (authPolicyId), which says
// what its logins allow: it is read, not changed.
type authPolicyView struct {
	ID        string              `json:"id"`
	Name      string              `json:"name"`
	Primary   authPolicyPrimary   `json:"primary"`
	Secondary authPolicySecondary `json:"secondary"`
	CreatedAt api.Time            `json:"createdAt"`
	UpdatedAt api.Time            `json:"updatedAt"`
	Tags      posture.Tags        `json:"tags"`
	Links     api.Links           `json:"_links"`
}

type authPolicyPrimary struct {
	Cert struct {
		Allowed           bool `json:"allowed"`
		AllowExpiredCerts bool `json:"allowExpiredCerts"`
	} `json:"cert"`
	ExtJWT struct {
		Allowed        bool     `json:"allowed"`
		AllowedSigners []string `json:"allowedSigners"`
	} `json:"extJwt"`
	UPDB struct {
		Allowed                bool  `json:"allowed"`
		LockoutDurationMinutes int64 `json:"lockoutDurationMinutes"`
		MaxAttempts            int64 `json:"maxAttempts"`
		MinPasswordLength      int64 `json:"minPasswordLength"`
		RequireMixedCase       bool  `json:"requireMixedCase"`
		RequireNumberChar      bool  `json:"requireNumberChar"`
		RequireSpecialChar     bool  `json:"requireSpecialChar"`
	} `json:"updb"`
}

type authPolicySecondary struct {
	RequireExtJWTSigner *string `json:"requireExtJwtSigner"`
	RequireTOTP         bool    `json:"requireTotp"`
}

// defaultAuthPolicy is what postured's logins do: certificates (valid
// now), external JWTs of any enabled signer, and passwords of at least
// api.MinPassword characters, whose failures are rate-limited rather than
// locking the account (no lockout, no attempt count); TOTP is asked of
// the identities that enrolled it, not required of all.
func defaultAuthPolicy() authPolicyView {
	v := authPolicyView{ID: api.DefaultAuthPolicyID, Name: "Default", CreatedAt: api.Time(api.BuiltinTime), UpdatedAt: api.Time(api.BuiltinTime),
		Tags: posture.Tags{}, Links: api.SelfLink("auth-policies", api.DefaultAuthPolicyID)}
	v.Primary.Cert.Allowed = true
	v.Primary.ExtJWT.Allowed, v.Primary.ExtJWT.AllowedSigners = true, []string{}
	v.Primary.UPDB.Allowed, v.Primary.UPDB.MinPasswordLength = true, api.MinPassword
	return v
}

func listAuthPolicies(c echo.Context) error {
	return api.List(c, []authPolicyView{defaultAuthPolicy()})
}

func detailAuthPolicy(c echo.Context) error {
	if c.Param("id") != api.DefaultAuthPolicyID {
		return posture.NotFound("auth policy", c.Param("id"))
	}
	return api.OK(c, defaultAuthPolicy())
}

// authPolicyRoutes read the one auth policy; its changes are not served
// (405).
func authPolicyRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/auth-policies", Access: api.Admin, Handler: listAuthPolicies},
		{Method: http.MethodGet, Path: "/auth-policies/:id", Access: api.Admin, Handler: detailAuthPolicy},
	}
}
