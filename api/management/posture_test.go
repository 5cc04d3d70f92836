package management

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/apitest"
)

// explainer answers a fixed decision (no permission to Dial, Bind denied)
// and records what it was asked.
type explainer struct {
	asked *[]posture.Explanation
}

func (x explainer) Explain(_ context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	if identityID != "ident1" || serviceID != "svc1" {
		return posture.Explanation{}, posture.NotFound("identity or service", identityID+"/"+serviceID)
	}
	*x.asked = append(*x.asked, posture.Explanation{IdentityID: identityID, ServiceID: serviceID, Type: typ, At: at})
	decision := map[string]string{posture.Dial: posture.DecisionNoPermission, posture.Bind: posture.DecisionDenied}[typ]
	return posture.Explanation{IdentityID: identityID, ServiceID: serviceID, ServiceName: "crm", Type: typ, At: at, Decision: decision}, nil
}

// fleetStore is the fleet view over fixed counts and lists.
type fleetStore struct {
	counts []posture.FleetCount
	grace  []posture.TimedIdentity
	err    error
	// until is the end of the window LosingAccess was last asked about.
	until time.Time
}

func (f *fleetStore) FleetCounts() ([]posture.FleetCount, error) { return f.counts, f.err }
func (f *fleetStore) InGrace(_ time.Time, limit int) ([]posture.TimedIdentity, int, error) {
	return f.grace[:min(limit, len(f.grace))], len(f.grace), f.err
}
func (f *fleetStore) LosingAccess(_, until time.Time, _ int) ([]posture.TimedIdentity, int, error) {
	f.until = until
	return nil, 0, f.err
}
func (f *fleetStore) OldestEvidence(int) ([]posture.TimedIdentity, error) { return nil, f.err }

// TestPostureReadHandlers: posture data with evidence ages, the failed
// service requests of an identity and of the fleet, the audit timeline,
// the decision at a moment and the fleet summary, with the query
// parameters each refuses.
func TestPostureReadHandlers(t *testing.T) {
	denial := func(service string, at time.Time) posture.FailedServiceRequest {
		return posture.FailedServiceRequest{APISessionID: "apis1", ServiceID: service, ServiceName: "crm", SessionType: posture.Dial, When: at,
			PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol1", PolicyName: "crm-dial"}}}
	}
	ps := postureStore{
		data:   posture.IdentityPosture{OS: &posture.OSPosture{CheckID: "chk1", At: handlerNow.Add(-90 * time.Second), Type: "Windows", Version: "10.0.19045"}},
		failed: []posture.FailedServiceRequest{denial("svc1", handlerNow.Add(-time.Hour))},
		fleet: []posture.FleetFailedRequest{
			{IdentityID: "ident2", FailedServiceRequest: denial("svc1", handlerNow.Add(-time.Minute))},
			{IdentityID: "ident1", FailedServiceRequest: denial("svc1", handlerNow.Add(-time.Hour))},
			{IdentityID: "ident1", FailedServiceRequest: denial("svc1", handlerNow.Add(-2*time.Hour))},
		},
		history: []posture.HistoryEntry{
			{Seq: 3, At: handlerNow.Add(-2 * time.Hour), Kind: posture.HistoryPosture, Event: "posture.response.recorded", Summary: "OS Windows 6.1"},
			{Seq: 9, At: handlerNow.Add(-time.Hour), Kind: posture.HistorySession, Event: posture.TypeSessionDenied, Summary: "denied"},
		},
	}
	phone := posture.Identity{ID: "ident2", Name: "phone", Type: posture.IdentityDevice, RoleAttributes: []string{}, Tags: posture.Tags{}}
	var asked []posture.Explanation
	var fleet fleetStore
	cases := []apitest.Case{
		{Name: "postureData: unknown identity", Method: http.MethodGet, Path: "/identities/ident9/posture-data", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "postureData: an identity without posture", Method: http.MethodGet, Path: "/identities/ident2/posture-data", Status: http.StatusOK},
		{Name: "postureData: ages in seconds from the clock", Method: http.MethodGet, Path: "/identities/ident1/posture-data", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v postureDataView
				r.DataInto(t, &v)
				if v.OS.Type != "windows" || v.OS.AgeSeconds == nil || *v.OS.AgeSeconds != 90 || v.MAC.AgeSeconds != nil || v.OS.PostureCheckID != "chk1" || v.Processes == nil {
					t.Fatalf("posture data %s", r.Data)
				}
			}},
		{Name: "failedRequests", Method: http.MethodGet, Path: "/identities/ident1/failed-service-requests", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				l := listOf(t, r)
				if len(l) != 1 || l[0]["serviceId"] != "svc1" || l[0]["policyFailures"].([]any)[0].(map[string]any)["checks"] == nil {
					t.Fatalf("failed requests %s", r.Data)
				}
			}},
		{Name: "failedRequests: unknown identity", Method: http.MethodGet, Path: "/identities/ident9/failed-service-requests", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "fleetFailedRequests: newest first, each with its identity", Method: http.MethodGet, Path: "/failed-service-requests", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var l []fleetFailedRequestView
				r.DataInto(t, &l)
				if len(l) != 3 || l[0].IdentityID != "ident2" || l[0].Identity.Name != "phone" || l[1].Identity.Name != "laptop" ||
					l[0].Identity.Links["self"].Href != "./identities/ident2" || r.Meta.Pagination.TotalCount != 3 || l[2].PolicyFailures[0].Checks == nil {
					t.Fatalf("fleet failed requests %s %+v", r.Data, r.Meta)
				}
			}},
		{Name: "fleetFailedRequests: a page", Method: http.MethodGet, Path: "/failed-service-requests?limit=1&offset=1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["identityId"] != "ident1" || r.Meta.Pagination.Limit != 1 || r.Meta.Pagination.TotalCount != 3 {
					t.Fatalf("page %s %+v", r.Data, r.Meta)
				}
			}},
		{Name: "fleetFailedRequests: a filter on the identity", Method: http.MethodGet, Path: `/failed-service-requests?filter=identityId%3D%22ident2%22`, Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["identityId"] != "ident2" {
					t.Fatalf("filtered %s", r.Data)
				}
			}},
		{Name: "fleetFailedRequests: a filter and a sort on the request's own fields", Method: http.MethodGet,
			Path: `/failed-service-requests?filter=serviceId%3D%22svc1%22%20and%20sessionType%3D%22Dial%22&sort=when%20asc`, Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 3 || l[0]["identityId"] != "ident1" || l[2]["identityId"] != "ident2" {
					t.Fatalf("filtered and sorted %s", r.Data)
				}
			}},
		{Name: "fleetFailedRequests: a limit that is no number", Method: http.MethodGet, Path: "/failed-service-requests?limit=all",
			Status: http.StatusBadRequest, Code: posture.CodeInvalidPagination},
		{Name: "postureHistory: a window", Method: http.MethodGet, Path: "/identities/ident1/posture-history?since=" + handlerNow.Add(-90*time.Minute).Format(time.RFC3339), Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["seq"] != float64(9) {
					t.Fatalf("history %s", r.Data)
				}
			}},
		{Name: "postureHistory: since that is no time", Method: http.MethodGet, Path: "/identities/ident1/posture-history?since=yesterday",
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "since"},
		{Name: "postureHistory: unknown identity", Method: http.MethodGet, Path: "/identities/ident9/posture-history?until=2020-01-01T00:00:00Z",
			Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "policyAdvice: at a moment, Bind", Method: http.MethodGet, Path: "/identities/ident1/policy-advice/svc1?type=bind&at=2026-04-01T10:32:00Z", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				// The type asked, then the other one for the ziti CLI's fields.
				moment := time.Date(2026, 4, 1, 10, 32, 0, 999999999, time.UTC) // a whole second: its end
				d := dataOf(t, r)
				if d["decision"] != posture.DecisionDenied || len(asked) != 2 || asked[0].Type != posture.Bind || !asked[0].At.Equal(moment) ||
					asked[1].Type != posture.Dial || !asked[1].At.Equal(moment) {
					t.Fatalf("advice %s, asked %+v", r.Data, asked)
				}
				identity, _ := d["identity"].(map[string]any)
				if d["isBindAllowed"] != true || d["isDialAllowed"] != false || identity["name"] != "laptop" || fmt.Sprint(d["commonRouters"]) != "[]" {
					t.Fatalf("the controller's fields: %s", r.Data)
				}
			}},
		{Name: "policyAdvice: a type unknown", Method: http.MethodGet, Path: "/identities/ident1/policy-advice/svc1?type=host",
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "type"},
		{Name: "policyAdvice: at that is no time", Method: http.MethodGet, Path: "/identities/ident1/policy-advice/svc1?at=10:32",
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "at"},
		{Name: "policyAdvice: unknown service", Method: http.MethodGet, Path: "/identities/ident1/policy-advice/svc9", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "postureSummary: names from the model, the window from withinMinutes", Method: http.MethodGet, Path: "/posture-summary?withinMinutes=30", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var v summaryView
				r.DataInto(t, &v)
				if len(v.Policies) != 1 || v.Policies[0].Name != "crm-dial" || v.Policies[0].Fail != 2 || len(v.Checks) != 1 || v.Checks[0].TypeID != "OS" ||
					v.InGrace.Count != 1 || v.InGrace.Sessions[0].InSeconds != 60 || !fleet.until.Equal(handlerNow.Add(30*time.Minute)) {
					t.Fatalf("summary %s", r.Data)
				}
			}},
		{Name: "postureSummary: withinMinutes out of range", Method: http.MethodGet, Path: "/posture-summary?withinMinutes=-1",
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "withinMinutes"},
		{Name: "postureSummary: limit that is no number", Method: http.MethodGet, Path: "/posture-summary?limit=x",
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "limit"},
	}
	apitest.Run(t, cases, func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		log := &apitest.Log{}
		fleet = fleetStore{
			counts: []posture.FleetCount{{Kind: "p", ID: "pol1", Pass: 3, Fail: 2}, {Kind: "c", ID: "chk1", Pass: 3, Fail: 2}},
			grace:  []posture.TimedIdentity{{IdentityID: "ident1", APISessionID: "apis1", At: handlerNow.Add(time.Minute)}},
		}
		p := ps
		a := newTestAPI(newMemStore(t, laptop, phone, osCheck, crm, crmPolicy), &p, log)
		a.Explainer, a.Fleet = explainer{asked: &asked}, &fleet
		return a.Routes(), admin, log
	})
}

// TestReadFailuresAreHidden: a read of the projection that fails (other
// than not found) fails the request with 500 UNHANDLED, without its cause,
// on every kind of read handler.
func TestReadFailuresAreHidden(t *testing.T) {
	var cases []apitest.Case
	for _, path := range []string{
		"/identities", "/identities/ident1", "/posture-checks", "/posture-checks/chk1", "/services", "/service-policies/pol1",
		"/authenticators", "/enrollments", "/cas", "/external-jwt-signers", "/identities/ident1/services",
		"/identities/ident1/posture-data", "/failed-service-requests", "/posture-summary",
	} {
		cases = append(cases, apitest.Case{Name: "GET " + path, Method: http.MethodGet, Path: path,
			Status: http.StatusInternalServerError, Code: posture.CodeUnhandled,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(string(r.Body), "disk") {
					t.Fatalf("the cause reached the caller: %s", r.Body)
				}
			}})
	}
	cases = append(cases, apitest.Case{Name: "POST /services", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp"}`,
		Status: http.StatusInternalServerError, Code: posture.CodeUnhandled})
	apitest.Run(t, cases, func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		log := &apitest.Log{}
		store := newMemStore(t, laptop, osCheck, crm, crmPolicy)
		store.err = errDisk
		a := newTestAPI(store, &postureStore{err: errDisk}, log)
		a.Fleet = &fleetStore{err: errDisk}
		return a.Routes(), admin, log
	})
}

// TestRelationHandlers: the entities related to one entity through the
// policies, and the role attributes in use.
func TestRelationHandlers(t *testing.T) {
	runWith(t, []apitest.Case{
		{Name: "identity services: through the policies", Method: http.MethodGet, Path: "/identities/ident1/services", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["name"] != "crm" {
					t.Fatalf("services %s", r.Data)
				}
			}},
		{Name: "identity service policies", Method: http.MethodGet, Path: "/identities/ident1/service-policies", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["name"] != "crm-dial" {
					t.Fatalf("policies %s", r.Data)
				}
			}},
		{Name: "service policy identities: one removed since is left out", Method: http.MethodGet, Path: "/service-policies/pol1/identities", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["id"] != "ident1" {
					t.Fatalf("identities %s", r.Data)
				}
			}},
		{Name: "related to an unknown identity", Method: http.MethodGet, Path: "/identities/ident9/services", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "identity role attributes: filtered", Method: http.MethodGet, Path: `/identity-role-attributes?filter=id%20contains%20%22lap%22`, Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if string(r.Data) != `["laptops"]` {
					t.Fatalf("attributes %s", r.Data)
				}
			}},
		{Name: "role attributes: a filter that does not parse", Method: http.MethodGet, Path: `/service-role-attributes?filter=%3D%3D`, Status: http.StatusBadRequest, Code: posture.CodeInvalidFilter},
	}, func(t *testing.T) (*memStore, *postureStore) {
		s := newMemStore(t, laptop, osCheck, crm, crmPolicy)
		s.selected["reachable ident1"] = []string{"svc1"}
		s.selected["selecting ident1"] = []string{"pol1"}
		s.selected["selected pol1"] = []string{"ident1", "ident-gone"}
		return s, nil
	})
}

// TestMFACriteriaView: a failed MFA check's criteria show their times in
// milliseconds, as the controller writes timestamps; the other checks'
// values and criteria that cannot be read are shown as they are.
func TestMFACriteriaView(t *testing.T) {
	failures := []posture.PolicyFailure{{PolicyID: "p1", PolicyName: "vpn", Checks: []posture.CheckFailure{
		{PostureCheckID: "mfa", PostureCheckType: posture.CheckMFA,
			Criteria: []byte(`{"passedMfaAt":"2026-05-01T10:00:00.199871724Z","wokenAt":null,"unlockedAt":"2026-05-01T10:01:00Z","timeoutSeconds":60,"timeoutRemainingSeconds":-1}`)},
		{PostureCheckID: "odd", PostureCheckType: posture.CheckMFA, Criteria: []byte(`"not criteria"`)},
		{PostureCheckID: "os", PostureCheckType: posture.CheckOS, ActualValue: []byte(`{"type":"Windows","version":"10.0.19045"}`)},
	}}}
	views := policyFailureViews(failures)
	checks := views[0].Checks
	if got, want := string(checks[0].Criteria), `{"passedMfaAt":"2026-05-01T10:00:00.199Z","wokenAt":null,"unlockedAt":"2026-05-01T10:01:00.000Z","timeoutSeconds":60,"timeoutRemainingSeconds":-1}`; got != want {
		t.Errorf("MFA criteria:\n got %s\nwant %s", got, want)
	}
	if string(checks[1].Criteria) != `"not criteria"` || string(checks[2].ActualValue) != `{"type":"Windows","version":"10.0.19045"}` {
		t.Errorf("other checks changed: %s %s", checks[1].Criteria, checks[2].ActualValue)
	}
	if string(failures[0].Checks[0].Criteria) == string(checks[0].Criteria) {
		t.Error("the view changed the failure it was made from")
	}
}

// TestPostureHistoryFilterIsBounded: a filter or a sort reads the window
// whole, so it takes a window of at most maxFilteredHistory entries; a page
// without either is read alone, whatever the window holds.
func TestPostureHistoryFilterIsBounded(t *testing.T) {
	ps := postureStore{}
	for i := range maxFilteredHistory + 1 {
		ps.history = append(ps.history, posture.HistoryEntry{Seq: uint64(i + 1), At: handlerNow.Add(time.Duration(i-maxFilteredHistory) * time.Millisecond),
			Kind: posture.HistoryEndpoint, Event: posture.TypePostureRecorded, Summary: "endpoint woken"})
	}
	path := "/identities/ident1/posture-history"
	cases := []apitest.Case{
		{Name: "a filter over the whole window", Method: http.MethodGet, Path: path + "?filter=" + url.QueryEscape(`kind = "endpoint"`),
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "filter"},
		{Name: "a filter over a narrower window", Method: http.MethodGet, Path: path + "?limit=1&filter=" + url.QueryEscape(`kind = "endpoint"`) +
			"&since=" + url.QueryEscape(handlerNow.Add(-time.Second).Format(time.RFC3339Nano)), Status: http.StatusOK},
		{Name: "a page without a filter", Method: http.MethodGet, Path: path + "?limit=2&offset=100000", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["seq"] != float64(maxFilteredHistory+1) {
					t.Fatalf("the last page: %s", r.Data)
				}
			}},
	}
	phone := posture.Identity{ID: "ident1", Name: "phone", Type: posture.IdentityDevice, RoleAttributes: []string{}, Tags: posture.Tags{}}
	apitest.Run(t, cases, func(t *testing.T, _ apitest.Case) ([]api.Route, *api.Principal, *apitest.Log) {
		log := &apitest.Log{}
		p := ps
		return newTestAPI(newMemStore(t, phone), &p, log).Routes(), admin, log
	})
}
