package client

import (
	"context"
	"crypto"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/pki"
)

// signerView is an external JWT signer as clients see it: enough to start
// an authentication with the identity provider.
type signerView struct {
	ID              string       `json:"id"`
	Name            string       `json:"name"`
	ExternalAuthURL *string      `json:"externalAuthUrl"`
	ClientID        *string      `json:"clientId,omitempty"`
	Scopes          []string     `json:"scopes"`
	CreatedAt       api.Time     `json:"createdAt"`
	UpdatedAt       api.Time     `json:"updatedAt"`
	Tags            posture.Tags `json:"tags"`
	Links           api.Links    `json:"_links"`
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// listExternalJWTSigners is GET /external-jwt-signers (public): the enabled
// signers clients may authenticate with.
func (a *API) listExternalJWTSigners(c echo.Context) error {
	all, err := a.Identities.ExternalJWTSigners()
	if err != nil {
		return err
	}
	views := []signerView{}
	for _, s := range all {
		if !s.Enabled {
			continue
		}
		scopes, t := s.Scopes, s.Tags
		if scopes == nil {
			scopes = []string{}
		}
		if t == nil {
			t = posture.Tags{}
		}
		views = append(views, signerView{
			ID: s.ID, Name: s.Name, ExternalAuthURL: strPtr(s.ExternalAuthURL), ClientID: strPtr(s.ClientID),
			Scopes: scopes, CreatedAt: api.Time(s.CreatedAt), UpdatedAt: api.Time(s.UpdatedAt), Tags: t,
			Links: api.SelfLink("external-jwt-signers", s.ID),
		})
	}
	return api.List(c, views)
}

// ExtJWTOptions configures NewExtJWT.
type ExtJWTOptions struct {
	// Store finds signers by issuer and identities by id or external id.
	Store ExtJWTStore
	// Now is the clock tokens are checked against (default time.Now).
	Now api.Clock
	// Client is the HTTP client that fetches a key set from an endpoint
	// (cmd gives webhooks.NewClient's: no address of --webhook-deny, no
	// redirect followed). Default: a client with keysTimeout that follows
	// no redirect.
	Client func(endpoint string) (*http.Client, error)
	// KeysTTL is how long a fetched key set is used (default 5 minutes).
	KeysTTL time.Duration
	// RefreshAfter is how soon a key set may be fetched again for a token
	// whose key id it lacks (a rotated key; default 10 s).
	RefreshAfter time.Duration
	// RetryAfter is how long a failed fetch is not tried again (default
	// 10 s): a token names its signer, and anyone may send one.
	RetryAfter time.Duration
	// Leeway is the clock skew allowed on exp, nbf and iat (default 0).
	Leeway time.Duration
	Logger *slog.Logger
}

// ExtJWT verifies the JWTs of external signers (api.ExtJWTVerifier): the
// token's issuer picks the signer; the signature is checked with the
// signer's certificate key or a key of its JWKS (fetched with a timeout and
// cached); the token must be unexpired and carry the signer's audience; the
// claim the signer names (sub by default) is the identity's externalId or
// id. Every failure is 401 INVALID_AUTH with a message that says which.
type ExtJWT struct {
	opts ExtJWTOptions

	mu   sync.Mutex
	sets map[string]*keySet // by JWKS endpoint
}

// keySet is a cached JWKS.
type keySet struct {
	mu      sync.Mutex // held while fetching
	byKid   map[string]crypto.PublicKey
	all     []crypto.PublicKey
	fetched time.Time
	// failed is when the last fetch failed, and err why.
	failed time.Time
	err    error
}

// NewExtJWT returns a verifier.
func NewExtJWT(opts ExtJWTOptions) *ExtJWT {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.KeysTTL <= 0 {
		opts.KeysTTL = 5 * time.Minute
	}
	if opts.RefreshAfter <= 0 {
		opts.RefreshAfter = 10 * time.Second
	}
	if opts.Client == nil {
		opts.Client = func(string) (*http.Client, error) {
			return &http.Client{Timeout: keysTimeout, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment},
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
		}
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &ExtJWT{opts: opts, sets: map[string]*keySet{}}
}

// extJWTMethods are the signature algorithms accepted: asymmetric only, so
// that a public key can never be used as an HMAC secret.
var extJWTMethods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

func invalidAuth(format string, args ...any) *posture.Error {
	return &posture.Error{Code: posture.CodeInvalidAuth, Message: fmt.Sprintf(format, args...)}
}

// VerifyJWT implements api.ExtJWTVerifier.
func (x *ExtJWT) VerifyJWT(ctx context.Context, token string) (api.Credential, error) {
	var none api.Credential
	var unverified jwt.MapClaims
	parsed, _, err := jwt.NewParser().ParseUnverified(token, &unverified)
	if err != nil {
		return none, invalidAuth("the bearer token is not a JWT")
	}
	if alg := parsed.Method.Alg(); !slices.Contains(extJWTMethods, alg) {
		return none, invalidAuth("the JWT's algorithm %s is not accepted (use one of %s)", alg, strings.Join(extJWTMethods, ", "))
	}
	issuer, _ := unverified.GetIssuer()
	if issuer == "" {
		return none, invalidAuth("the JWT has no issuer (iss)")
	}
	signer, err := x.opts.Store.ExternalJWTSignerByIssuer(issuer)
	if errors.Is(err, posture.ErrNotFound) {
		return none, invalidAuth("no external JWT signer trusts the issuer %q", issuer)
	}
	if err != nil {
		return none, err
	}
	if !signer.Enabled {
		return none, invalidAuth("the external JWT signer %q is disabled", signer.Name)
	}
	claims := jwt.MapClaims{}
	parser := jwt.NewParser(
		jwt.WithValidMethods(extJWTMethods),
		jwt.WithIssuer(signer.Issuer),
		jwt.WithAudience(signer.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(x.opts.Leeway),
		jwt.WithTimeFunc(x.opts.Now),
	)
	_, err = parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return x.key(ctx, signer, t)
	})
	if err != nil {
		return none, x.explain(signer, unverified, err)
	}
	prop := signer.ClaimsProperty
	if prop == "" {
		prop = posture.DefaultClaimsProperty
	}
	name, _ := claims[prop].(string)
	if name == "" {
		return none, invalidAuth("the JWT has no %q claim naming the identity", prop)
	}
	var identity posture.Identity
	if signer.UseExternalID {
		identity, err = x.opts.Store.IdentityByExternalID(name)
	} else {
		identity, err = x.opts.Store.Identity(name)
	}
	if errors.Is(err, posture.ErrNotFound) {
		what := "id"
		if signer.UseExternalID {
			what = "externalId"
		}
		return none, invalidAuth("no identity has the %s %q of the JWT's %q claim", what, name, prop)
	}
	// Every admin may add a signer: one could otherwise sign in as the
	// default admin, whose credentials are its own.
	if err == nil && identity.IsDefaultAdmin {
		return none, invalidAuth("the default admin signs in with its own password, not an external JWT")
	}
	return api.Credential{Identity: identity, SignerID: signer.ID}, err
}

// explain turns a parse failure into the message the caller sees; claims
// are the token's unverified claims, to name the claim that is missing.
func (x *ExtJWT) explain(s posture.ExternalJWTSigner, claims jwt.MapClaims, err error) error {
	var pe *posture.Error
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalidAuth("the JWT has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalidAuth("the JWT is not valid yet")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return invalidAuth("the JWT's audience does not include %q", s.Audience)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return invalidAuth("%s", missingClaims(s, claims))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrInvalidKeyType):
		return invalidAuth("the JWT's signature does not verify with the key of the external JWT signer %q", s.Name)
	}
	return invalidAuth("the JWT is not valid: %v", err)
}

// missingClaims names the required claims a token lacks: the expiry
// always, the audience when the signer has one.
func missingClaims(s posture.ExternalJWTSigner, claims jwt.MapClaims) string {
	var missing []string
	if _, ok := claims["exp"]; !ok {
		missing = append(missing, "no expiry (exp)")
	}
	if _, ok := claims["aud"]; !ok && s.Audience != "" {
		missing = append(missing, fmt.Sprintf("no audience (aud; the external JWT signer %q requires %q)", s.Name, s.Audience))
	}
	if len(missing) == 0 {
		return "the JWT lacks a required claim"
	}
	return "the JWT has " + strings.Join(missing, " and ")
}

// key returns the key (or keys) to verify a token of the signer with.
func (x *ExtJWT) key(ctx context.Context, s posture.ExternalJWTSigner, t *jwt.Token) (any, error) {
	if s.CertPEM != "" {
		cert, err := pki.ParseCertificatePEM([]byte(s.CertPEM))
		if err != nil {
			return nil, invalidAuth("the certificate of the external JWT signer %q cannot be read", s.Name)
		}
		return cert.PublicKey, nil
	}
	kid, _ := t.Header["kid"].(string)
	set, err := x.keys(ctx, s, kid)
	if err != nil {
		x.opts.Logger.Warn("fetching the key set of an external JWT signer failed", "signer", s.ID, "endpoint", s.JWKSEndpoint, "err", err)
		// The caller learns no more than that no key was found: what the
		// endpoint answered is for the logs.
		if kid == "" {
			return nil, invalidAuth("the key set of the external JWT signer %q has no usable key", s.Name)
		}
		return nil, invalidAuth("the key set of the external JWT signer %q has no key %q", s.Name, kid)
	}
	if kid != "" {
		k, ok := set.byKid[kid]
		if !ok {
			return nil, invalidAuth("the key set of the external JWT signer %q has no key %q", s.Name, kid)
		}
		return k, nil
	}
	if len(set.all) == 0 {
		return nil, invalidAuth("the key set of the external JWT signer %q has no usable key", s.Name)
	}
	vks := jwt.VerificationKeySet{}
	for _, k := range set.all {
		vks.Keys = append(vks.Keys, k)
	}
	return vks, nil
}

// keys returns the signer's cached key set, fetching it when it is older
// than KeysTTL, or when it lacks kid and is older than RefreshAfter.
func (x *ExtJWT) keys(ctx context.Context, s posture.ExternalJWTSigner, kid string) (*keySet, error) {
	x.mu.Lock()
	set := x.sets[s.JWKSEndpoint]
	if set == nil {
		set = &keySet{}
		x.sets[s.JWKSEndpoint] = set
	}
	x.mu.Unlock()

	set.mu.Lock()
	defer set.mu.Unlock()
	now := x.opts.Now()
	age := now.Sub(set.fetched)
	_, known := set.byKid[kid]
	stale := set.fetched.IsZero() || age >= x.opts.KeysTTL || (kid != "" && !known && age >= x.opts.RefreshAfter)
	if !stale {
		return set.snapshot(), nil
	}
	keep := !set.fetched.IsZero() && age < x.opts.KeysTTL // the keys we have are still good
	if !set.failed.IsZero() && now.Sub(set.failed) < x.opts.RetryAfter {
		if keep {
			return set.snapshot(), nil
		}
		return nil, set.err
	}
	// The fetch serves every caller that waits for it, not only this one:
	// a caller that goes away does not cancel it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), keysTimeout)
	defer cancel()
	byKid, all, err := x.fetch(fctx, s.JWKSEndpoint)
	if err != nil {
		set.failed, set.err = now, err
		if keep {
			return set.snapshot(), nil
		}
		return nil, err
	}
	set.byKid, set.all, set.fetched, set.failed, set.err = byKid, all, now, time.Time{}, nil
	return set.snapshot(), nil
}

func (s *keySet) snapshot() *keySet {
	return &keySet{byKid: s.byKid, all: s.all, fetched: s.fetched}
}

// keysTimeout bounds a key set's fetch.
const keysTimeout = 5 * time.Second

// maxJWKS bounds a fetched key set.
const maxJWKS = 1 << 20

func (x *ExtJWT) fetch(ctx context.Context, endpoint string) (map[string]crypto.PublicKey, []crypto.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if req.URL.Scheme != "https" {
		return nil, nil, fmt.Errorf("GET %s: key sets are fetched over https only", endpoint)
	}
	client, err := x.opts.Client(endpoint)
	if err != nil {
		return nil, nil, err
	}
	defer client.CloseIdleConnections() // the next fetch is minutes away
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s", endpoint, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxJWKS {
		return nil, nil, fmt.Errorf("GET %s: the key set is larger than %d bytes", endpoint, maxJWKS)
	}
	var jwks pki.JWKS
	if err := json.Unmarshal(data, &jwks); err != nil {
		return nil, nil, fmt.Errorf("GET %s: not a JWKS: %w", endpoint, err)
	}
	byKid := map[string]crypto.PublicKey{}
	var all []crypto.PublicKey
	for _, k := range jwks.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.PublicKey()
		if err != nil {
			continue // a key type we cannot use; others may do
		}
		all = append(all, pub)
		if k.KeyID != "" {
			byKid[k.KeyID] = pub
		}
	}
	return byKid, all, nil
}
