package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
	"github.com/seed-0809debe/posture/pki"
)

// memStore is what the client API reads (Store, IdentityStore, EnrollStore
// and the login's store) over records held in memory, as the projection
// would hold them. apply takes in the few events whose results handlers
// read back (sessions, certificates); the rest a test reads from the log.
type memStore struct {
	identities     map[string]posture.Identity
	authenticators map[string]posture.Authenticator
	mfa            map[string]posture.MFA // by identity id
	signers        []posture.ExternalJWTSigner
	enrollments    []posture.Enrollment
	cas            []posture.CA
	sessions       map[string]posture.Session
	certificates   map[string]posture.SessionCertificate
	extensions     map[string]posture.CertExtension // by authenticator id
	// entities are the model's records as RawEntity and Raw read them
	// (services, configs, config types, edge routers, checks).
	entities apitest.Entities
	// grants, results and reachable answer ServicesFor, Evaluate and
	// Access, and Reachable (by the id asked from).
	grants    []posture.Grant
	results   []posture.PolicyResult
	reachable map[string][]string
	posture   []posture.SessionPosture
	changed   time.Time
}

func newMemStore() *memStore {
	return &memStore{
		identities: map[string]posture.Identity{}, authenticators: map[string]posture.Authenticator{}, mfa: map[string]posture.MFA{},
		sessions: map[string]posture.Session{}, certificates: map[string]posture.SessionCertificate{},
		extensions: map[string]posture.CertExtension{}, entities: apitest.Entities{}, reachable: map[string][]string{},
	}
}

func (s *memStore) put(t testing.TB, e posture.Entity) {
	t.Helper()
	s.entities.Put(t, e)
}

// apply takes in what the projection would of the events handlers read
// back.
func (s *memStore) apply(e posture.Event) {
	p, err := e.Decode()
	if err != nil {
		panic(err)
	}
	switch p := p.(type) {
	case posture.SessionCreated:
		s.sessions[p.Session.ID] = p.Session
	case posture.SessionCertificateCreated:
		s.certificates[p.Certificate.ID] = p.Certificate
	}
}

func found[T any](v T, ok bool) (T, error) {
	if !ok {
		return v, posture.ErrNotFound
	}
	return v, nil
}

func first[T any](list []T, match func(T) bool) (T, error) {
	for _, v := range list {
		if match(v) {
			return v, nil
		}
	}
	var zero T
	return zero, posture.ErrNotFound
}

// values are a map's values in key order, those keep accepts.
func values[V any](m map[string]V, keep func(V) bool) []V {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := []V{}
	for _, k := range keys {
		if keep(m[k]) {
			out = append(out, m[k])
		}
	}
	return out
}

// Store.

func (s *memStore) Raw(kind posture.Kind) ([]json.RawMessage, error) {
	return values(s.entities[kind], func(json.RawMessage) bool { return true }), nil
}
func (s *memStore) Any(kind posture.Kind) (bool, error) { return len(s.entities[kind]) > 0, nil }

// IdentityServiceConfigs: the fake's identities have no service configs
// of their own.
func (s *memStore) IdentityServiceConfigs(string) (map[string]map[string]string, error) {
	return nil, nil
}

func (s *memStore) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	return found(s.entities[kind][id], s.entities[kind][id] != nil)
}
func (s *memStore) IDByName(kind posture.Kind, name string) (string, error) {
	return s.entities.IDByName(kind, name)
}
func (s *memStore) Reachable(_ posture.Kind, _, id, _, _ string) []string {
	return slices.Clone(s.reachable[id])
}
func (s *memStore) ServicesFor(string, string) []posture.Grant { return slices.Clone(s.grants) }
func (s *memStore) LastChange(string) (time.Time, error)       { return s.changed, nil }
func (s *memStore) Evaluate(_, _ string, policyIDs []string, _ time.Time) ([]posture.PolicyResult, error) {
	var out []posture.PolicyResult
	for _, r := range s.results {
		if slices.Contains(policyIDs, r.PolicyID) {
			out = append(out, r)
		}
	}
	return out, nil
}
func (s *memStore) PostureData(string) (posture.IdentityPosture, []posture.SessionPosture, error) {
	return posture.IdentityPosture{}, s.posture, nil
}
func (s *memStore) ChangesPosture(string, []posture.PostureResponse) (bool, error) { return false, nil }
func (s *memStore) Access(_, _, serviceID, typ string, _ time.Time) ([]posture.PolicyResult, error) {
	for _, g := range s.grants {
		if g.ServiceID == serviceID {
			return slices.DeleteFunc(slices.Clone(s.results), func(r posture.PolicyResult) bool { return r.Type != typ }), nil
		}
	}
	return nil, nil
}
func (s *memStore) Session(id string) (posture.Session, error) {
	v, ok := s.sessions[id]
	return found(v, ok)
}
func (s *memStore) SessionFor(apiSessionID, typ, serviceID string) (posture.Session, error) {
	return first(values(s.sessions, func(posture.Session) bool { return true }), func(x posture.Session) bool {
		return x.APISessionID == apiSessionID && x.Type == typ && x.ServiceID == serviceID
	})
}
func (s *memStore) IdentitySessions(identityID string) ([]posture.Session, error) {
	return values(s.sessions, func(x posture.Session) bool { return x.IdentityID == identityID }), nil
}

// IdentityStore, EnrollStore and the login's store.

func (s *memStore) Identity(id string) (posture.Identity, error) {
	v, ok := s.identities[id]
	return found(v, ok)
}
func (s *memStore) IdentityByName(name string) (posture.Identity, error) {
	return first(values(s.identities, func(posture.Identity) bool { return true }), func(i posture.Identity) bool { return i.Name == name })
}
func (s *memStore) IdentityByExternalID(externalID string) (posture.Identity, error) {
	return first(values(s.identities, func(posture.Identity) bool { return true }), func(i posture.Identity) bool { return i.ExternalID == externalID })
}
func (s *memStore) Authenticator(id string) (posture.Authenticator, error) {
	v, ok := s.authenticators[id]
	return found(v, ok)
}
func (s *memStore) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	return first(values(s.authenticators, func(posture.Authenticator) bool { return true }), func(a posture.Authenticator) bool { return a.Username == username })
}
func (s *memStore) AuthenticatorByFingerprint(fp string) (posture.Authenticator, error) {
	return first(values(s.authenticators, func(posture.Authenticator) bool { return true }), func(a posture.Authenticator) bool { return a.Fingerprint == fp })
}
func (s *memStore) IdentityAuthenticators(identityID string) ([]posture.Authenticator, error) {
	return values(s.authenticators, func(a posture.Authenticator) bool { return a.IdentityID == identityID }), nil
}
func (s *memStore) MFA(identityID string) (posture.MFA, error) {
	v, ok := s.mfa[identityID]
	return found(v, ok)
}
func (s *memStore) ExternalJWTSigners() ([]posture.ExternalJWTSigner, error) { return s.signers, nil }
func (s *memStore) ExternalJWTSignerByIssuer(issuer string) (posture.ExternalJWTSigner, error) {
	return first(s.signers, func(x posture.ExternalJWTSigner) bool { return x.Issuer == issuer })
}
func (s *memStore) ClientInfo(identityID string) (posture.ClientInfo, error) {
	return posture.ClientInfo{IdentityID: identityID}, nil
}
func (s *memStore) IdentityEnrollments(identityID string) ([]posture.Enrollment, error) {
	return slices.DeleteFunc(slices.Clone(s.enrollments), func(e posture.Enrollment) bool { return e.IdentityID != identityID }), nil
}
func (s *memStore) EnrollmentByUsername(username string) (posture.Enrollment, error) {
	return first(s.enrollments, func(e posture.Enrollment) bool { return e.Method == posture.EnrollUPDB && e.Username == username })
}
func (s *memStore) EnrollmentByToken(token string) (posture.Enrollment, error) {
	return first(s.enrollments, func(e posture.Enrollment) bool { return e.LookupHash() == posture.HashToken(token) })
}
func (s *memStore) CA(id string) (posture.CA, error) {
	return first(s.cas, func(c posture.CA) bool { return c.ID == id })
}
func (s *memStore) CAs() ([]posture.CA, error) { return s.cas, nil }
func (s *memStore) EdgeRouter(id string) (posture.EdgeRouter, error) {
	var r posture.EdgeRouter
	raw, err := s.RawEntity(posture.KindEdgeRouter, id)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(raw, &r)
}
func (s *memStore) EdgeRouterByEnrollmentToken(string) (posture.EdgeRouter, error) {
	return posture.EdgeRouter{}, posture.ErrNotFound
}
func (s *memStore) EdgeRouterByFingerprint(string) (posture.EdgeRouter, error) {
	return posture.EdgeRouter{}, posture.ErrNotFound
}
func (s *memStore) CertExtension(authenticatorID string) (posture.CertExtension, error) {
	v, ok := s.extensions[authenticatorID]
	return found(v, ok)
}
func (s *memStore) SessionCertificate(id string) (posture.SessionCertificate, error) {
	v, ok := s.certificates[id]
	return found(v, ok)
}
func (s *memStore) SessionCertificates(apiSessionID string) ([]posture.SessionCertificate, error) {
	return values(s.certificates, func(c posture.SessionCertificate) bool { return c.APISessionID == apiSessionID }), nil
}
func (s *memStore) APISessionByTokenHash(string) (posture.APISession, error) {
	return posture.APISession{}, posture.ErrNotFound
}
func (s *memStore) APISession(id string) (posture.APISession, error) {
	return found(caller.Session, id == caller.Session.ID)
}

// The identities of the client tests: a laptop with a password, and
// another identity.
var (
	laptop   = posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}, Tags: posture.Tags{}}
	stranger = posture.Identity{ID: "ident2", Name: "stranger", Type: posture.IdentityDevice, RoleAttributes: []string{}, Tags: posture.Tags{}}
	// caller is the laptop's API session.
	caller = &api.Principal{Identity: laptop, Session: posture.APISession{ID: "apis1", IdentityID: "ident1", ConfigTypes: []string{},
		CreatedAt: handlerNow.Add(-time.Hour), LastActivityAt: handlerNow}}
)

// testPKI is a real CA in a temporary directory whose clock stands at
// handlerNow, and a signer of JWTs with a server certificate it issued.
func testPKI(t testing.TB) (*pki.CA, *pki.Signer) {
	t.Helper()
	ca, err := pki.Open(t.TempDir(), pki.Options{Now: func() time.Time { return handlerNow }})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.ServerCertificate([]string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ca.NewSigner(cert)
	if err != nil {
		t.Fatal(err)
	}
	return ca, signer
}

// newCSR is a PEM certificate signing request for a new key.
func newCSR(t testing.TB, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// newClientAPI is a client API over store, appending to log at handlerNow,
// with a real CA and JWT signer.
func newClientAPI(store *memStore, log *apitest.Log, ca *pki.CA, signer *pki.Signer) *API {
	w := apitest.Writer(log, handlerNow)
	log.Apply = store.apply
	auth := &api.Auth{Sessions: store, Log: log, Now: w.Now, Timeout: 30 * time.Minute}
	return &API{
		Info:  &api.Info{Advertise: "ctrl.example:1280"},
		Login: &api.Login{Store: store, Writer: w, Auth: auth}, Auth: auth, Writer: w,
		Store: store, Identities: store, Enroll: store, Tokens: signer, PKI: ca, Signer: signer,
		Secrets: &apitest.Secrets{}, MFAGrace: 2 * time.Minute, Started: handlerNow.Add(-24 * time.Hour),
	}
}

// clientCase is a case and the store it runs over.
type clientCase struct {
	setup func(t *testing.T, s *memStore)
	apitest.Case
}

// runClient serves each case to the client API's routes as who (nil: no
// caller), over the store setup makes for it (a fresh one per case).
func runClient(t *testing.T, who *api.Principal, cases []apitest.Case, setup func(t *testing.T, s *memStore)) {
	t.Helper()
	all := make([]clientCase, len(cases))
	for i, c := range cases {
		all[i] = clientCase{setup, c}
	}
	runClientCases(t, who, all)
}

// runClientCases is runClient with a store set up per case.
func runClientCases(t *testing.T, who *api.Principal, cases []clientCase) {
	t.Helper()
	ca, signer := testPKI(t)
	setups := map[string]func(*testing.T, *memStore){}
	plain := make([]apitest.Case, len(cases))
	for i, c := range cases {
		setups[c.Name], plain[i] = c.setup, c.Case
	}
	apitest.Run(t, plain, func(t *testing.T, c apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		store, log := newMemStore(), &apitest.Log{}
		store.identities[laptop.ID], store.identities[stranger.ID] = laptop, stranger
		if setup := setups[c.Name]; setup != nil {
			setup(t, store)
		}
		return newClientAPI(store, log, ca, signer).Routes(), who, log
	})
}

// payload decodes the last event appended as a T.
func payload[T posture.Payload](t *testing.T, log *apitest.Log) T {
	t.Helper()
	p, ok := log.Payload(t, len(log.Events)-1).(T)
	if !ok {
		t.Fatalf("appended %T, want %T", log.Payload(t, len(log.Events)-1), p)
	}
	return p
}
