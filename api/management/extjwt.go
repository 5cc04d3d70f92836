package management

import (
	"net/url"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

type extJWTInput struct {
	Name            *string      `json:"name,omitempty"`
	Issuer          *string      `json:"issuer,omitempty"`
	Audience        *string      `json:"audience,omitempty"`
	CertPEM         *string      `json:"certPem,omitempty"`
	JWKSEndpoint    *string      `json:"jwksEndpoint,omitempty"`
	Kid             *string      `json:"kid,omitempty"`
	ClaimsProperty  *string      `json:"claimsProperty,omitempty"`
	UseExternalID   *bool        `json:"useExternalId,omitempty"`
	Enabled         *bool        `json:"enabled,omitempty"`
	ExternalAuthURL *string      `json:"externalAuthUrl,omitempty"`
	ClientID        *string      `json:"clientId,omitempty"`
	Scopes          []string     `json:"scopes,omitempty"`
	Tags            posture.Tags `json:"tags,omitempty"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (a *API) extJWTSigners() *resource[posture.ExternalJWTSigner, extJWTInput] {
	return &resource[posture.ExternalJWTSigner, extJWTInput]{
		a: a, kind: posture.KindExternalJWTSigner, noun: "external JWT signer",
		input: func(s posture.ExternalJWTSigner, _ time.Time) extJWTInput {
			return extJWTInput{
				Name: &s.Name, Issuer: &s.Issuer, Audience: &s.Audience, CertPEM: optional(s.CertPEM),
				JWKSEndpoint: optional(s.JWKSEndpoint), Kid: optional(s.Kid), ClaimsProperty: &s.ClaimsProperty, UseExternalID: &s.UseExternalID,
				Enabled: &s.Enabled, ExternalAuthURL: optional(s.ExternalAuthURL), ClientID: optional(s.ClientID),
				Scopes: s.Scopes, Tags: s.Tags,
			}
		},
		build: a.buildExtJWTSigner,
		view:  pure(extJWTSignerView),
		// A signer has a certificate or a key set: a patch that sets one
		// drops the other.
		aliases: [][]string{{"certPem", "jwksEndpoint"}},
	}
}

// extJWTRoutes are the external JWT signer operations.
func (a *API) extJWTRoutes() []api.Route { return a.extJWTSigners().routes() }

// maxExtJWTField bounds the issuer, audience, URLs and other strings.
const maxExtJWTField = 2048

func requiredString(field string, v *string) (string, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return "", posture.Invalid(field, "is required", nil)
	}
	s := strings.TrimSpace(*v)
	if len(s) > maxExtJWTField {
		return "", posture.Invalid(field, "is too long", s)
	}
	return s, nil
}

// httpURL validates an optional absolute http(s) URL.
func httpURL(field string, v *string) (string, error) {
	s := strings.TrimSpace(deref(v, ""))
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(s) > maxExtJWTField {
		return "", posture.Invalid(field, "must be an absolute http or https URL", posture.RedactedURL(s))
	}
	if u.User != nil {
		// Not echoed: the value holds a credential.
		return "", posture.Invalid(field, "must not carry a user name or password (the URL is stored and shown in clear)", posture.RedactedURL(s))
	}
	return s, nil
}

func (a *API) buildExtJWTSigner(in extJWTInput, old *posture.ExternalJWTSigner, now time.Time) (posture.ExternalJWTSigner, error) {
	var s posture.ExternalJWTSigner
	var err error
	if old != nil {
		s.ID, s.CreatedAt = old.ID, old.CreatedAt
	} else {
		s.ID, s.CreatedAt = posture.NewID(), now
	}
	s.UpdatedAt = now
	if s.Name, err = name("name", in.Name); err != nil {
		return s, err
	}
	if err := a.unique(posture.KindExternalJWTSigner, s.Name, s.ID); err != nil {
		return s, err
	}
	if s.Issuer, err = requiredString("issuer", in.Issuer); err != nil {
		return s, err
	}
	signers, err := list[posture.ExternalJWTSigner](a.Store)
	if err != nil {
		return s, err
	}
	for _, other := range signers {
		if other.Issuer == s.Issuer && other.ID != s.ID {
			return s, posture.Invalid("issuer", "another external JWT signer has this issuer", s.Issuer)
		}
	}
	if s.Audience, err = requiredString("audience", in.Audience); err != nil {
		return s, err
	}
	if s.Enabled, err = required("enabled", in.Enabled); err != nil {
		return s, err
	}
	certPEM := strings.TrimSpace(deref(in.CertPEM, ""))
	if s.JWKSEndpoint, err = httpURL("jwksEndpoint", in.JWKSEndpoint); err != nil {
		return s, err
	}
	if strings.HasPrefix(strings.ToLower(s.JWKSEndpoint), "http:") {
		return s, posture.Invalid("jwksEndpoint", "must be an https URL: a key set fetched over plain HTTP can be replaced on its way, "+
			"and with it the key that signs any identity's login", posture.RedactedURL(s.JWKSEndpoint))
	}
	// Key sets are fetched under --webhook-deny: an endpoint written as a
	// denied address is refused now rather than failing at every login.
	if s.JWKSEndpoint != "" && (old == nil || old.JWKSEndpoint != s.JWKSEndpoint) {
		if err := a.reachable("jwksEndpoint", s.JWKSEndpoint); err != nil {
			return s, err
		}
	}
	switch {
	case certPEM != "" && s.JWKSEndpoint != "":
		return s, posture.Invalid("certPem", "certPem and jwksEndpoint are exclusive: give one", nil)
	case certPEM == "" && s.JWKSEndpoint == "":
		return s, posture.Invalid("certPem", "one of certPem or jwksEndpoint is required", nil)
	case certPEM != "":
		cert, err := pki.ParseCertificatePEM([]byte(certPEM))
		if err != nil {
			return s, posture.Invalid("certPem", "must be a PEM certificate: "+err.Error(), nil)
		}
		if err := pki.CheckKey(cert.PublicKey); err != nil {
			return s, posture.Invalid("certPem", "the certificate's key: "+err.Error(), nil)
		}
		s.CertPEM, s.Fingerprint = certPEM+"\n", pki.Fingerprint(cert)
	}
	if s.Kid = strings.TrimSpace(deref(in.Kid, "")); len(s.Kid) > maxExtJWTField {
		return s, posture.Invalid("kid", "is too long", nil)
	}
	for _, other := range signers {
		if s.Kid != "" && other.Kid == s.Kid && other.ID != s.ID {
			return s, posture.Invalid("kid", "another external JWT signer has this kid", s.Kid)
		}
	}
	s.ClaimsProperty = strings.TrimSpace(deref(in.ClaimsProperty, ""))
	if s.ClaimsProperty == "" {
		s.ClaimsProperty = posture.DefaultClaimsProperty
	}
	s.UseExternalID = deref(in.UseExternalID, false)
	if s.ExternalAuthURL, err = httpURL("externalAuthUrl", in.ExternalAuthURL); err != nil {
		return s, err
	}
	s.ClientID = strings.TrimSpace(deref(in.ClientID, ""))
	s.Scopes = []string{}
	for _, scope := range in.Scopes {
		if scope = strings.TrimSpace(scope); scope != "" {
			s.Scopes = append(s.Scopes, scope)
		}
	}
	if s.Tags, err = tags(in.Tags); err != nil {
		return s, err
	}
	return s, nil
}

func extJWTSignerView(s posture.ExternalJWTSigner) any {
	scopes := s.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	// The certificate's name and validity are derived from certPem, as the
	// real controller answers them; a key-set signer has none.
	var commonName string
	var notBefore, notAfter any
	if s.CertPEM != "" {
		if cert, err := pki.ParseCertificatePEM([]byte(s.CertPEM)); err == nil {
			commonName, notBefore, notAfter = cert.Subject.CommonName, api.Time(cert.NotBefore), api.Time(cert.NotAfter)
		}
	}
	return map[string]any{
		"id": s.ID, "name": s.Name, "issuer": s.Issuer, "audience": s.Audience, "kid": nilIfEmpty(s.Kid),
		"commonName": commonName, "notBefore": notBefore, "notAfter": notAfter,
		"certPem": nilIfEmpty(s.CertPEM), "fingerprint": nilIfEmpty(s.Fingerprint), "jwksEndpoint": nilIfEmpty(s.JWKSEndpoint),
		"claimsProperty": s.ClaimsProperty, "useExternalId": s.UseExternalID, "enabled": s.Enabled,
		"externalAuthUrl": nilIfEmpty(s.ExternalAuthURL), "clientId": nilIfEmpty(s.ClientID), "scopes": scopes,
		"tags": s.Tags, "createdAt": api.Time(s.CreatedAt), "updatedAt": api.Time(s.UpdatedAt),
		"_links": api.SelfLink(string(posture.KindExternalJWTSigner), s.ID),
	}
}
