package management

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

type caInput struct {
	Name                      *string         `json:"name,omitempty"`
	CertPEM                   *string         `json:"certPem,omitempty"`
	IdentityRoles             *[]string       `json:"identityRoles,omitempty"`
	IsAuthEnabled             *bool           `json:"isAuthEnabled,omitempty"`
	IsAutoCaEnrollmentEnabled *bool           `json:"isAutoCaEnrollmentEnabled,omitempty"`
	IsOttCaEnrollmentEnabled  *bool           `json:"isOttCaEnrollmentEnabled,omitempty"`
	IdentityNameFormat        *string         `json:"identityNameFormat,omitempty"`
	ExternalIDClaim           json.RawMessage `json:"externalIdClaim,omitempty"`
	Tags                      posture.Tags    `json:"tags,omitempty"`
}

// cas is the CA resource: administrators add CAs whose certificates may,
// once the CA is verified, authenticate identities and enroll them.
func (a *API) cas() *resource[posture.CA, caInput] {
	return &resource[posture.CA, caInput]{
		a: a, kind: posture.KindCA, noun: "CA",
		input: func(ca posture.CA, _ time.Time) caInput {
			return caInput{
				Name: &ca.Name, CertPEM: &ca.CertPEM, IdentityRoles: &ca.IdentityRoles, IsAuthEnabled: &ca.IsAuthEnabled,
				IsAutoCaEnrollmentEnabled: &ca.IsAutoCaEnrollmentEnabled, IsOttCaEnrollmentEnabled: &ca.IsOttCaEnrollmentEnabled,
				IdentityNameFormat: &ca.IdentityNameFormat, ExternalIDClaim: ca.ExternalIDClaim, Tags: ca.Tags,
			}
		},
		build: a.buildCA,
		view:  pure(a.caView),
		shred: true,
	}
}

func required[T any](field string, v *T) (T, error) {
	if v == nil {
		var zero T
		return zero, posture.Invalid(field, "is required", nil)
	}
	return *v, nil
}

// buildCA validates a CA. The certificate is given at creation and cannot
// change (a new CA is a new entity); the verification state and token are
// kept across updates.
func (a *API) buildCA(in caInput, old *posture.CA, now time.Time) (posture.CA, error) {
	var ca posture.CA
	var err error
	if old != nil {
		ca = *old
	} else {
		ca.ID, ca.CreatedAt = posture.NewID(), now
		if ca.VerificationTokenSealed, err = a.seal(ca.ID, posture.FieldCAVerificationToken, posture.NewToken()); err != nil {
			return ca, err
		}
	}
	ca.UpdatedAt = now
	if ca.Name, err = name("name", in.Name); err != nil {
		return ca, err
	}
	if err := a.unique(posture.KindCA, ca.Name, ca.ID); err != nil {
		return ca, err
	}
	switch {
	case old == nil:
		pem, err := required("certPem", in.CertPEM)
		if err != nil {
			return ca, err
		}
		cert, err := pki.ParseCACertificatePEM([]byte(pem))
		if err != nil {
			return ca, posture.Invalid("certPem", "must be a PEM CA certificate: "+strings.TrimPrefix(err.Error(), "pki: "), nil)
		}
		ca.CertPEM, ca.Fingerprint = string(pki.EncodePEM(cert)), pki.Fingerprint(cert)
		others, err := list[posture.CA](a.Store)
		if err != nil {
			return ca, err
		}
		for _, o := range others {
			if o.Fingerprint == ca.Fingerprint {
				return ca, posture.Invalid("certPem", "another CA has this certificate: "+o.Name, nil)
			}
		}
	case in.CertPEM != nil:
		if cert, err := pki.ParseCertificatePEM([]byte(*in.CertPEM)); err != nil || pki.Fingerprint(cert) != old.Fingerprint {
			return ca, posture.Invalid("certPem", "cannot be changed: add a new CA instead", nil)
		}
	}
	var had []string
	if old != nil {
		had = old.IdentityRoles
	}
	if ca.IdentityRoles, err = attributes("identityRoles", had, in.IdentityRoles); err != nil {
		return ca, err
	}
	if ca.IsAuthEnabled, err = required("isAuthEnabled", in.IsAuthEnabled); err != nil {
		return ca, err
	}
	if ca.IsAutoCaEnrollmentEnabled, err = required("isAutoCaEnrollmentEnabled", in.IsAutoCaEnrollmentEnabled); err != nil {
		return ca, err
	}
	if ca.IsOttCaEnrollmentEnabled, err = required("isOttCaEnrollmentEnabled", in.IsOttCaEnrollmentEnabled); err != nil {
		return ca, err
	}
	ca.IdentityNameFormat = strings.TrimSpace(deref(in.IdentityNameFormat, ""))
	if ca.IdentityNameFormat == "" {
		ca.IdentityNameFormat = posture.DefaultIdentityNameFormat
	}
	if utf8.RuneCountInString(ca.IdentityNameFormat) > maxName {
		return ca, posture.Invalid("identityNameFormat", "is too long", ca.IdentityNameFormat)
	}
	ca.ExternalIDClaim = nil
	if raw := in.ExternalIDClaim; len(raw) > 0 && string(raw) != "null" {
		var claim map[string]any
		if err := json.Unmarshal(raw, &claim); err != nil {
			return ca, posture.Invalid("externalIdClaim", "must be an object or null", raw)
		}
		ca.ExternalIDClaim = append(json.RawMessage(nil), raw...)
	}
	ca.Tags, err = tags(in.Tags)
	return ca, err
}

func (a *API) caView(ca posture.CA) any {
	links := api.SelfLink(string(posture.KindCA), ca.ID)
	links["verify"] = api.Link{Href: "./cas/" + ca.ID + "/verify"}
	links["jwt"] = api.Link{Href: "./cas/" + ca.ID + "/jwt"}
	v := map[string]any{
		"id": ca.ID, "name": ca.Name, "certPem": ca.CertPEM, "fingerprint": ca.Fingerprint,
		"isVerified": ca.IsVerified, "verificationToken": a.reveal(ca.ID, posture.FieldCAVerificationToken, ca.VerificationTokenSealed, ca.VerificationToken), "identityRoles": ca.IdentityRoles,
		"isAuthEnabled": ca.IsAuthEnabled, "isAutoCaEnrollmentEnabled": ca.IsAutoCaEnrollmentEnabled,
		"isOttCaEnrollmentEnabled": ca.IsOttCaEnrollmentEnabled, "identityNameFormat": ca.IdentityNameFormat,
		"tags": ca.Tags, "createdAt": api.Time(ca.CreatedAt), "updatedAt": api.Time(ca.UpdatedAt), "_links": links,
	}
	// Without a claim the key is left out, as the real controller does.
	if len(ca.ExternalIDClaim) > 0 {
		v["externalIdClaim"] = ca.ExternalIDClaim
	}
	return v
}

// verifyCA is POST /cas/:id/verify: the body (text/plain) is a PEM
// certificate signed by the CA whose common name is the CA's
// verificationToken, which proves that the administrator holds the CA's
// key. From then on the CA's certificates count.
func (a *API) verifyCA(c echo.Context) error {
	id := c.Param("id")
	proof, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	ca, err := get[posture.CA](a.Store, "CA", id)
	if err != nil {
		return err
	}
	if ca.IsVerified {
		return &posture.Error{Code: posture.CodeCAAlreadyVerified}
	}
	token, err := api.Reveal(c.Request().Context(), a.Secrets, ca.ID, posture.FieldCAVerificationToken, ca.VerificationTokenSealed, ca.VerificationToken)
	if err != nil {
		return err
	}
	err = pki.VerifyCAProof([]byte(ca.CertPEM), proof, token, a.Writer.Now())
	switch {
	case errors.Is(err, pki.ErrInvalidCommonName):
		return &posture.Error{Code: posture.CodeInvalidCommonName, Message: "the certificate's common name must be the CA's verificationToken"}
	case errors.Is(err, pki.ErrInvalidCertificate):
		return &posture.Error{Code: posture.CodeExpectedPEMCertificate, Message: "the body must be a PEM certificate signed by the CA"}
	case errors.Is(err, pki.ErrCertificateFailedValidation):
		return &posture.Error{Code: posture.CodeCertFailedValidation, Message: "the certificate was not signed by the CA or is not valid now"}
	case err != nil:
		return err
	}
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		cur, err := get[posture.CA](a.Store, "CA", id)
		if err != nil {
			return nil, err
		}
		if cur.IsVerified {
			return nil, &posture.Error{Code: posture.CodeCAAlreadyVerified}
		}
		if cur.VerificationTokenSealed != ca.VerificationTokenSealed || cur.VerificationToken != ca.VerificationToken || cur.Fingerprint != ca.Fingerprint {
			return nil, &posture.Error{Code: posture.CodeConflict, Message: "the CA changed meanwhile; verify again"}
		}
		return []posture.Payload{posture.CAVerified{ID: id}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// caJWT is GET /cas/:id/jwt: the enrollment JWT of a CA (em "ca"), which
// tells an SDK where to do CA auto enrollment with a certificate of it.
func (a *API) caJWT(c echo.Context) error {
	ca, err := get[posture.CA](a.Store, "CA", c.Param("id"))
	if err != nil {
		return err
	}
	if a.Signer == nil {
		return &posture.Error{Code: posture.CodeUnavailable, Message: "no enrollment signer is configured"}
	}
	tok, err := a.enrollmentJWT(posture.EnrollCA, ca.ID, posture.NewToken(), time.Time{})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/jwt", []byte(tok))
}

// issuer is the iss of enrollment JWTs: the URL of the API this node serves.
func (a *API) issuer() string { return "https://" + a.Info.Advertise }

// caRoutes are the CA operations.
func (a *API) caRoutes() []api.Route {
	return append(a.cas().routes(),
		api.Route{Method: http.MethodPost, Path: "/cas/:id/verify", Access: api.Admin, Handler: a.verifyCA, AnyBody: true},
		api.Route{Method: http.MethodGet, Path: "/cas/:id/jwt", Access: api.Admin, Handler: a.caJWT},
	)
}
