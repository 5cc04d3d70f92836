package management

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

type authenticatorInput struct {
	Method     string       `json:"method"`
	IdentityID string       `json:"identityId"`
	Username   string       `json:"username"`
	Password   string       `json:"password"`
	Tags       posture.Tags `json:"tags"`
}

func (a *API) authenticatorView(au posture.Authenticator) api.AuthenticatorView {
	name := ""
	if i, err := get[posture.Identity](a.Store, "identity", au.IdentityID); err == nil {
		name = i.Name
	}
	return api.NewAuthenticatorView(au, name, string(posture.KindAuthenticator))
}

// authenticatorViews renders a list of authenticators.
func (a *API) authenticatorViews(list []posture.Authenticator) []api.AuthenticatorView {
	views := make([]api.AuthenticatorView, len(list))
	for i, au := range list {
		views[i] = a.authenticatorView(au)
	}
	return views
}

func (a *API) listAuthenticators(c echo.Context) error {
	all, err := list[posture.Authenticator](a.Store)
	if err != nil {
		return err
	}
	return api.List(c, a.authenticatorViews(all))
}

func (a *API) identityAuthenticators(c echo.Context) error {
	if _, err := get[posture.Identity](a.Store, "identity", c.Param("id")); err != nil {
		return err
	}
	all, err := a.Store.IdentityAuthenticators(c.Param("id"))
	if err != nil {
		return err
	}
	return api.List(c, a.authenticatorViews(all))
}

func (a *API) detailAuthenticator(c echo.Context) error {
	au, err := get[posture.Authenticator](a.Store, "authenticator", c.Param("id"))
	if err != nil {
		return err
	}
	return api.OK(c, a.authenticatorView(au))
}

// createAuthenticator is POST /authenticators: give an identity a password
// authenticator. The password is hashed here; the log holds the hash,
// sealed.
func (a *API) createAuthenticator(c echo.Context) error {
	var in authenticatorInput
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	if in.Method != posture.MethodPassword {
		return posture.Invalid("method", `must be "updb" (certificate authenticators come from enrollment)`, in.Method)
	}
	if err := api.CheckLength("username", in.Username, api.MinUsername, api.MaxUsername); err != nil {
		return err
	}
	if err := api.CheckUsername("username", in.Username); err != nil {
		return err
	}
	if err := api.CheckLength("password", in.Password, api.MinPassword, api.MaxPassword); err != nil {
		return err
	}
	t, err := tags(in.Tags)
	if err != nil {
		return err
	}
	hash, err := api.SealedPasswordHash(c.Request().Context(), a.Secrets, in.IdentityID, in.Password)
	if err != nil {
		return err
	}
	var id string
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		if err := a.exists(posture.KindIdentity, "identity", in.IdentityID); err != nil {
			return nil, posture.Invalid("identityId", "no identity with this id", in.IdentityID)
		}
		if err := a.ownCredentials(c, in.IdentityID); err != nil {
			return nil, err
		}
		if err := api.UsernameFree(usernames{a}, "username", in.Username); err != nil {
			return nil, err
		}
		existing, err := a.Store.IdentityAuthenticators(in.IdentityID)
		if err != nil {
			return nil, err
		}
		for _, au := range existing {
			if au.Method == posture.MethodPassword {
				return nil, posture.Invalid("method", "the identity already has a updb authenticator", in.Method)
			}
		}
		// A pending updb enrollment is the identity's password to be.
		pending, err := a.Enrollments.IdentityEnrollments(in.IdentityID)
		if err != nil {
			return nil, err
		}
		for _, e := range pending {
			if e.Method == posture.EnrollUPDB {
				return nil, posture.Invalid("method", "the identity has a pending updb enrollment: delete it first", in.Method)
			}
		}
		now := a.Writer.Now().UTC()
		id = posture.NewID()
		return []posture.Payload{posture.Created[posture.Authenticator]{Entity: posture.Authenticator{
			ID: id, IdentityID: in.IdentityID, Method: posture.MethodPassword, Username: in.Username,
			PasswordHashSealed: hash, Tags: t, CreatedAt: now, UpdatedAt: now,
		}}}, nil
	})
	if err != nil {
		return err
	}
	return api.CreatedAt(c, string(posture.KindAuthenticator), id)
}

// updateAuthenticator is PUT /authenticators/:id (username and password
// required) and patchAuthenticator PATCH (each optional): an administrator
// sets a updb authenticator's username, password or tags, without its
// current password. The new password is hashed here; the log holds the
// hash, sealed. API sessions opened with the old password stay, as in OpenZiti.
func (a *API) updateAuthenticator(c echo.Context) error { return a.changeAuthenticator(c, false) }

func (a *API) patchAuthenticator(c echo.Context) error { return a.changeAuthenticator(c, true) }

func (a *API) changeAuthenticator(c echo.Context, patch bool) error {
	id := c.Param("id")
	found, err := get[posture.Authenticator](a.Store, "authenticator", id)
	if err != nil {
		return err
	}
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	ch, err := api.ParseAuthenticatorChange(body, patch, false)
	if err != nil {
		return err
	}
	hash := ""
	if ch.Password != nil {
		if hash, err = api.SealedPasswordHash(c.Request().Context(), a.Secrets, found.IdentityID, *ch.Password); err != nil {
			return err
		}
	}
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		au, err := get[posture.Authenticator](a.Store, "authenticator", id)
		if err != nil {
			return nil, err
		}
		if au.Method != posture.MethodPassword {
			return nil, posture.Invalid("method", "only a updb (username and password) authenticator can be updated", au.Method)
		}
		// The default admin's password is changed by itself, with its
		// current password: another admin could otherwise take it over,
		// and so could the holder of its session token alone.
		if a.isDefaultAdmin(au.IdentityID) {
			return nil, &posture.Error{Code: posture.CodeUnauthorized, Message: "the default admin's password is changed by the default admin only, with its current password (/current-identity/authenticators)"}
		}
		next, err := ch.Apply(au, hash, usernames{a}, a.Writer.Now().UTC())
		if err != nil {
			return nil, err
		}
		if same, err := api.Unchanged(au, next); err != nil || same {
			return nil, err // a change of nothing records nothing (nor refuses the logins in flight)
		}
		return []posture.Payload{posture.Updated[posture.Authenticator]{Entity: next}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

func (a *API) deleteAuthenticator(c echo.Context) error {
	id := c.Param("id")
	err := a.Writer.Model(c, func() ([]posture.Payload, error) {
		au, err := get[posture.Authenticator](a.Store, "authenticator", id)
		if err != nil {
			return nil, err
		}
		// The default admin keeps a way to sign in, as it stays an
		// enabled admin (identities.go).
		if a.isDefaultAdmin(au.IdentityID) {
			if err := a.ownCredentials(c, au.IdentityID); err != nil {
				return nil, err
			}
			all, err := a.Store.IdentityAuthenticators(au.IdentityID)
			if err != nil {
				return nil, err
			}
			if len(all) <= 1 {
				return nil, posture.Invalid("id", "the default admin keeps a way to sign in: this is its only authenticator", id)
			}
		}
		return []posture.Payload{posture.Deleted[posture.Authenticator]{ID: id}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// reEnrollAuthenticator is POST /authenticators/{id}/re-enroll
// {expiresAt}: the authenticator is deleted (its API sessions end) and
// its identity gets an enrollment of the same kind in the same change: a
// password's is updb with its username, a certificate's ottca when a CA of
// the network issued it, else ott. It answers the enrollment's id.
func (a *API) reEnrollAuthenticator(c echo.Context) error {
	id := c.Param("id")
	expires, err := a.decodeExpiry(c)
	if err != nil {
		return err
	}
	var created string
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		au, err := get[posture.Authenticator](a.Store, "authenticator", id)
		if err != nil {
			return nil, err
		}
		if err := a.noEnrollmentOfDefaultAdmin("id", au.IdentityID); err != nil {
			return nil, err
		}
		now := a.Writer.Now().UTC()
		e := posture.Enrollment{ID: posture.NewID(), IdentityID: au.IdentityID, ExpiresAt: expires, CreatedAt: now, UpdatedAt: now}
		switch au.Method {
		case posture.MethodPassword:
			e.Method, e.Username = posture.EnrollUPDB, au.Username
		default:
			e.Method = posture.EnrollOTT
			if !au.IsIssuedByNetwork {
				if e.CAID, err = a.issuingCA(au); err != nil {
					return nil, err
				}
				if e.CAID != "" {
					e.Method = posture.EnrollOTTCA
				}
			}
		}
		if err := a.enrollable(au.IdentityID, e.Method, au.ID); err != nil {
			return nil, err
		}
		if err := a.issue(&e); err != nil {
			return nil, err
		}
		created = e.ID
		return []posture.Payload{posture.Deleted[posture.Authenticator]{ID: id}, posture.Created[posture.Enrollment]{Entity: e}}, nil
	})
	if err != nil {
		return err
	}
	return api.CreatedAt(c, string(posture.KindEnrollment), created)
}

// issuingCA is the id of the network's CA that issued a certificate
// authenticator's certificate: the one it was enrolled with, or else one
// that signed it ("": none).
func (a *API) issuingCA(au posture.Authenticator) (string, error) {
	if au.CAID != "" {
		if _, err := a.Store.RawEntity(posture.KindCA, au.CAID); err == nil {
			return au.CAID, nil
		} else if !errors.Is(err, posture.ErrNotFound) {
			return "", err
		}
	}
	cert, err := pki.ParseCertificatePEM([]byte(au.CertPEM))
	if err != nil {
		return "", nil
	}
	cas, err := list[posture.CA](a.Store)
	if err != nil {
		return "", err
	}
	for _, ca := range cas {
		if caCert, err := pki.ParseCertificatePEM([]byte(ca.CertPEM)); err == nil && cert.CheckSignatureFrom(caCert) == nil {
			return ca.ID, nil
		}
	}
	return "", nil
}

// isDefaultAdmin says whether the identity is the default admin.
func (a *API) isDefaultAdmin(identityID string) bool {
	i, err := get[posture.Identity](a.Store, "identity", identityID)
	return err == nil && i.IsDefaultAdmin
}

// ownCredentials refuses a change of the default admin's credentials by
// another admin, who could otherwise sign in as it: its authenticators are
// its own (its password is changed with the current one, its MFA removed
// with a code, and it has no enrollments, whose tokens every admin reads).
func (a *API) ownCredentials(c echo.Context, identityID string) error {
	if !a.isDefaultAdmin(identityID) || identityID == api.PrincipalOf(c).Identity.ID {
		return nil
	}
	return &posture.Error{Code: posture.CodeUnauthorized, Message: "the default admin's credentials are changed by the default admin only"}
}

func (a *API) authenticatorRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/authenticators", Access: api.Admin, Handler: a.listAuthenticators},
		{Method: http.MethodPost, Path: "/authenticators", Access: api.Admin, Handler: a.createAuthenticator},
		{Method: http.MethodGet, Path: "/authenticators/:id", Access: api.Admin, Handler: a.detailAuthenticator},
		{Method: http.MethodPut, Path: "/authenticators/:id", Access: api.Admin, Handler: a.updateAuthenticator},
		{Method: http.MethodPatch, Path: "/authenticators/:id", Access: api.Admin, Handler: a.patchAuthenticator},
		{Method: http.MethodDelete, Path: "/authenticators/:id", Access: api.Admin, Handler: a.deleteAuthenticator},
		{Method: http.MethodPost, Path: "/authenticators/:id/re-enroll", Access: api.Admin, Handler: a.reEnrollAuthenticator},
	}
}
