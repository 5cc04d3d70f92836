package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// EnrollStore is what enrollment, certificate login and extension, and the
// ephemeral certificates read (projections.Store implements it).
type EnrollStore interface {
	IdentityEnrollmentReader
	RouterEnrollmentReader
	CertificateReader
}

// IdentityEnrollmentReader is what identity enrollment reads: the
// enrollment of a token, its identity and authenticators, the CAs.
type IdentityEnrollmentReader interface {
	Identity(id string) (posture.Identity, error)
	IdentityByName(name string) (posture.Identity, error)
	AuthenticatorByFingerprint(fp string) (posture.Authenticator, error)
	AuthenticatorByUsername(username string) (posture.Authenticator, error)
	IdentityAuthenticators(identityID string) ([]posture.Authenticator, error)
	EnrollmentByToken(token string) (posture.Enrollment, error)
	CA(id string) (posture.CA, error)
	CAs() ([]posture.CA, error)
}

// RouterEnrollmentReader is what edge-router enrollment reads.
type RouterEnrollmentReader interface {
	EdgeRouter(id string) (posture.EdgeRouter, error)
	EdgeRouterByEnrollmentToken(token string) (posture.EdgeRouter, error)
	EdgeRouterByFingerprint(fp string) (posture.EdgeRouter, error)
}

// CertificateReader is what certificate extension and the ephemeral
// certificates of API sessions read (extend.go, certificates.go).
type CertificateReader interface {
	CertExtension(authenticatorID string) (posture.CertExtension, error)
	SessionCertificate(id string) (posture.SessionCertificate, error)
	SessionCertificates(apiSessionID string) ([]posture.SessionCertificate, error)
}

// enrollRoutes are trust bootstrap, enrollment (identities and routers),
// the enrollment key set and challenge, certificate extension and the
// current API session's ephemeral certificates.
func (a *API) enrollRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/.well-known/est/cacerts", Access: api.Public, Handler: a.caCerts},
		{Method: http.MethodGet, Path: "/network-jwts", Access: api.Public, Handler: a.networkJWTs},
		{Method: http.MethodPost, Path: "/enroll", Access: api.Public, Handler: a.enroll, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/ott", Access: api.Public, Handler: a.enrollOTTJSON, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/ottca", Access: api.Public, Handler: a.enrollOTTCA, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/updb", Access: api.Public, Handler: a.enrollUPDB, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/ca", Access: api.Public, Handler: a.enrollCA, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/erott", Access: api.Public, Handler: a.enrollRouter, AnyBody: true},
		{Method: http.MethodPost, Path: "/enroll/extend/router", Access: api.Public, Handler: a.extendRouter, AnyBody: true},
		{Method: http.MethodGet, Path: "/enroll/jwks", Access: api.Public, Handler: a.enrollmentJWKS},
		{Method: http.MethodPost, Path: "/enroll/challenge", Access: api.Public, Handler: a.enrollmentChallenge},
		{Method: http.MethodPost, Path: "/current-identity/authenticators/:id/extend", Access: api.Session, Handler: a.extendAuthenticator},
		{Method: http.MethodPost, Path: "/current-identity/authenticators/:id/extend-verify", Access: api.Session, Handler: a.extendVerifyAuthenticator},
		{Method: http.MethodGet, Path: "/current-api-session/certificates", Access: api.Session, Handler: a.listSessionCertificates},
		{Method: http.MethodPost, Path: "/current-api-session/certificates", Access: api.Session, Handler: a.createSessionCertificate},
		{Method: http.MethodGet, Path: "/current-api-session/certificates/:id", Access: api.Session, Handler: a.detailSessionCertificate},
		{Method: http.MethodDelete, Path: "/current-api-session/certificates/:id", Access: api.Session, Handler: a.deleteSessionCertificate},
	}
}

// caCerts is GET /.well-known/est/cacerts: the CA bundle as the base64 of a
// certs-only PKCS#7 (RFC 7030), what SDKs fetch to bootstrap trust.
func (a *API) caCerts(c echo.Context) error {
	p7, err := a.PKI.PKCS7()
	if err != nil {
		return err
	}
	c.Response().Header().Set("Content-Transfer-Encoding", "base64")
	return c.Blob(http.StatusOK, "application/pkcs7-mime", []byte(p7))
}

type networkJWT struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// networkJWTs is GET /network-jwts: the JWT that bootstraps trust in the
// network (em "network", no expiry).
func (a *API) networkJWTs(c echo.Context) error {
	tok, err := a.Signer.NetworkJWT(a.Info.Advertise)
	if err != nil {
		return err
	}
	return api.OK(c, []networkJWT{{Name: "default", Token: tok}})
}

// enroll is POST /enroll?method=...&token=..., what SDKs and routers send.
func (a *API) enroll(c echo.Context) error {
	switch m := c.QueryParam("method"); m {
	case posture.EnrollOTT:
		return a.enrollOTT(c, !acceptsJSON(c))
	case posture.EnrollOTTCA:
		return a.enrollOTTCA(c)
	case posture.EnrollUPDB:
		return a.enrollUPDB(c)
	case posture.EnrollEROTT:
		return a.enrollRouter(c)
	case posture.EnrollCA:
		return a.enrollCA(c)
	case "":
		return &posture.Error{Code: posture.CodeInvalidEnrollMethod, Message: "the method query parameter is required: ott, ottca, updb, erott or ca"}
	default:
		return &posture.Error{Code: posture.CodeInvalidEnrollMethod, Message: fmt.Sprintf("unknown enrollment method %q: ott, ottca, updb, erott or ca", m)}
	}
}

// acceptsJSON reports whether the client asks for JSON rather than PEM.
func acceptsJSON(c echo.Context) bool {
	return strings.Contains(c.Request().Header.Get(echo.HeaderAccept), echo.MIMEApplicationJSON)
}

// tokenRequest is the JSON body some enrollment operations accept; the
// token may also come in the query.
type tokenRequest struct {
	Token     string `json:"token"`
	ClientCSR string `json:"clientCsr"`
	Username  string `json:"username"`
	Password  string `json:"password"`
}

// readTokenRequest reads an optional JSON body; a body that is not a JSON
// object is returned as raw (a PEM CSR). The query's token wins.
func readTokenRequest(c echo.Context) (tokenRequest, []byte, error) {
	var req tokenRequest
	body, err := api.ReadBody(c)
	if err != nil {
		return req, nil, err
	}
	if isObject, err := decodeObjectBody(body, &req); err != nil {
		return req, nil, err
	} else if isObject {
		body = nil
	}
	if t := c.QueryParam("token"); t != "" {
		req.Token = t
	}
	return req, body, nil
}

// decodeObjectBody decodes an enrollment's body into v when it is a JSON
// object, and reports whether it was; any other body (a PEM CSR, or
// nothing) is the caller's.
func decodeObjectBody(body []byte, v any) (bool, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false, nil
	}
	return true, api.DecodeBytes(trimmed, v)
}

// pending returns the unused enrollment of a token for the method, or the
// error the client sees. It runs again inside the model change that
// consumes the token, on the latest state.
func (a *API) pending(token, method string) (posture.Enrollment, error) {
	if !posture.IsToken(token) {
		return posture.Enrollment{}, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "the enrollment token is missing or not a UUID"}
	}
	e, err := a.Enroll.EnrollmentByToken(token)
	if errors.Is(err, posture.ErrNotFound) {
		return e, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "no enrollment has this token: it is unknown or was already used"}
	}
	if err != nil {
		return e, err
	}
	if e.Method != method {
		return e, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: fmt.Sprintf("the token is for %s enrollment, not %s", e.Method, method)}
	}
	if now := a.Writer.Now(); !now.Before(e.ExpiresAt) {
		return e, &posture.Error{Code: posture.CodeEnrollmentExpired, Message: "the enrollment expired at " + e.ExpiresAt.UTC().Format(api.TimeFormat)}
	}
	// No enrollment of the default admin is made any more (every admin
	// reads an enrollment's token); one an older node made is not redeemed.
	if i, err := a.Enroll.Identity(e.IdentityID); err == nil && i.IsDefaultAdmin {
		return e, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "the default admin is not enrolled with a token: its credentials are its own"}
	}
	return e, nil
}

// complete consumes the enrollment of a token under optimistic concurrency
// on the model: of two requests with the same token, on one node or two,
// one completes and the other finds the token used. build returns the
// authenticator the enrollment creates, on the latest state.
func (a *API) complete(c echo.Context, token, method string, build func(posture.Enrollment) (posture.Authenticator, error)) error {
	return a.Writer.Model(c, func() ([]posture.Payload, error) {
		enr, err := a.pending(token, method)
		if err != nil {
			return nil, err
		}
		if _, err := a.Enroll.Identity(enr.IdentityID); err != nil {
			if errors.Is(err, posture.ErrNotFound) {
				return nil, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "the identity of the enrollment no longer exists"}
			}
			return nil, err
		}
		au, err := build(enr)
		if err != nil {
			return nil, err
		}
		return []posture.Payload{posture.IdentityEnrolled{EnrollmentID: enr.ID, Method: method, Authenticator: au}}, nil
	})
}

// certAuthenticator is a new cert authenticator of an identity.
func (a *API) certAuthenticator(identityID string, cert *x509.Certificate, issuedByNetwork bool, caID string) posture.Authenticator {
	now := a.Writer.Now().UTC()
	return posture.Authenticator{
		ID: posture.NewID(), IdentityID: identityID, Method: posture.MethodCert,
		CertPEM: string(pki.EncodePEM(cert)), Fingerprint: pki.Fingerprint(cert), IsIssuedByNetwork: issuedByNetwork, CAID: caID,
		Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now,
	}
}

// freeFingerprint refuses a certificate that already authenticates someone.
func (a *API) freeFingerprint(fp string) error {
	_, err := a.Enroll.AuthenticatorByFingerprint(fp)
	if err == nil {
		return &posture.Error{Code: posture.CodeCertInUse, Message: "the certificate is already the certificate of an authenticator"}
	}
	if errors.Is(err, posture.ErrNotFound) {
		return nil
	}
	return err
}

// csrError translates a CSR failure of pki into the API's codes.
func csrError(field string, err error) error {
	switch {
	case errors.Is(err, pki.ErrMissingCSR), errors.Is(err, pki.ErrInvalidCSR):
		return &posture.Error{Code: posture.CodeMissingOrInvalidCSR, Message: field + ": " + strings.TrimPrefix(err.Error(), "pki: "), Err: err}
	case errors.Is(err, pki.ErrCSRSignature):
		return &posture.Error{Code: posture.CodeCouldNotProcessCSR, Message: field + ": " + strings.TrimPrefix(err.Error(), "pki: "), Err: err}
	}
	return err
}

// sign issues a certificate from a CSR as req says (its common name, usage,
// end and the names it may not ask for).
func (a *API) sign(field string, csr []byte, req pki.SignRequest) (*x509.Certificate, []byte, error) {
	if len(bytes.TrimSpace(csr)) == 0 {
		return nil, nil, &posture.Error{Code: posture.CodeMissingOrInvalidCSR, Message: field + " is required: a PEM certificate signing request"}
	}
	cert, pem, err := a.PKI.SignCSR(csr, req)
	if err != nil {
		return nil, nil, csrError(field, err)
	}
	return cert, pem, nil
}

type certResponse struct {
	Cert string `json:"cert"`
	CA   string `json:"ca"`
}

// enrollOTTJSON is POST /enroll/ott: as method=ott, answered in JSON.
func (a *API) enrollOTTJSON(c echo.Context) error { return a.enrollOTT(c, false) }

// enrollOTT enrolls an identity with a one-time token and a CSR: the
// identity gets a cert authenticator with the certificate issued for the
// CSR. The answer is the PEM chain, or {cert, ca} in JSON.
func (a *API) enrollOTT(c echo.Context, pemAnswer bool) error {
	req, body, err := readTokenRequest(c)
	if err != nil {
		return err
	}
	csr := body
	if req.ClientCSR != "" {
		csr = []byte(req.ClientCSR)
	}
	enr, err := a.pending(req.Token, posture.EnrollOTT)
	if err != nil {
		return err
	}
	cert, certPEM, err := a.sign("csr", csr, pki.SignRequest{CommonName: enr.IdentityID, Usage: pki.UsageClient})
	if err != nil {
		return err
	}
	au := a.certAuthenticator(enr.IdentityID, cert, true, "")
	err = a.complete(c, req.Token, posture.EnrollOTT, func(posture.Enrollment) (posture.Authenticator, error) {
		return au, nil
	})
	if err != nil {
		return err
	}
	if pemAnswer {
		chain := append(append([]byte(nil), certPEM...), a.PKI.PEM()...)
		return c.Blob(http.StatusOK, "application/x-pem-file", chain)
	}
	return api.OK(c, certResponse{Cert: string(certPEM), CA: string(a.PKI.PEM())})
}

// enrollUPDB is POST /enroll/updb?token= and POST /enroll?method=updb:
// {password} sets the password of the username the administrator preset.
func (a *API) enrollUPDB(c echo.Context) error {
	req, body, err := readTokenRequest(c)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) > 0 {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON object: {password}"}
	}
	if err := api.CheckLength("password", req.Password, api.MinPassword, api.MaxPassword); err != nil {
		return err
	}
	enr, err := a.pending(req.Token, posture.EnrollUPDB)
	if err != nil {
		return err
	}
	if req.Username != "" && req.Username != enr.Username {
		return posture.Invalid("username", "must be the username of the enrollment (or absent)", req.Username)
	}
	hash, err := api.SealedPasswordHash(c.Request().Context(), a.Secrets, enr.IdentityID, req.Password)
	if err != nil {
		return err
	}
	err = a.complete(c, req.Token, posture.EnrollUPDB, func(enr posture.Enrollment) (posture.Authenticator, error) {
		if _, err := a.Enroll.AuthenticatorByUsername(enr.Username); err == nil {
			return posture.Authenticator{}, posture.Invalid("username", "username is already in use", enr.Username)
		} else if !errors.Is(err, posture.ErrNotFound) {
			return posture.Authenticator{}, err
		}
		existing, err := a.Enroll.IdentityAuthenticators(enr.IdentityID)
		if err != nil {
			return posture.Authenticator{}, err
		}
		for _, au := range existing {
			if au.Method == posture.MethodPassword {
				return posture.Authenticator{}, &posture.Error{Code: posture.CodeEnrollmentExists, Message: "the identity already has a updb authenticator"}
			}
		}
		now := a.Writer.Now().UTC()
		return posture.Authenticator{
			ID: posture.NewID(), IdentityID: enr.IdentityID, Method: posture.MethodPassword, Username: enr.Username,
			PasswordHashSealed: hash, Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now,
		}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// peerChain is the client certificate chain of the TLS connection, leaf
// first (empty without mutual TLS).
func peerChain(c echo.Context) []*x509.Certificate {
	if state := c.Request().TLS; state != nil {
		return state.PeerCertificates
	}
	return nil
}

// issuedBy reports whether ca (a CA an administrator added) issued the
// certificate chain: it chains to the CA's certificate, now, for client
// authentication.
func issuedBy(ca posture.CA, chain []*x509.Certificate) bool {
	roots, err := pki.ParseCertificatesPEM([]byte(ca.CertPEM))
	if err != nil || len(chain) == 0 {
		return false
	}
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	return pki.Verify(chain[0], pool, pki.UsageClient, time.Time{}, chain[1:]...) == nil
}

func certFailed(msg string) error {
	return &posture.Error{Code: posture.CodeCertFailedValidation, Message: msg}
}

// enrollOTTCA is POST /enroll/ottca and POST /enroll?method=ottca: an
// identity pre-created with an ottca enrollment presents a certificate of
// the enrollment's CA (verified, ottca enrollment enabled) over mutual TLS;
// the certificate becomes its cert authenticator.
func (a *API) enrollOTTCA(c echo.Context) error {
	req, _, err := readTokenRequest(c)
	if err != nil {
		return err
	}
	enr, err := a.pending(req.Token, posture.EnrollOTTCA)
	if err != nil {
		return err
	}
	chain := peerChain(c)
	if len(chain) == 0 {
		return certFailed("ottca enrollment needs a client certificate of the enrollment's CA on the TLS connection")
	}
	check := func(enr posture.Enrollment) error {
		ca, err := a.Enroll.CA(enr.CAID)
		if errors.Is(err, posture.ErrNotFound) {
			return certFailed("the CA of the enrollment no longer exists")
		}
		if err != nil {
			return err
		}
		switch {
		case !ca.IsVerified:
			return certFailed("the CA of the enrollment is not verified")
		case !ca.IsOttCaEnrollmentEnabled:
			return certFailed("the CA of the enrollment does not allow ottca enrollment")
		case !issuedBy(ca, chain):
			return certFailed("the client certificate was not issued by the CA of the enrollment, or is not valid now")
		}
		return a.freeFingerprint(pki.Fingerprint(chain[0]))
	}
	if err := check(enr); err != nil {
		return err
	}
	au := a.certAuthenticator(enr.IdentityID, chain[0], false, enr.CAID)
	err = a.complete(c, req.Token, posture.EnrollOTTCA, func(enr posture.Enrollment) (posture.Authenticator, error) {
		return au, check(enr)
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// enrollCA is POST /enroll/ca and POST /enroll?method=ca: CA auto
// enrollment. A client certificate of a verified CA that allows auto
// enrollment creates an identity (named by the CA's identityNameFormat,
// with its identityRoles) whose cert authenticator it becomes.
func (a *API) enrollCA(c echo.Context) error {
	chain := peerChain(c)
	if len(chain) == 0 {
		return certFailed("CA auto enrollment needs a client certificate of a verified CA on the TLS connection")
	}
	leaf := chain[0]
	fp := pki.Fingerprint(leaf)
	// The client may ask for a name ({"name": ...}, as the OpenZiti SDKs
	// send it): the CA's format's [requestedName]; by default the
	// certificate's common name. A body that is no JSON object asks for
	// none: it is ignored, as it was before names were asked for.
	var req struct {
		Name string `json:"name"`
	}
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	if _, err := decodeObjectBody(body, &req); err != nil {
		return err
	}
	requested := leaf.Subject.CommonName
	if req.Name != "" {
		if err := api.CheckMax("name", req.Name, api.MaxLabel); err != nil {
			return err
		}
		if err := api.CheckVisible("name", req.Name); err != nil {
			return err
		}
		requested = req.Name
	}
	issuer := func() (posture.CA, error) {
		cas, err := a.Enroll.CAs()
		if err != nil {
			return posture.CA{}, err
		}
		for _, ca := range cas {
			if ca.IsVerified && ca.IsAutoCaEnrollmentEnabled && issuedBy(ca, chain) {
				return ca, nil
			}
		}
		return posture.CA{}, certFailed("the client certificate was not issued by a verified CA that allows auto enrollment, or is not valid now")
	}
	identityID := posture.NewID()
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		ca, err := issuer()
		if err != nil {
			return nil, err
		}
		if err := a.freeFingerprint(fp); err != nil {
			return nil, err
		}
		name, err := a.autoName(ca, leaf, requested, identityID)
		if err != nil {
			return nil, err
		}
		now := a.Writer.Now().UTC()
		attrs := append([]string{}, ca.IdentityRoles...)
		i := posture.Identity{ID: identityID, Name: name, Type: posture.IdentityDefault, RoleAttributes: attrs,
			Tags: posture.Tags{}, CreatedAt: now, UpdatedAt: now}
		return []posture.Payload{posture.IdentityEnrolled{Method: posture.EnrollCA, Identity: &i,
			Authenticator: a.certAuthenticator(identityID, leaf, false, ca.ID)}}, nil
	})
	if err != nil {
		return err
	}
	return api.Empty(c)
}

// autoName names an identity made by CA auto enrollment: the CA's format
// with its placeholders filled, and a counter appended while the name is
// taken.
func (a *API) autoName(ca posture.CA, leaf *x509.Certificate, requested, identityID string) (string, error) {
	format := ca.IdentityNameFormat
	if format == "" {
		format = posture.DefaultIdentityNameFormat
	}
	base := strings.NewReplacer(
		"[caName]", ca.Name, "[caId]", ca.ID, "[commonName]", leaf.Subject.CommonName,
		"[identityId]", identityID, "[requestedName]", requested,
	).Replace(format)
	if strings.TrimSpace(base) == "" {
		base = identityID
	}
	// The name, with the counter a taken one gets, is at most MaxLabel.
	if n := utf8.RuneCountInString(base) + 6; n > api.MaxLabel {
		return "", posture.Invalid("name", fmt.Sprintf("the name the CA's identityNameFormat makes is over %d characters with a counter", api.MaxLabel-6),
			fmt.Sprintf("(%d characters)", n-6))
	}
	name := base
	for n := 1; n < 1000; n++ {
		_, err := a.Enroll.IdentityByName(name)
		if errors.Is(err, posture.ErrNotFound) {
			return name, nil
		}
		if err != nil {
			return "", err
		}
		name = fmt.Sprintf("%s%06d", base, n)
	}
	return "", posture.Invalid("name", "no free identity name for the format", base)
}

// routerCSRs is the body of a router enrollment or extension: routers send
// serverCertCsr and certCsr; the spec names them serverCsr and clientCsr.
type routerCSRs struct {
	Token         string `json:"token"`
	ServerCertCSR string `json:"serverCertCsr"`
	CertCSR       string `json:"certCsr"`
	ServerCSR     string `json:"serverCsr"`
	ClientCSR     string `json:"clientCsr"`
}

func readRouterCSRs(c echo.Context) (routerCSRs, error) {
	var req routerCSRs
	if err := api.Decode(c, &req); err != nil {
		return req, err
	}
	if req.ServerCertCSR == "" {
		req.ServerCertCSR = req.ServerCSR
	}
	if req.CertCSR == "" {
		req.CertCSR = req.ClientCSR
	}
	if t := c.QueryParam("token"); t != "" {
		req.Token = t
	}
	return req, nil
}

// routerCerts issues a router's server and client certificates. The
// server certificate may not name a host or address of a controller: the
// clients of postured's APIs and of its NATS servers trust the same CA, so
// a router holding one could pose as the controller.
func (a *API) routerCerts(ctx context.Context, routerID string, req routerCSRs) (server, client *x509.Certificate, serverPEM, clientPEM []byte, err error) {
	taken, err := a.controllerCerts(ctx)
	if err != nil {
		return
	}
	if server, serverPEM, err = a.sign("serverCertCsr", []byte(req.ServerCertCSR), pki.SignRequest{CommonName: routerID, Usage: pki.UsageServer, Taken: taken}); err != nil {
		return
	}
	client, clientPEM, err = a.sign("certCsr", []byte(req.CertCSR), pki.SignRequest{CommonName: routerID, Usage: pki.UsageClient})
	return
}

// controllerCerts are the server certificates of this node and of the live
// nodes in the registry.
func (a *API) controllerCerts(ctx context.Context) ([]*x509.Certificate, error) {
	certs := []*x509.Certificate{a.Signer.Certificate()}
	if a.Controllers == nil {
		return certs, nil
	}
	nodes, err := a.Controllers.List(ctx)
	if err != nil {
		return nil, &posture.Error{Code: posture.CodeUnavailable, Message: "the node registry cannot be read", Err: err}
	}
	for _, n := range nodes {
		if cert, err := pki.ParseCertificatePEM([]byte(n.CertPEM)); err == nil {
			certs = append(certs, cert)
		}
	}
	return certs, nil
}

type routerEnrollResponse struct {
	ServerCert string `json:"serverCert"`
	Cert       string `json:"cert"`
	CA         string `json:"ca"`
}

// routerPending returns the router whose enrollment has the token.
func (a *API) routerPending(token string) (posture.EdgeRouter, error) {
	if !posture.IsToken(token) {
		return posture.EdgeRouter{}, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "the enrollment token is missing or not a UUID"}
	}
	r, err := a.Enroll.EdgeRouterByEnrollmentToken(token)
	if errors.Is(err, posture.ErrNotFound) {
		return r, &posture.Error{Code: posture.CodeInvalidEnrollmentToken, Message: "no edge router enrollment has this token: it is unknown or was already used"}
	}
	if err != nil {
		return r, err
	}
	if !a.Writer.Now().Before(r.EnrollmentExpiresAt) {
		return r, &posture.Error{Code: posture.CodeEnrollmentExpired, Message: "the enrollment expired at " + r.EnrollmentExpiresAt.UTC().Format(api.TimeFormat)}
	}
	return r, nil
}

// enrollRouter is POST /enroll/erott and POST /enroll?method=erott: an edge
// router enrolls with its one-time token and gets a server and a client
// certificate.
func (a *API) enrollRouter(c echo.Context) error {
	req, err := readRouterCSRs(c)
	if err != nil {
		return err
	}
	r, err := a.routerPending(req.Token)
	if err != nil {
		return err
	}
	server, client, serverPEM, clientPEM, err := a.routerCerts(c.Request().Context(), r.ID, req)
	if err != nil {
		return err
	}
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		cur, err := a.routerPending(req.Token)
		if err != nil {
			return nil, err
		}
		return []posture.Payload{posture.RouterEnrolled{
			RouterID: cur.ID, TokenHash: posture.HashToken(req.Token), Fingerprint: pki.Fingerprint(client), CertPEM: string(clientPEM),
			ServerFingerprint: pki.Fingerprint(server),
		}}, nil
	})
	if err != nil {
		return err
	}
	return api.OK(c, routerEnrollResponse{ServerCert: string(serverPEM), Cert: string(clientPEM), CA: string(a.PKI.PEM())})
}

// enrolledRouter returns the router whose current client certificate the
// request presents over mutual TLS.
func (a *API) enrolledRouter(chain []*x509.Certificate) (posture.EdgeRouter, error) {
	unauthorized := &posture.Error{Code: posture.CodeUnauthorized, Message: "router extension needs the router's current, valid client certificate on the TLS connection"}
	if len(chain) == 0 {
		return posture.EdgeRouter{}, unauthorized
	}
	r, err := a.Enroll.EdgeRouterByFingerprint(pki.Fingerprint(chain[0]))
	if errors.Is(err, posture.ErrNotFound) {
		return r, unauthorized
	}
	if err != nil {
		return r, err
	}
	if pki.Verify(chain[0], a.PKI.Pool(), pki.UsageClient, time.Time{}) != nil {
		return r, unauthorized
	}
	return r, nil
}

type routerExtendResponse struct {
	Cert       string `json:"cert"`
	ServerCert string `json:"serverCert"`
	CA         string `json:"ca"`
}

// extendRouter is POST /enroll/extend/router: a router presenting its
// current client certificate gets new server and client certificates; the
// previous client certificate no longer identifies it, even unexpired.
func (a *API) extendRouter(c echo.Context) error {
	chain := peerChain(c)
	r, err := a.enrolledRouter(chain)
	if err != nil {
		return err
	}
	req, err := readRouterCSRs(c)
	if err != nil {
		return err
	}
	server, client, serverPEM, clientPEM, err := a.routerCerts(c.Request().Context(), r.ID, req)
	if err != nil {
		return err
	}
	err = a.Writer.Model(c, func() ([]posture.Payload, error) {
		cur, err := a.enrolledRouter(chain)
		if err != nil {
			return nil, err
		}
		return []posture.Payload{posture.RouterCertificatesRenewed{
			RouterID: cur.ID, PreviousFingerprint: cur.Fingerprint, Fingerprint: pki.Fingerprint(client),
			CertPEM: string(clientPEM), ServerFingerprint: pki.Fingerprint(server),
		}}, nil
	})
	if err != nil {
		return err
	}
	return api.OK(c, routerExtendResponse{Cert: string(clientPEM), ServerCert: string(serverPEM), CA: string(a.PKI.PEM())})
}

// enrollmentJWKS is GET /enroll/jwks: the keys that sign enrollment JWTs
// and challenges, as a JSON Web Key Set (not in the data envelope).
func (a *API) enrollmentJWKS(c echo.Context) error {
	return c.JSON(http.StatusOK, a.Signer.JWKS())
}

// enrollmentChallenge is POST /enroll/challenge {keyId, nonce}: the
// controller proves it holds the key keyId by signing the nonce (a UUID).
// The answer {algorithm, caPool, kid, signature} verifies with the JWK.
func (a *API) enrollmentChallenge(c echo.Context) error {
	var req struct {
		KeyID string `json:"keyId"`
		Nonce string `json:"nonce"`
	}
	if err := api.Decode(c, &req); err != nil {
		return err
	}
	if req.KeyID == "" {
		return posture.Invalid("keyId", "is required", nil)
	}
	if req.Nonce == "" {
		return posture.Invalid("nonce", "is required", nil)
	}
	resp, err := a.Signer.Challenge(req.KeyID, req.Nonce)
	switch {
	case errors.Is(err, pki.ErrInvalidNonce):
		return posture.Invalid("nonce", "must be a UUID", req.Nonce)
	case errors.Is(err, pki.ErrUnknownKey):
		return posture.Invalid("keyId", "is not a key of the enrollment key set (GET /enroll/jwks)", req.KeyID)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, resp)
}
