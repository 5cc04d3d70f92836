package management

import (
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// handlerNow is the clock of the handler tests.
var handlerNow = time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)

// memStore is the management API's Store (and the login's and the
// enrollments' stores) over entities held in memory, as the projection
// would hold them. It does not apply what handlers append: a test reads
// the appended events from the log. err, when set, fails every read other
// than not found.
type memStore struct {
	entities apitest.Entities
	// selected answers Selected ("selected <policyId>"), Selecting
	// ("selecting <id>") and Reachable ("reachable <id>").
	selected map[string][]string
	err      error
}

func newMemStore(t testing.TB, entities ...posture.Entity) *memStore {
	t.Helper()
	s := &memStore{entities: apitest.Entities{}, selected: map[string][]string{}}
	for _, e := range entities {
		s.put(t, e)
	}
	return s
}

func (s *memStore) put(t testing.TB, e posture.Entity) {
	t.Helper()
	s.entities.Put(t, e)
}

// all decodes every entity of a kind, in id order.
func all[T posture.Entity](s *memStore) ([]T, error) {
	if s.err != nil {
		return nil, s.err
	}
	var zero T
	raws, _ := s.Raw(zero.EntityKind())
	out := make([]T, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *memStore) Raw(kind posture.Kind) ([]json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	ids := make([]string, 0, len(s.entities[kind]))
	for id := range s.entities[kind] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		out[i] = s.entities[kind][id]
	}
	return out, nil
}

func (s *memStore) Count(kind posture.Kind) (int, error) {
	raws, err := s.Raw(kind)
	return len(raws), err
}

// IdentityServiceConfigs: the fake's identities have no service configs
// of their own.
func (s *memStore) IdentityServiceConfigs(string) (map[string]map[string]string, error) {
	return nil, nil
}

func (s *memStore) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	raw, ok := s.entities[kind][id]
	if !ok {
		return nil, posture.ErrNotFound
	}
	return raw, nil
}

func (s *memStore) IDByName(kind posture.Kind, name string) (string, error) {
	raws, err := s.Raw(kind)
	if err != nil {
		return "", err
	}
	for _, raw := range raws {
		var v struct{ ID, Name string }
		if json.Unmarshal(raw, &v) == nil && v.Name == name {
			return v.ID, nil
		}
	}
	return "", posture.ErrNotFound
}

func (s *memStore) Selecting(_ posture.Kind, _, id string) []string {
	return s.selected["selecting "+id]
}
func (s *memStore) Selected(_ posture.Kind, policyID, _ string) []string {
	return s.selected["selected "+policyID]
}
func (s *memStore) Reachable(_ posture.Kind, _, id, _, _ string) []string {
	return s.selected["reachable "+id]
}

func (s *memStore) RoleAttributes(kind posture.Kind) []string {
	raws, _ := s.Raw(kind)
	var out []string
	for _, raw := range raws {
		var v struct {
			RoleAttributes []string `json:"roleAttributes"`
		}
		_ = json.Unmarshal(raw, &v)
		out = append(out, v.RoleAttributes...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (s *memStore) IdentityByExternalID(externalID string) (posture.Identity, error) {
	list, err := all[posture.Identity](s)
	if err != nil {
		return posture.Identity{}, err
	}
	for _, i := range list {
		if i.ExternalID == externalID {
			return i, nil
		}
	}
	return posture.Identity{}, posture.ErrNotFound
}

func (s *memStore) Identity(id string) (posture.Identity, error) {
	var i posture.Identity
	raw, err := s.RawEntity(posture.KindIdentity, id)
	if err != nil {
		return i, err
	}
	return i, json.Unmarshal(raw, &i)
}

func (s *memStore) AuthenticatorByUsername(username string) (posture.Authenticator, error) {
	list, err := all[posture.Authenticator](s)
	if err != nil {
		return posture.Authenticator{}, err
	}
	for _, au := range list {
		if au.Username == username {
			return au, nil
		}
	}
	return posture.Authenticator{}, posture.ErrNotFound
}

func (s *memStore) IdentityAuthenticators(identityID string) ([]posture.Authenticator, error) {
	list, err := all[posture.Authenticator](s)
	return slices.DeleteFunc(list, func(au posture.Authenticator) bool { return au.IdentityID != identityID }), err
}

func (s *memStore) ConfigsOfType(configTypeID string) ([]string, error) {
	list, err := all[posture.Config](s)
	var ids []string
	for _, c := range list {
		if c.ConfigTypeID == configTypeID {
			ids = append(ids, c.ID)
		}
	}
	return ids, err
}

func (s *memStore) ClientInfo(identityID string) (posture.ClientInfo, error) {
	return posture.ClientInfo{IdentityID: identityID}, s.err
}

func (s *memStore) HasAPISession(string) (bool, error) { return false, s.err }

// MFA: no identity of these tests has an MFA enrollment.
func (s *memStore) MFA(string) (posture.MFA, error) {
	if s.err != nil {
		return posture.MFA{}, s.err
	}
	return posture.MFA{}, posture.ErrNotFound
}

func (s *memStore) APISessionByTokenHash(string) (posture.APISession, error) {
	return posture.APISession{}, posture.ErrNotFound
}

func (s *memStore) IdentityEnrollments(identityID string) ([]posture.Enrollment, error) {
	list, err := all[posture.Enrollment](s)
	return slices.DeleteFunc(list, func(e posture.Enrollment) bool { return e.IdentityID != identityID }), err
}

func (s *memStore) EnrollmentByUsername(username string) (posture.Enrollment, error) {
	list, err := all[posture.Enrollment](s)
	if err != nil {
		return posture.Enrollment{}, err
	}
	for _, e := range list {
		if e.Username == username {
			return e, nil
		}
	}
	return posture.Enrollment{}, posture.ErrNotFound
}

// postureStore is the posture read models over fixed data.
type postureStore struct {
	data    posture.IdentityPosture
	failed  []posture.FailedServiceRequest
	fleet   []posture.FleetFailedRequest
	history []posture.HistoryEntry
	err     error
	// asked is the limit FleetFailedRequests was last called with.
	asked *int
}

// PostureData is ident1's posture data; other identities have none.
func (p *postureStore) PostureData(id string) (posture.IdentityPosture, []posture.SessionPosture, error) {
	if id != "ident1" {
		return posture.IdentityPosture{}, nil, p.err
	}
	return p.data, nil, p.err
}

func (p *postureStore) FailedRequests(string) ([]posture.FailedServiceRequest, error) {
	return p.failed, p.err
}

func (p *postureStore) FleetFailedRequests(limit int) ([]posture.FleetFailedRequest, error) {
	p.asked = &limit
	return p.fleet, p.err
}

func (p *postureStore) History(_ string, since, until time.Time) ([]posture.HistoryEntry, error) {
	var out []posture.HistoryEntry
	for _, h := range p.history {
		if (since.IsZero() || !h.At.Before(since)) && (until.IsZero() || !h.At.After(until)) {
			out = append(out, h)
		}
	}
	return out, p.err
}

func (p *postureStore) HistoryPage(id string, since, until time.Time, offset, limit int) ([]posture.HistoryEntry, int, error) {
	all, err := p.History(id, since, until)
	start := min(offset, len(all))
	return all[start:min(start+limit, len(all))], len(all), err
}

// newTestAPI is a management API over store, appending to log at
// handlerNow, with the posture read models of ps (nil: none).
func newTestAPI(store *memStore, ps *postureStore, log *apitest.Log) *API {
	if ps == nil {
		ps = &postureStore{}
	}
	return &API{
		Info:        &api.Info{Advertise: "ctrl.example:1280"},
		Login:       &api.Login{Store: store},
		Store:       store,
		Posture:     ps,
		Enrollments: store,
		Writer:      apitest.Writer(log, handlerNow),
		Secrets:     &apitest.Secrets{},
	}
}

// admin is the caller of the management API's tests.
var admin = &api.Principal{
	Identity: posture.Identity{ID: "admin1", Name: "admin", IsAdmin: true},
	Session:  posture.APISession{ID: "apis-admin", IdentityID: "admin1"},
}

// runManagement serves each case to the management API's routes over the
// entities given (a fresh store and log per case), as the admin.
func runManagement(t *testing.T, cases []apitest.Case, entities ...posture.Entity) {
	t.Helper()
	runWith(t, cases, func(t *testing.T) (*memStore, *postureStore) { return newMemStore(t, entities...), nil })
}

// runWith is runManagement over the stores setup makes for each case.
func runWith(t *testing.T, cases []apitest.Case, setup func(t *testing.T) (*memStore, *postureStore)) {
	t.Helper()
	apitest.Run(t, cases, func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		log := &apitest.Log{}
		store, ps := setup(t)
		return newTestAPI(store, ps, log).Routes(), admin, log
	})
}

var errDisk = errors.New("pebble: disk I/O error")

// The entities of the handler tests: a laptop in #laptops, an OS check in
// #recent-os, a service in #crm and the policy that joins them.
var (
	laptop = posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"},
		Tags: posture.Tags{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	osCheck = posture.Check{ID: "chk1", Name: "windows", TypeID: posture.CheckOS, RoleAttributes: []string{"recent-os"},
		OperatingSystems: []posture.OperatingSystem{{Type: posture.OSWindows, Versions: []string{">=10.0.19041"}}}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	crm = posture.Service{ID: "svc1", Name: "crm", RoleAttributes: []string{"crm"}, Configs: []string{}, TerminatorStrategy: DefaultTerminatorStrategy,
		EncryptionRequired: true, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	crmPolicy = posture.ServicePolicy{ID: "pol1", Name: "crm-dial", Type: posture.Dial, Semantic: posture.AllOf, IdentityRoles: []string{"#laptops"},
		ServiceRoles: []string{"@svc1"}, PostureCheckRoles: []string{"#recent-os"}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	laptopPassword = posture.Authenticator{ID: "auth1", IdentityID: "ident1", Method: posture.MethodPassword, Username: "laptop-user",
		PasswordHash: "$argon2id$hash-of-the-test", Tags: posture.Tags{}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
)

// The event types of entity changes.
func created[T posture.Entity]() string { return posture.Created[T]{}.EventType() }
func updated[T posture.Entity]() string { return posture.Updated[T]{}.EventType() }
func deleted[T posture.Entity]() string { return posture.Deleted[T]{}.EventType() }

// dataOf decodes a JSON object answer's data.
func dataOf(t *testing.T, r apitest.Response) map[string]any {
	t.Helper()
	var m map[string]any
	r.DataInto(t, &m)
	return m
}

// listOf decodes a list answer's data.
func listOf(t *testing.T, r apitest.Response) []map[string]any {
	t.Helper()
	var l []map[string]any
	r.DataInto(t, &l)
	return l
}

// payload decodes the only event appended as a T.
func payload[T posture.Payload](t *testing.T, log *apitest.Log) T {
	t.Helper()
	p, ok := log.Payload(t, len(log.Events)-1).(T)
	if !ok {
		t.Fatalf("appended %T, want %T", log.Payload(t, len(log.Events)-1), p)
	}
	return p
}

// The API sessions and sessions the handlers read are kept as entities of
// the projection's kinds.
func (s *memStore) APISessions() ([]posture.APISession, error) {
	return decodeAll[posture.APISession](s, "api-sessions")
}

func (s *memStore) APISession(id string) (posture.APISession, error) {
	return decodeOne[posture.APISession](s, "api-sessions", id)
}

func (s *memStore) Sessions() ([]posture.Session, error) {
	return decodeAll[posture.Session](s, "sessions")
}

func (s *memStore) Session(id string) (posture.Session, error) {
	return decodeOne[posture.Session](s, "sessions", id)
}

func decodeAll[T any](s *memStore, kind posture.Kind) ([]T, error) {
	raws, err := s.Raw(kind)
	out := make([]T, len(raws))
	for i, raw := range raws {
		if err == nil {
			err = json.Unmarshal(raw, &out[i])
		}
	}
	return out, err
}

func decodeOne[T any](s *memStore, kind posture.Kind, id string) (T, error) {
	var v T
	raw, err := s.RawEntity(kind, id)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	return v, err
}
