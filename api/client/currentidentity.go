package client

import (
	"errors"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// currentIdentity is GET /current-identity: the caller's identity, as the
// management API shows identities. The caller has an API session: the one
// it asks with.
func (a *API) currentIdentity(c echo.Context) error {
	i := api.PrincipalOf(c).Identity
	f := api.IdentityFacts{HasAPISession: true, Enrollment: map[string]any{}, Now: a.Writer.Now()}
	var err error
	if f.Authenticators, err = a.Identities.IdentityAuthenticators(i.ID); err != nil {
		return err
	}
	m, err := a.mfa().of(i.ID)
	if err != nil {
		return err
	}
	f.MFAEnabled = m != nil && m.Verified
	if f.Client, err = a.Identities.ClientInfo(i.ID); err != nil {
		return err
	}
	enrollments, err := a.Identities.IdentityEnrollments(i.ID)
	if err != nil {
		return err
	}
	for _, e := range enrollments {
		v := map[string]any{"id": e.ID, "jwt": e.JWT, "token": e.Token, "expiresAt": api.Time(e.ExpiresAt)}
		switch e.Method {
		case posture.EnrollOTTCA:
			v["caId"] = e.CAID
		case posture.EnrollUPDB:
			v["username"] = e.Username
		}
		f.Enrollment[e.Method] = v
	}
	return api.OK(c, api.IdentityView(i, f, api.Links{"self": {Href: "./current-identity"}}))
}

func newAuthenticatorView(au posture.Authenticator, identity posture.Identity) api.AuthenticatorView {
	return api.NewAuthenticatorView(au, identity.Name, "current-identity/authenticators")
}

// listAuthenticators is GET /current-identity/authenticators.
func (a *API) listAuthenticators(c echo.Context) error {
	i := api.PrincipalOf(c).Identity
	list, err := a.Identities.IdentityAuthenticators(i.ID)
	if err != nil {
		return err
	}
	views := make([]api.AuthenticatorView, len(list))
	for n, au := range list {
		views[n] = newAuthenticatorView(au, i)
	}
	return api.List(c, views)
}

// ownAuthenticator reads one of the caller's authenticators; another
// identity's is NOT_FOUND, as a missing one is.
func (a *API) ownAuthenticator(c echo.Context, id string) (posture.Authenticator, error) {
	au, err := a.Identities.Authenticator(id)
	if err == nil && au.IdentityID != api.PrincipalOf(c).Identity.ID {
		err = posture.ErrNotFound
	}
	if errors.Is(err, posture.ErrNotFound) {
		return au, posture.NotFound("authenticator", id)
	}
	return au, err
}

// detailAuthenticator is GET /current-identity/authenticators/:id.
func (a *API) detailAuthenticator(c echo.Context) error {
	au, err := a.ownAuthenticator(c, c.Param("id"))
	if err != nil {
		return err
	}
	return api.OK(c, newAuthenticatorView(au, api.PrincipalOf(c).Identity))
}

// updateAuthenticator is PUT /current-identity/authenticators/:id:
// username, password and currentPassword are required.
func (a *API) updateAuthenticator(c echo.Context) error { return a.changeAuthenticator(c, false) }

// patchAuthenticator is PATCH /current-identity/authenticators/:id: only
// currentPassword is required; username and password may be absent or null
// (unchanged).
func (a *API) patchAuthenticator(c echo.Context) error { return a.changeAuthenticator(c, true) }

// changeAuthenticator updates the caller's own password authenticator. The
// body is validated first (400), then currentPassword is checked against
// the stored hash: a wrong one is 401 and changes nothing (and counts as a
// failed attempt for the username). A new username must be free.
func (a *API) changeAuthenticator(c echo.Context, patch bool) error {
	id := c.Param("id")
	au, err := a.ownAuthenticator(c, id)
	if err != nil {
		return err
	}
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	ch, err := api.ParseAuthenticatorChange(body, patch, true)
	if err != nil {
		return err
	}
	if au.Method != posture.MethodPassword {
		return posture.Invalid("method", "only a updb (username and password) authenticator can be updated", au.Method)
	}
	limiter := a.limiter()
	subject := api.UserSubject(au.Username)
	if err := limiter.Allow(c, subject); err != nil {
		return err
	}
	ctx := c.Request().Context()
	hash, err := api.PasswordHashOf(ctx, a.Secrets, au)
	if err != nil {
		limiter.Released(c, subject)
		return err
	}
	ok, err := api.CheckPassword(ctx, hash, ch.CurrentPassword)
	if err != nil {
		limiter.Released(c, subject)
		return err
	}
	if !ok {
		limiter.Failed(c, subject)
		return &posture.Error{Code: posture.CodeUnauthorized, Message: "the current password is not correct"}
	}
	limiter.Succeeded(c, subject)
	checked := hash
	newHash := ""
	if ch.Password != nil {
		if newHash, err = api.SealedPasswordHash(ctx, a.Secrets, au.IdentityID, *ch.Password); err != nil {
			return err
		}
	}
	err = a.Writer.Model(c, api.Budgeted(c, a.Budget, api.PrincipalOf(c).Identity.ID, func() ([]posture.Payload, error) {
		cur, err := a.ownAuthenticator(c, id)
		if err != nil {
			return nil, err
		}
		// The password changed since it was checked: check it again.
		curHash, err := api.PasswordHashOf(ctx, a.Secrets, cur)
		if err != nil {
			return nil, err
		}
		if curHash != checked {
			ok, err := api.CheckPassword(ctx, curHash, ch.CurrentPassword)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, &posture.Error{Code: posture.CodeUnauthorized, Message: "the current password is not correct"}
			}
		}
		checked = curHash
		next, err := ch.Apply(cur, newHash, a.Identities, a.Writer.Now().UTC())
		if err != nil {
			return nil, err
		}
		if same, err := api.Unchanged(cur, next); err != nil || same {
			return nil, err // a change of nothing records nothing (nor refuses the logins in flight)
		}
		return []posture.Payload{posture.Updated[posture.Authenticator]{Entity: next}}, nil
	}))
	if err != nil {
		return err
	}
	return api.Empty(c)
}
