package management

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// EnrollmentStore is what the enrollment operations read besides Store
// (projections.Store implements it).
type EnrollmentStore interface {
	IdentityEnrollments(identityID string) ([]posture.Enrollment, error)
	EnrollmentByUsername(username string) (posture.Enrollment, error)
}

// usernames finds who has a username among the store's authenticators and
// the pending enrollments (api.Usernames).
type usernames struct{ a *API }

func (u usernames) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	return u.a.Store.AuthenticatorByUsername(username)
}

func (u usernames) EnrollmentByUsername(username string) (posture.Enrollment, error) {
	return u.a.Enrollments.EnrollmentByUsername(username)
}

// enrollmentRequest is the enrollment field of an identity create:
// {ott: true}, {ottca: "<caId>"} or {updb: "<username>"}.
type enrollmentRequest struct {
	OTT   *bool   `json:"ott,omitempty"`
	OTTCA *string `json:"ottca,omitempty"`
	UPDB  *string `json:"updb,omitempty"`
}

// method returns the one enrollment method the request asks for ("" for
// none) with its CA id or username.
func (r *enrollmentRequest) method() (method, caID, username string, err error) {
	if r == nil {
		return "", "", "", nil
	}
	n := 0
	if r.OTT != nil && *r.OTT {
		method, n = posture.EnrollOTT, n+1
	}
	if r.OTTCA != nil {
		method, caID, n = posture.EnrollOTTCA, *r.OTTCA, n+1
	}
	if r.UPDB != nil {
		method, username, n = posture.EnrollUPDB, *r.UPDB, n+1
	}
	if n > 1 {
		return "", "", "", posture.Invalid("enrollment", "give one of ott, ottca and updb", nil)
	}
	return method, caID, username, nil
}

// enrollmentDuration is how long new enrollment tokens are valid.
func (a *API) enrollmentDuration() time.Duration {
	if a.EnrollmentDuration > 0 {
		return a.EnrollmentDuration
	}
	return posture.DefaultEnrollmentDuration
}

// newEnrollment validates and makes an enrollment of an identity with a
// fresh one-time token and its JWT. isNew says that the identity is being
// created in the same change (it has no authenticators or enrollments yet).
// It runs inside the model change, on the latest state.
func (a *API) newEnrollment(identityID string, isNew bool, method, caID, username string, expiresAt, now time.Time) (posture.Enrollment, error) {
	e := posture.Enrollment{ID: posture.NewID(), Method: method, IdentityID: identityID, ExpiresAt: expiresAt.UTC(), CreatedAt: now, UpdatedAt: now}
	switch method {
	case posture.EnrollOTT:
	case posture.EnrollOTTCA:
		if err := a.exists(posture.KindCA, "CA", caID); err != nil {
			return e, posture.Invalid("enrollment.ottca", "no CA with this id", caID)
		}
		e.CAID = caID
	case posture.EnrollUPDB:
		if err := api.CheckLength("enrollment.updb", username, 4, 100); err != nil {
			return e, err
		}
		if err := api.CheckUsername("enrollment.updb", username); err != nil {
			return e, err
		}
		if err := api.UsernameFree(usernames{a}, "enrollment.updb", username); err != nil {
			return e, err
		}
		e.Username = username
	default:
		return e, posture.Invalid("method", "must be ott, ottca or updb", method)
	}
	if err := checkExpiry(expiresAt, now); err != nil {
		return e, err
	}
	if !isNew {
		if err := a.enrollable(identityID, method, ""); err != nil {
			return e, err
		}
	}
	return e, a.issue(&e)
}

// issue gives an enrollment a new one-time token and its JWT, valid until
// its expiresAt, both sealed; the token is found by its hash.
func (a *API) issue(e *posture.Enrollment) error {
	token := posture.NewToken()
	jwt, err := a.enrollmentJWT(e.Method, e.IdentityID, token, e.ExpiresAt)
	if err != nil {
		return err
	}
	e.TokenHash, e.Token, e.JWT = posture.HashToken(token), "", ""
	if e.TokenSealed, err = a.seal(e.IdentityID, posture.FieldEnrollmentToken, token); err != nil {
		return err
	}
	e.JWTSealed, err = a.seal(e.IdentityID, posture.FieldEnrollmentJWT, jwt)
	return err
}

// secretsTimeout bounds the sealing and opening of secrets where no request
// context reaches (the builds and views of resources). The keyring serves
// a data key from its cache, or reads it from the log's key bucket.
const secretsTimeout = 5 * time.Second

// seal seals a secret field of an owner for the log.
func (a *API) seal(owner, field, plain string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	return api.Seal(ctx, a.Secrets, owner, field, plain)
}

// reveal opens a secret field of an owner for an administrator's view: the
// sealed form, or the legacy clear one of an older log. A value that cannot
// be opened (its key destroyed) or is empty shows as null.
func (a *API) reveal(owner, field, sealed, legacy string) any {
	ctx, cancel := context.WithTimeout(context.Background(), secretsTimeout)
	defer cancel()
	v, err := api.Reveal(ctx, a.Secrets, owner, field, sealed, legacy)
	if err != nil || v == "" {
		return nil
	}
	return v
}

// enrollmentJWT signs the JWT that carries an enrollment token ("" without
// a signer).
func (a *API) enrollmentJWT(method, subject, token string, expiresAt time.Time) (string, error) {
	if a.Signer == nil {
		return "", nil
	}
	return a.Signer.SignEnrollment(pki.EnrollmentClaims{Method: method, Issuer: a.issuer(), Subject: subject, Token: token, ExpiresAt: expiresAt})
}

// enrollable refuses a second enrollment of the same kind: an identity has
// at most one certificate (ott or ottca) and one password (updb), enrolled
// or pending. except is an authenticator the enrollment replaces, or the
// enrollment itself when it is refreshed.
func (a *API) enrollable(identityID, method, except string) error {
	kind := func(m string) string {
		if m == posture.EnrollUPDB || m == posture.MethodPassword {
			return posture.MethodPassword
		}
		return posture.MethodCert
	}
	want := kind(method)
	pending, err := a.Enrollments.IdentityEnrollments(identityID)
	if err != nil {
		return err
	}
	for _, e := range pending {
		if kind(e.Method) == want && e.ID != except {
			return &posture.Error{Code: posture.CodeEnrollmentExists, Message: "the identity already has a pending " + e.Method + " enrollment"}
		}
	}
	auths, err := a.Store.IdentityAuthenticators(identityID)
	if err != nil {
		return err
	}
	for _, au := range auths {
		if au.Method == want && au.ID != except {
			return &posture.Error{Code: posture.CodeEnrollmentExists, Message: "the identity already has a " + au.Method + " authenticator"}
		}
	}
	return nil
}

// createIdentity is POST /identities. With an enrollment field, the
// identity and its enrollment are created in one model change: the
// identity first, then the enrollment, each expecting the one before. If
// the enrollment loses a race for the model after the identity went in,
// the change resumes with the enrollment alone.
func (a *API) createIdentity(c echo.Context) error {
	var in identityInput
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	method, caID, username, err := in.Enrollment.method()
	if err != nil {
		return err
	}
	r := a.identities()
	var created string
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		now := a.Writer.Now().UTC()
		var out []posture.Payload
		resume := false
		if created != "" {
			_, err := a.Store.RawEntity(posture.KindIdentity, created)
			resume = err == nil
		}
		if !resume {
			i, err := r.build(in, nil, now)
			if err != nil {
				return nil, err
			}
			created = i.ID
			out = append(out, posture.Created[posture.Identity]{Entity: i})
		}
		if method != "" {
			e, err := a.newEnrollment(created, true, method, caID, username, now.Add(a.enrollmentDuration()), now)
			if err != nil {
				return nil, err
			}
			out = append(out, posture.Created[posture.Enrollment]{Entity: e})
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	return api.CreatedAt(c, string(posture.KindIdentity), created)
}

// identityResourceRoutes are the identity resource's routes, with the
// create that understands the enrollment field.
func (a *API) identityResourceRoutes() []api.Route {
	routes := a.identities().routes()
	for i, r := range routes {
		if r.Method == http.MethodPost && r.Path == "/"+string(posture.KindIdentity) {
			routes[i].Handler = a.createIdentity
		}
	}
	return routes
}

// enrollmentSummary is the enrollment field of an identity detail:
// {ott: {id, jwt, token, expiresAt}, ottca: {..., caId, ca}, updb: {...,
// username}} for its pending enrollments.
func (a *API) enrollmentSummary(identityID string) (map[string]any, error) {
	out := map[string]any{}
	if a.Enrollments == nil {
		return out, nil
	}
	list, err := a.Enrollments.IdentityEnrollments(identityID)
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		v := map[string]any{
			"id": e.ID, "expiresAt": api.Time(e.ExpiresAt),
			"jwt":   a.reveal(e.IdentityID, posture.FieldEnrollmentJWT, e.JWTSealed, e.JWT),
			"token": a.reveal(e.IdentityID, posture.FieldEnrollmentToken, e.TokenSealed, e.Token),
		}
		switch e.Method {
		case posture.EnrollOTTCA:
			v["caId"] = e.CAID
			v["ca"] = a.caRef(e.CAID)
		case posture.EnrollUPDB:
			v["username"] = e.Username
		}
		out[e.Method] = v
	}
	return out, nil
}

func (a *API) caRef(id string) any {
	ca, err := get[posture.CA](a.Store, "CA", id)
	if err != nil {
		return nil
	}
	return api.Ref(string(posture.KindCA), ca.ID, ca.Name)
}

func (a *API) enrollmentView(e posture.Enrollment) any {
	identityName := ""
	if raw, err := a.Store.RawEntity(posture.KindIdentity, e.IdentityID); err == nil {
		identityName = nameOf(raw)
	}
	links := api.SelfLink(string(posture.KindEnrollment), e.ID)
	links["identity"] = api.Link{Href: "./identities/" + e.IdentityID}
	v := map[string]any{
		"id": e.ID, "method": e.Method, "identityId": e.IdentityID,
		"identity":  api.Ref(string(posture.KindIdentity), e.IdentityID, identityName),
		"token":     a.reveal(e.IdentityID, posture.FieldEnrollmentToken, e.TokenSealed, e.Token),
		"jwt":       a.reveal(e.IdentityID, posture.FieldEnrollmentJWT, e.JWTSealed, e.JWT),
		"expiresAt": api.Time(e.ExpiresAt),
		"caId":      nilIfEmpty(e.CAID), "tags": posture.Tags{},
		"createdAt": api.Time(e.CreatedAt), "updatedAt": api.Time(e.UpdatedAt), "_links": links,
	}
	if e.CAID != "" {
		v["ca"] = a.caRef(e.CAID)
	}
	// Only an updb enrollment has a username; the others leave the key
	// out, as the real controller does.
	if e.Username != "" {
		v["username"] = e.Username
	}
	return v
}

// enrollments are read and deleted as a resource; they are created by
// createEnrollment (or with their identity) and never updated.
func (a *API) enrollments() *resource[posture.Enrollment, enrollmentInput] {
	return &resource[posture.Enrollment, enrollmentInput]{a: a, kind: posture.KindEnrollment, noun: "enrollment", view: pure(a.enrollmentView)}
}

func (a *API) identityEnrollments(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
		return err
	}
	all, err := a.Enrollments.IdentityEnrollments(id)
	if err != nil {
		return err
	}
	r := a.enrollments()
	views, err := r.views(all, r.view)
	if err != nil {
		return err
	}
	return listViews(c, views, r.view)
}

type enrollmentInput struct {
	Method     string    `json:"method"`
	IdentityID string    `json:"identityId"`
	ExpiresAt  *api.Time `json:"expiresAt"`
	CAID       string    `json:"caId"`
	Username   string    `json:"username"`
}

// createEnrollment is POST /enrollments {method, identityId, expiresAt,
// caId, username}: a new one-time enrollment for an existing identity (for
// example after the first one expired).
func (a *API) createEnrollment(c echo.Context) error {
	var in enrollmentInput
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	var id string
	err := a.Writer.Model(c, func() ([]posture.Payload, error) {
		if err := a.exists(posture.KindIdentity, "identity", in.IdentityID); err != nil {
			return nil, posture.Invalid("identityId", "no identity with this id", in.IdentityID)
		}
		if err := a.noEnrollmentOfDefaultAdmin("identityId", in.IdentityID); err != nil {
			return nil, err
		}
		now := a.Writer.Now().UTC()
		expires := now.Add(a.enrollmentDuration())
		if in.ExpiresAt != nil {
			expires = time.Time(*in.ExpiresAt)
		}
		e, err := a.newEnrollment(in.IdentityID, false, in.Method, in.CAID, in.Username, expires, now)
		if err != nil {
			return nil, err
		}
		id = e.ID
		return []posture.Payload{posture.Created[posture.Enrollment]{Entity: e}}, nil
	})
	if err != nil {
		return err
	}
	return api.CreatedAt(c, string(posture.KindEnrollment), id)
}

// expiryInput is the body of an enrollment's refresh and an
// authenticator's re-enrollment: {expiresAt}, required, in the future.
type expiryInput struct {
	ExpiresAt *api.Time `json:"expiresAt"`
}

func (a *API) decodeExpiry(c echo.Context) (time.Time, error) {
	var in expiryInput
	if err := decodeObject(c, &in); err != nil {
		return time.Time{}, err
	}
	if in.ExpiresAt == nil {
		return time.Time{}, posture.Invalid("expiresAt", "is required", nil)
	}
	t := time.Time(*in.ExpiresAt).UTC()
	return t, checkExpiry(t, a.Writer.Now())
}

// maxEnrollmentAhead bounds an enrollment's expiresAt: a time the log
// can encode (before year 10000), and one a person may still mean.
const maxEnrollmentAhead = 100 * 365 * 24 * time.Hour

// checkExpiry refuses an enrollment's expiresAt that is not in the future
// or more than 100 years ahead.
func checkExpiry(t, now time.Time) error {
	switch {
	case !t.After(now):
		return posture.Invalid("expiresAt", "must be in the future", api.Time(t))
	case t.After(now.Add(maxEnrollmentAhead)):
		return posture.Invalid("expiresAt", "must be at most 100 years ahead", api.Time(t))
	}
	return nil
}

// noEnrollmentOfDefaultAdmin refuses an enrollment of the default admin:
// every admin reads an enrollment's token, and could sign in as the
// default admin with it.
func (a *API) noEnrollmentOfDefaultAdmin(field, identityID string) error {
	if a.isDefaultAdmin(identityID) {
		return posture.Invalid(field, "the default admin has no enrollments: every admin reads an enrollment's token, and could sign in as the default admin with it", identityID)
	}
	return nil
}

// refreshEnrollment is POST /enrollments/{id}/refresh {expiresAt}: the
// enrollment is valid until expiresAt, with a new token and JWT (read
// from the enrollment as before). The old JWT stops working, unlike the
// controller's refresh, which keeps the token: a refresh often follows a
// JWT that expired or went astray.
func (a *API) refreshEnrollment(c echo.Context) error {
	id := c.Param("id")
	expires, err := a.decodeExpiry(c)
	if err != nil {
		return err
	}
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		e, err := get[posture.Enrollment](a.Store, "enrollment", id)
		if err != nil {
			return nil, err
		}
		if err := a.noEnrollmentOfDefaultAdmin("id", e.IdentityID); err != nil {
			return nil, err
		}
		// An authenticator added since would refuse its redemption.
		if err := a.enrollable(e.IdentityID, e.Method, e.ID); err != nil {
			return nil, err
		}
		// So would an authenticator that has its username.
		if e.Method == posture.EnrollUPDB {
			if _, err := a.Store.AuthenticatorByUsername(e.Username); err == nil {
				return nil, posture.Invalid("username", "an authenticator has this enrollment's username: create an enrollment with another", e.Username)
			} else if !errors.Is(err, posture.ErrNotFound) {
				return nil, err
			}
		}
		e.ExpiresAt, e.UpdatedAt = expires, a.Writer.Now().UTC()
		if err := a.issue(&e); err != nil {
			return nil, err
		}
		return []posture.Payload{posture.Updated[posture.Enrollment]{Entity: e}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// pkiRoutes are the CA and enrollment operations.
func (a *API) pkiRoutes() []api.Route {
	enrollments := a.enrollments()
	return append(a.caRoutes(),
		api.Route{Method: http.MethodGet, Path: "/enrollments", Access: api.Admin, Handler: enrollments.list},
		api.Route{Method: http.MethodPost, Path: "/enrollments", Access: api.Admin, Handler: a.createEnrollment},
		api.Route{Method: http.MethodGet, Path: "/enrollments/:id", Access: api.Admin, Handler: enrollments.detail},
		// DELETE: the token stops working.
		api.Route{Method: http.MethodDelete, Path: "/enrollments/:id", Access: api.Admin, Handler: enrollments.delete},
		api.Route{Method: http.MethodPost, Path: "/enrollments/:id/refresh", Access: api.Admin, Handler: a.refreshEnrollment},
		api.Route{Method: http.MethodGet, Path: "/identities/:id/enrollments", Access: api.Admin, Handler: a.identityEnrollments},
	)
}

// routerEnrollment is the enrollment of a new edge router: a one-time token
// and its JWT (em "erott"), valid for the enrollment duration.
func (a *API) routerEnrollment(routerID string, now time.Time) (posture.RouterEnrollment, error) {
	token := posture.NewToken()
	e := posture.RouterEnrollment{
		EnrollmentTokenHash: posture.HashToken(token), EnrollmentCreatedAt: now, EnrollmentExpiresAt: now.Add(a.enrollmentDuration()),
	}
	jwt, err := a.enrollmentJWT(posture.EnrollEROTT, routerID, token, e.EnrollmentExpiresAt)
	if err != nil {
		return e, err
	}
	if e.EnrollmentTokenSealed, err = a.seal(routerID, posture.FieldRouterEnrollToken, token); err != nil {
		return e, err
	}
	e.EnrollmentJWTSealed, err = a.seal(routerID, posture.FieldRouterEnrollJWT, jwt)
	return e, err
}
