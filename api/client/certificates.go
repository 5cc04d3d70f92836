package client

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// SessionCertificateValidity is the lifetime of an ephemeral certificate
// of the current API session.
const SessionCertificateValidity = 12 * time.Hour

type sessionCertificateView struct {
	ID          string       `json:"id"`
	Subject     string       `json:"subject"`
	Fingerprint string       `json:"fingerprint"`
	ValidFrom   api.Time     `json:"validFrom"`
	ValidTo     api.Time     `json:"validTo"`
	Certificate string       `json:"certificate"`
	CreatedAt   api.Time     `json:"createdAt"`
	UpdatedAt   api.Time     `json:"updatedAt"`
	Tags        posture.Tags `json:"tags"`
	Links       api.Links    `json:"_links"`
}

func sessionCertificateLinks(id string) api.Links {
	return api.Links{"self": {Href: "./current-api-session/certificates/" + id}}
}

func newSessionCertificateView(sc posture.SessionCertificate) sessionCertificateView {
	return sessionCertificateView{
		ID: sc.ID, Subject: sc.Subject, Fingerprint: sc.Fingerprint, ValidFrom: api.Time(sc.ValidFrom),
		ValidTo: api.Time(sc.ValidTo), Certificate: sc.CertPEM, CreatedAt: api.Time(sc.CreatedAt),
		UpdatedAt: api.Time(sc.CreatedAt), Tags: posture.Tags{}, Links: sessionCertificateLinks(sc.ID),
	}
}

// listSessionCertificates is GET /current-api-session/certificates.
func (a *API) listSessionCertificates(c echo.Context) error {
	list, err := a.Enroll.SessionCertificates(api.PrincipalOf(c).Session.ID)
	if err != nil {
		return err
	}
	views := make([]sessionCertificateView, len(list))
	for i, sc := range list {
		views[i] = newSessionCertificateView(sc)
	}
	return api.List(c, views)
}

type sessionCertificateCreated struct {
	ID          string    `json:"id"`
	Links       api.Links `json:"_links"`
	Certificate string    `json:"certificate"`
	CAs         string    `json:"cas"`
}

// createSessionCertificate is POST /current-api-session/certificates
// {csr}: a client certificate for the CSR's key, valid for 12 hours and
// only as long as the API session.
func (a *API) createSessionCertificate(c echo.Context) error {
	p := api.PrincipalOf(c)
	var req struct {
		CSR string `json:"csr"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	if req.CSR == "" {
		return posture.Invalid("csr", "is required: a PEM certificate signing request", nil)
	}
	now := a.Writer.Now().UTC()
	cert, certPEM, err := a.sign("csr", []byte(req.CSR), pki.SignRequest{CommonName: p.Identity.ID, Usage: pki.UsageClient, NotAfter: now.Add(SessionCertificateValidity)})
	if err != nil {
		return err
	}
	sc := posture.SessionCertificate{
		ID: posture.NewID(), APISessionID: p.Session.ID, IdentityID: p.Identity.ID, Subject: cert.Subject.String(),
		Fingerprint: pki.Fingerprint(cert), CertPEM: string(certPEM), ValidFrom: cert.NotBefore.UTC(),
		ValidTo: cert.NotAfter.UTC(), CreatedAt: now,
	}
	if _, err := a.Writer.AppendBudgeted(c, a.Budget, sc.IdentityID, posture.SessionCertificateCreated{Certificate: sc}, 0); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.Envelope{Data: sessionCertificateCreated{
		ID: sc.ID, Links: sessionCertificateLinks(sc.ID), Certificate: sc.CertPEM, CAs: string(a.PKI.PEM()),
	}})
}

// ownSessionCertificate reads an ephemeral certificate of the caller's API
// session; another session's is NOT_FOUND, as a missing one is.
func (a *API) ownSessionCertificate(c echo.Context) (posture.SessionCertificate, error) {
	id := c.Param("id")
	sc, err := a.Enroll.SessionCertificate(id)
	if err == nil && sc.APISessionID != api.PrincipalOf(c).Session.ID {
		err = posture.ErrNotFound
	}
	if errors.Is(err, posture.ErrNotFound) {
		return sc, posture.NotFound("certificate", id)
	}
	return sc, err
}

// detailSessionCertificate is GET /current-api-session/certificates/:id.
func (a *API) detailSessionCertificate(c echo.Context) error {
	sc, err := a.ownSessionCertificate(c)
	if err != nil {
		return err
	}
	return api.OK(c, newSessionCertificateView(sc))
}

// deleteSessionCertificate is DELETE /current-api-session/certificates/:id.
func (a *API) deleteSessionCertificate(c echo.Context) error {
	sc, err := a.ownSessionCertificate(c)
	if err != nil {
		return err
	}
	if _, err := a.Writer.Append(c, posture.SessionCertificateDeleted{ID: sc.ID, APISessionID: sc.APISessionID, IdentityID: sc.IdentityID}); err != nil {
		return err
	}
	return api.Empty(c)
}
