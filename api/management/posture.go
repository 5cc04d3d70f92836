package management

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/evaluator"
)

// PostureStore is what the posture read models read (projections.Store
// implements it).
type PostureStore interface {
	PostureData(identityID string) (posture.IdentityPosture, []posture.SessionPosture, error)
	FailedRequests(identityID string) ([]posture.FailedServiceRequest, error)
	// FleetFailedRequests reads the newest failed service requests across
	// all identities, newest first (at most limit; limit <= 0: all that
	// are kept, posture.MaxFleetFailedRequests).
	FleetFailedRequests(limit int) ([]posture.FleetFailedRequest, error)
	History(identityID string, since, until time.Time) ([]posture.HistoryEntry, error)
	// HistoryPage is a page of History's entries, and how many there are.
	HistoryPage(identityID string, since, until time.Time, offset, limit int) ([]posture.HistoryEntry, int, error)
}

// Explainer rebuilds an access decision at a moment from the log (the
// node's wiring implements it: the live projection for now, a replay for a
// past moment).
type Explainer interface {
	Explain(ctx context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error)
}

// The posture-data shape of the seed's section 2.2.
type postureSlot struct {
	LastUpdatedAt  *api.Time `json:"lastUpdatedAt"`
	PostureCheckID string    `json:"postureCheckId"`
	TimedOut       bool      `json:"timedOut"`
	// AgeSeconds is how old the fact is, in whole seconds, when read; null
	// for a fact never reported.
	AgeSeconds *int64 `json:"ageSeconds"`
}

type domainData struct {
	postureSlot
	Domain string `json:"domain"`
}

type macData struct {
	postureSlot
	Addresses []string `json:"addresses"`
}

type osData struct {
	postureSlot
	Build   *string `json:"build"`
	Type    string  `json:"type"`
	Version string  `json:"version"`
}

type processData struct {
	postureSlot
	Path               string   `json:"path"`
	IsRunning          bool     `json:"isRunning"`
	BinaryHash         string   `json:"binaryHash,omitempty"`
	SignerFingerprints []string `json:"signerFingerprints"`
}

type mfaData struct {
	APISessionID   string    `json:"apiSessionId"`
	PassedMFA      bool      `json:"passedMfa"`
	PassedAt       *api.Time `json:"passedAt"`
	PassedOnWake   *bool     `json:"passedOnWake"`
	PassedOnUnlock *bool     `json:"passedOnUnlock"`
}

type endpointState struct {
	WokenAt    *api.Time `json:"wokenAt"`
	UnlockedAt *api.Time `json:"unlockedAt"`
}

type sessionData struct {
	MFA           mfaData          `json:"mfa"`
	EndpointState endpointState    `json:"endpointState"`
	SDKInfo       *posture.SDKInfo `json:"sdkInfo,omitempty"`
}

type postureDataView struct {
	APISessionPostureData map[string]sessionData `json:"apiSessionPostureData"`
	Domain                domainData             `json:"domain"`
	MAC                   macData                `json:"mac"`
	OS                    osData                 `json:"os"`
	Processes             []processData          `json:"processes"`
}

func slot(checkID string, at, now time.Time) postureSlot {
	t := api.Time(at)
	age := int64(max(now.Sub(at), 0) / time.Second)
	return postureSlot{LastUpdatedAt: &t, PostureCheckID: checkID, AgeSeconds: &age}
}

// postureData is GET /identities/:id/posture-data. As on the real
// controller, an identity without data (or an unknown one) answers an empty
// structure.
func (a *API) postureData(c echo.Context) error {
	ip, sessions, err := a.Posture.PostureData(c.Param("id"))
	if err != nil {
		return err
	}
	if ip.OS == nil && ip.MAC == nil && ip.Domain == nil && len(ip.Processes) == 0 && len(sessions) == 0 {
		if err := a.exists(posture.KindIdentity, "identity", c.Param("id")); err != nil {
			return err
		}
	}
	now := a.Writer.Now()
	v := postureDataView{APISessionPostureData: map[string]sessionData{}, Processes: []processData{}}
	if ip.Domain != nil {
		v.Domain = domainData{slot(ip.Domain.CheckID, ip.Domain.At, now), ip.Domain.Domain}
	}
	if ip.MAC != nil {
		v.MAC = macData{slot(ip.MAC.CheckID, ip.MAC.At, now), ip.MAC.Addresses}
	}
	if ip.OS != nil {
		v.OS = osData{postureSlot: slot(ip.OS.CheckID, ip.OS.At, now), Type: strings.ToLower(ip.OS.Type), Version: ip.OS.Version}
		if ip.OS.Build != "" {
			v.OS.Build = &ip.OS.Build
		}
	}
	for _, p := range ip.Processes {
		v.Processes = append(v.Processes, processData{slot(p.CheckID, p.At, now), p.Path, p.IsRunning, p.Hash, p.SignerFingerprints})
	}
	for _, s := range sessions {
		v.APISessionPostureData[s.APISessionID] = sessionData{
			MFA:           mfaData{APISessionID: s.APISessionID, PassedMFA: s.MFAPassedAt != nil, PassedAt: api.TimePtr(s.MFAPassedAt)},
			EndpointState: endpointState{WokenAt: api.TimePtr(s.WokenAt), UnlockedAt: api.TimePtr(s.UnlockedAt)},
			SDKInfo:       s.SDKInfo,
		}
	}
	return api.OK(c, v)
}

type failedRequestView struct {
	APISessionID   string              `json:"apiSessionId"`
	ServiceID      string              `json:"serviceId"`
	ServiceName    string              `json:"serviceName"`
	SessionType    string              `json:"sessionType"`
	When           api.Time            `json:"when"`
	PolicyFailures []policyFailureView `json:"policyFailures"`
}

type policyFailureView struct {
	PolicyID   string                 `json:"policyId"`
	PolicyName string                 `json:"policyName"`
	Checks     []posture.CheckFailure `json:"checks"`
}

func newFailedRequestView(f posture.FailedServiceRequest) failedRequestView {
	return failedRequestView{APISessionID: f.APISessionID, ServiceID: f.ServiceID, ServiceName: f.ServiceName,
		SessionType: f.SessionType, When: api.Time(f.When), PolicyFailures: policyFailureViews(f.PolicyFailures)}
}

// policyFailureViews shows policy failures with their checks as a list,
// empty rather than null, and an MFA check's criteria with the wire's
// timestamps.
func policyFailureViews(list []posture.PolicyFailure) []policyFailureView {
	out := make([]policyFailureView, 0, len(list))
	for _, p := range list {
		checks := make([]posture.CheckFailure, len(p.Checks))
		for i, c := range p.Checks {
			if c.PostureCheckType == posture.CheckMFA {
				c.Criteria = mfaCriteriaView(c.Criteria)
			}
			checks[i] = c
		}
		out = append(out, policyFailureView{p.PolicyID, p.PolicyName, checks})
	}
	return out
}

// mfaCriteriaView is an MFA check's criteria with its times in
// milliseconds, as the controller writes every timestamp (the evaluation
// keeps them whole); criteria it cannot read are shown as they are.
func mfaCriteriaView(raw json.RawMessage) json.RawMessage {
	var c evaluator.MFACriteria
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return raw
	}
	// The times in front, as the evaluation writes them, in place of
	// those of the criteria they shadow.
	out, err := json.Marshal(struct {
		PassedMFAAt *api.Time `json:"passedMfaAt"`
		WokenAt     *api.Time `json:"wokenAt"`
		UnlockedAt  *api.Time `json:"unlockedAt"`
		evaluator.MFACriteria
	}{api.TimePtr(c.PassedMFAAt), api.TimePtr(c.WokenAt), api.TimePtr(c.UnlockedAt), c})
	if err != nil {
		return raw
	}
	return out
}

// failedRequests is GET /identities/:id/failed-service-requests: the last
// 50, oldest first.
func (a *API) failedRequests(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
		return err
	}
	list, err := a.Posture.FailedRequests(id)
	if err != nil {
		return err
	}
	out := make([]failedRequestView, len(list))
	for i, f := range list {
		out[i] = newFailedRequestView(f)
	}
	return api.OK(c, out)
}

// fleetFailedRequestView is a failed service request with the identity it
// was refused to.
type fleetFailedRequestView struct {
	IdentityID string        `json:"identityId"`
	Identity   api.EntityRef `json:"identity"`
	failedRequestView
}

// fleetFailedRequests is GET /failed-service-requests: the last failed
// service requests across the fleet (the newest 500 are kept), newest
// first, a page at a time (limit, offset, filter and sort as on every
// list). It reads the projection's fleet-wide index and the names of the
// identities it names, never the identities themselves one by one.
func (a *API) fleetFailedRequests(c echo.Context) error {
	list, err := a.Posture.FleetFailedRequests(0)
	if err != nil {
		return err
	}
	names := map[string]string{}
	out := make([]fleetFailedRequestView, len(list))
	for i, f := range list {
		name, ok := names[f.IdentityID]
		if !ok {
			if name, err = a.identityName(f.IdentityID); err != nil {
				return err
			}
			names[f.IdentityID] = name
		}
		out[i] = fleetFailedRequestView{IdentityID: f.IdentityID, Identity: api.Ref("identities", f.IdentityID, name),
			failedRequestView: newFailedRequestView(f.FailedServiceRequest)}
	}
	return api.List(c, out)
}

// identityName is an identity's name; "" for one that no longer exists.
func (a *API) identityName(id string) (string, error) {
	raw, err := a.Store.RawEntity(posture.KindIdentity, id)
	if errors.Is(err, posture.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var i struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &i); err != nil {
		return "", fmt.Errorf("identity %s: %w", id, err)
	}
	return i.Name, nil
}

// queryTime parses an optional RFC 3339 query parameter.
func queryTime(c echo.Context, name string) (time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, posture.Invalid(name, "must be an RFC 3339 time", s)
	}
	if name != "since" {
		t = posture.EndOf(s, t) // at, until: the end of a range
	}
	return t, beforeLog(name, s, t)
}

// beforeLog refuses a time before 1970: no log holds one, and the zero
// time means "not given" to the code that reads it.
func beforeLog(name, s string, t time.Time) error {
	if t.Before(time.Unix(0, 0)) {
		return posture.Invalid(name, "must be 1970 or later", s)
	}
	return nil
}

type historyView struct {
	posture.HistoryEntry
	At api.Time `json:"at"`
}

// maxFilteredHistory bounds the window of an identity's history that a
// filter or a sort reads whole.
const maxFilteredHistory = 100_000

// postureHistory is GET /identities/:id/posture-history?since=&until=: the
// identity's audit timeline, oldest first.
func (a *API) postureHistory(c echo.Context) error {
	id := c.Param("id")
	since, err := queryTime(c, "since")
	if err != nil {
		return err
	}
	until, err := queryTime(c, "until")
	if err != nil {
		return err
	}
	params, err := api.ParseList(c)
	if err != nil {
		return err
	}
	view := func(entries []posture.HistoryEntry) []historyView {
		views := make([]historyView, len(entries))
		for i, e := range entries {
			views[i] = historyView{HistoryEntry: e, At: api.Time(e.At)}
		}
		return views
	}
	// Only the page is read whole (an identity's history is as long as its
	// own requests make it); a filter or a sort reads the window whole, so
	// it takes a window of at most maxFilteredHistory entries.
	filtered := params.Filter != "" || params.Sort != ""
	limit := params.PageLimit()
	if filtered {
		limit = 0
	}
	page, total, err := a.Posture.HistoryPage(id, since, until, int(params.Offset), limit)
	if err != nil {
		return err
	}
	if total == 0 {
		if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
			return err
		}
	}
	if !filtered {
		return api.PageOf(c, params, total, view(page))
	}
	if total > maxFilteredHistory {
		return posture.Invalid("filter", fmt.Sprintf("filters and sorts the entries of a window of at most %d entries, and this one holds %d: "+
			"narrow it with since and until", maxFilteredHistory, total), params.Filter+params.Sort)
	}
	entries, err := a.Posture.History(id, since, until)
	if err != nil {
		return err
	}
	return api.List(c, view(entries))
}

// policyAdvice is GET /identities/:id/policy-advice/:serviceId?at=&type=:
// the decision as it stood at the moment (default now), rebuilt from the
// log; NOT_FOUND when the identity or the service did not exist then.
func (a *API) policyAdvice(c echo.Context) error {
	id, serviceID := c.Param("id"), c.Param("serviceId")
	at, err := queryTime(c, "at")
	if err != nil {
		return err
	}
	typ := posture.Dial
	switch strings.ToLower(c.QueryParam("type")) {
	case "", "dial":
	case "bind":
		typ = posture.Bind
	default:
		return posture.Invalid("type", "must be Dial or Bind", c.QueryParam("type"))
	}
	x, err := a.Explainer.Explain(c.Request().Context(), id, serviceID, typ, at)
	if err != nil {
		return err
	}
	// The other type's permission, for the fields the ziti CLI's policy
	// advisor reads.
	other := map[string]string{posture.Dial: posture.Bind, posture.Bind: posture.Dial}[typ]
	y, err := a.Explainer.Explain(c.Request().Context(), id, serviceID, other, at)
	if err != nil {
		return err
	}
	allowed := map[string]bool{typ: x.Decision != posture.DecisionNoPermission, other: y.Decision != posture.DecisionNoPermission}
	v := policyAdviceView{Explanation: x, IsDialAllowed: allowed[posture.Dial], IsBindAllowed: allowed[posture.Bind],
		Service: api.Ref("services", serviceID, x.ServiceName), CommonRouters: []api.EntityRef{}}
	v.Identity = api.Ref("identities", id, "")
	var named struct{ Name string }
	if raw, err := a.Store.RawEntity(posture.KindIdentity, id); err == nil && json.Unmarshal(raw, &named) == nil {
		v.Identity.Name = named.Name
	}
	return api.OK(c, v)
}

// policyAdviceView is the decision at a moment (postured's explanation)
// with the fields of the OpenZiti controller's policy advice: whether a
// Dial and a Bind policy grant the identity the service (whatever its
// posture), and the edge routers they share, which postured, without a
// data plane, does not place (none).
type policyAdviceView struct {
	posture.Explanation
	Identity            api.EntityRef   `json:"identity"`
	Service             api.EntityRef   `json:"service"`
	IsDialAllowed       bool            `json:"isDialAllowed"`
	IsBindAllowed       bool            `json:"isBindAllowed"`
	IdentityRouterCount int             `json:"identityRouterCount"`
	ServiceRouterCount  int             `json:"serviceRouterCount"`
	CommonRouters       []api.EntityRef `json:"commonRouters"`
}

// postureRoutes are the posture read models: posture data, failed service
// requests (an identity's and the fleet's), the audit timeline and the
// decision at a moment.
func (a *API) postureRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/identities/:id/posture-data", Access: api.Admin, Handler: a.postureData},
		{Method: http.MethodGet, Path: "/identities/:id/failed-service-requests", Access: api.Admin, Handler: a.failedRequests},
		{Method: http.MethodGet, Path: "/failed-service-requests", Access: api.Admin, Handler: a.fleetFailedRequests},
		{Method: http.MethodGet, Path: "/identities/:id/posture-history", Access: api.Admin, Handler: a.postureHistory},
		{Method: http.MethodGet, Path: "/identities/:id/policy-advice/:serviceId", Access: api.Admin, Handler: a.policyAdvice},
	}
}

// UpdateService, PatchService and DeleteService serve the client API's
// admin-only service operations with the management API's handlers.
func (a *API) UpdateService(c echo.Context) error { return a.services().update(c) }

// PatchService: see UpdateService.
func (a *API) PatchService(c echo.Context) error { return a.services().patch(c) }

// DeleteService: see UpdateService.
func (a *API) DeleteService(c echo.Context) error { return a.services().delete(c) }
