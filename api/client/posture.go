package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/evaluator"
)

// Store is what the posture, service and session operations read
// (projections.Store implements it).
type Store interface {
	ServiceReader
	PostureReader
	SessionReader
}

// ServiceReader is what the service handlers read (services.go): the
// model, the grants and their evaluation, the API session's wake and
// unlock (which move its MFA queries), and a session token's session.
type ServiceReader interface {
	Raw(kind posture.Kind) ([]json.RawMessage, error)
	Any(kind posture.Kind) (bool, error)
	api.ConfigReader
	Reachable(policyKind posture.Kind, from, id, to, typ string) []string
	ServicesFor(identityID, typ string) []posture.Grant
	Evaluate(identityID, apiSessionID string, policyIDs []string, now time.Time) ([]posture.PolicyResult, error)
	PostureData(identityID string) (posture.IdentityPosture, []posture.SessionPosture, error)
	Session(id string) (posture.Session, error)
	LastChange(identityID string) (time.Time, error)
}

// PostureReader is what the posture-response handlers read: the grants
// and their evaluation, the posture data, a service's name.
type PostureReader interface {
	ServicesFor(identityID, typ string) []posture.Grant
	Evaluate(identityID, apiSessionID string, policyIDs []string, now time.Time) ([]posture.PolicyResult, error)
	PostureData(identityID string) (posture.IdentityPosture, []posture.SessionPosture, error)
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
	// ChangesPosture says whether responses would change the identity's
	// values or signal a wake or unlock (charged api.TransitionCost).
	ChangesPosture(identityID string, responses []posture.PostureResponse) (bool, error)
}

// transitionCost is api.TransitionCost for a request that may derive
// transitions, else 0.
func transitionCost(derives bool) int {
	if derives {
		return api.TransitionCost
	}
	return 0
}

// SessionReader is what the session handlers read (sessions.go).
type SessionReader interface {
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
	Access(identityID, apiSessionID, serviceID, typ string, now time.Time) ([]posture.PolicyResult, error)
	Session(id string) (posture.Session, error)
	SessionFor(apiSessionID, typ, serviceID string) (posture.Session, error)
	IdentitySessions(identityID string) ([]posture.Session, error)
	APISession(id string) (posture.APISession, error)
}

// SessionTokens signs and verifies session tokens (pki.Signer implements
// it).
type SessionTokens interface {
	Sign(claims jwt.Claims) (string, error)
	Parse(token string, claims jwt.Claims) error
}

// ServiceAdmin is the admin-only service operations the client API offers
// (management.API implements them).
type ServiceAdmin interface {
	UpdateService(c echo.Context) error
	PatchService(c echo.Context) error
	DeleteService(c echo.Context) error
}

// postureResponseInput is one posture response as submitted.
type postureResponseInput struct {
	ID                 *string  `json:"id"`
	TypeID             string   `json:"typeId"`
	Type               *string  `json:"type"`
	Version            *string  `json:"version"`
	Build              string   `json:"build"`
	MACAddresses       []string `json:"macAddresses"`
	Domain             *string  `json:"domain"`
	Path               string   `json:"path"`
	IsRunning          bool     `json:"isRunning"`
	Hash               string   `json:"hash"`
	SignerFingerprints []string `json:"signerFingerprints"`
	Woken              bool     `json:"woken"`
	Unlocked           bool     `json:"unlocked"`
}

// postureResponse validates one response. Unknown typeIds (MFA and
// PROCESS_MULTI among them) cannot be parsed, as on the real controller.
func postureResponse(field string, in postureResponseInput) (posture.PostureResponse, error) {
	r := posture.PostureResponse{TypeID: strings.ToUpper(strings.TrimSpace(in.TypeID))}
	if in.ID == nil || strings.TrimSpace(*in.ID) == "" {
		return r, posture.Invalid(field+"id", "is required", nil)
	}
	r.ID = strings.TrimSpace(*in.ID)
	if err := bounded(field, in); err != nil {
		return r, err
	}
	req := func(name string, v *string) (string, error) {
		if v == nil || strings.TrimSpace(*v) == "" {
			return "", posture.Invalid(field+name, "is required", nil)
		}
		return strings.TrimSpace(*v), nil
	}
	var err error
	switch r.TypeID {
	case string(posture.CheckOS):
		if r.Type, err = req("type", in.Type); err != nil {
			return r, err
		}
		if r.Version, err = req("version", in.Version); err != nil {
			return r, err
		}
		r.Build = strings.TrimSpace(in.Build)
	case string(posture.CheckMAC):
		if in.MACAddresses == nil {
			return r, posture.Invalid(field+"macAddresses", "is required", nil)
		}
		r.MACAddresses = in.MACAddresses
	case string(posture.CheckDomain):
		if in.Domain == nil {
			return r, posture.Invalid(field+"domain", "is required", nil)
		}
		r.Domain = strings.TrimSpace(*in.Domain)
	case string(posture.CheckProcess):
		if r.Path = strings.TrimSpace(in.Path); r.Path == "" {
			return r, posture.Invalid(field+"path", "is required", in.Path)
		}
		r.IsRunning, r.Hash, r.SignerFingerprints = in.IsRunning, in.Hash, in.SignerFingerprints
	case posture.ResponseEndpointState:
		r.Woken, r.Unlocked = in.Woken, in.Unlocked
	case "":
		return r, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "typeId is required: OS, MAC, DOMAIN, PROCESS or ENDPOINT_STATE"}
	default:
		return r, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "unknown posture response typeId " + in.TypeID + ": expected OS, MAC, DOMAIN, PROCESS or ENDPOINT_STATE"}
	}
	return r, nil
}

// bounded checks the sizes of a posture response's fields (see api.MaxLabel).
func bounded(field string, in postureResponseInput) error {
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"id", str(in.ID), api.MaxLabel}, {"typeId", in.TypeID, api.MaxLabel}, {"type", str(in.Type), api.MaxLabel},
		{"version", str(in.Version), api.MaxLabel}, {"build", in.Build, api.MaxLabel}, {"domain", str(in.Domain), api.MaxLabel},
		{"path", in.Path, api.MaxPath}, {"hash", in.Hash, api.MaxLabel},
	} {
		if err := api.CheckMax(field+f.name, f.v, f.max); err != nil {
			return err
		}
		if err := api.CheckText(field+f.name, f.v); err != nil {
			return err
		}
	}
	if err := api.CheckList(field+"macAddresses", in.MACAddresses, api.MaxList, api.MaxMAC); err != nil {
		return err
	}
	if len(in.SignerFingerprints) > api.MaxSigners {
		return posture.Invalid(fmt.Sprintf("%ssignerFingerprints[%d]", field, api.MaxSigners), fmt.Sprintf("at most %d signer fingerprints", api.MaxSigners),
			fmt.Sprintf("(%d fingerprints)", len(in.SignerFingerprints)))
	}
	if err := api.CheckLabels(field+"signerFingerprints", in.SignerFingerprints); err != nil {
		return err
	}
	// What a client reports shows in the posture data, the failed
	// requests and the console as sent: no control characters or
	// bidirectional overrides, which could make it read as something else.
	for _, l := range []struct {
		name string
		list []string
	}{{"macAddresses", in.MACAddresses}, {"signerFingerprints", in.SignerFingerprints}} {
		for i, v := range l.list {
			if err := api.CheckText(fmt.Sprintf("%s%s[%d]", field, l.name, i), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// timeoutChange is a service whose MFA query a wake or unlock now affects.
type timeoutChange struct {
	ID               string `json:"id"`
	Name             string `json:"name"`
	PostureQueryType string `json:"postureQueryType"`
	Timeout          int64  `json:"timeout"`
	TimeoutRemaining int64  `json:"timeoutRemaining"`
}

type postureResponseResult struct {
	Services []timeoutChange `json:"services"`
}

// postureResponses are the posture-response operations: they append the
// responses and answer, after a wake or unlock, the services whose MFA
// query it shortened. They read only what PostureReader offers.
type postureResponses struct {
	store  PostureReader
	writer *api.Writer
	grace  time.Duration // the wake/unlock grace reported to clients
	budget *api.Budget   // bytes of posture responses per identity
}

func (a *API) postureResponses() postureResponses {
	return postureResponses{store: a.Store, writer: a.Writer, grace: a.MFAGrace, budget: a.Budget}
}

func (a postureResponses) create(c echo.Context) error {
	var in postureResponseInput
	if err := a.decode(c, &in); err != nil {
		return err
	}
	r, err := postureResponse("", in)
	if err != nil {
		return err
	}
	return a.record(c, []posture.PostureResponse{r})
}

func (a postureResponses) createBulk(c echo.Context) error {
	var in []postureResponseInput
	if err := a.decode(c, &in); err != nil {
		return err
	}
	if in == nil { // no body, or null ([] decodes to an empty slice)
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON array of posture responses"}
	}
	if len(in) == 0 {
		// Nothing to record: answered as the OpenZiti controller answers it.
		return noServicesAffected.Answer(c, http.StatusCreated)
	}
	if len(in) > api.MaxBulk {
		return posture.Invalid(fmt.Sprintf("[%d]", api.MaxBulk), fmt.Sprintf("at most %d posture responses in one request", api.MaxBulk),
			fmt.Sprintf("(%d responses)", len(in)))
	}
	out := make([]posture.PostureResponse, 0, len(in))
	for i, x := range in {
		r, err := postureResponse("["+strconv.Itoa(i)+"].", x)
		if err != nil {
			return err
		}
		out = append(out, r)
	}
	return a.record(c, out)
}

// decode reads a posture-response body into v if the identity's budget
// has room for it: a body it could not keep is not even decoded. What the
// request costs (its event, escapes and all, and api.RequestCost) is taken
// once the event is built (record).
func (a postureResponses) decode(c echo.Context, v any) error {
	data, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	if err := a.budget.Check(c, api.PrincipalOf(c).Identity.ID, len(data)+api.RequestCost); err != nil {
		return err
	}
	return api.Decode(c, v)
}

// recordPosture appends the responses as one event, waits for the
// projection, and answers the services whose MFA queries a wake or unlock
// now affects.
func (a postureResponses) record(c echo.Context, responses []posture.PostureResponse) error {
	p := api.PrincipalOf(c)
	extra := 0
	if a.budget != nil {
		changes, err := a.store.ChangesPosture(p.Identity.ID, responses)
		if err != nil {
			return err
		}
		extra = transitionCost(changes)
	}
	e, err := a.writer.AppendBudgeted(c, a.budget, p.Identity.ID, posture.PostureRecorded{IdentityID: p.Identity.ID, APISessionID: p.Session.ID, Responses: responses}, extra)
	if err != nil {
		return err
	}
	woken, unlocked := false, false
	for _, r := range responses {
		woken = woken || r.Woken
		unlocked = unlocked || r.Unlocked
	}
	if !woken && !unlocked {
		return noServicesAffected.Answer(c, http.StatusCreated)
	}
	result := postureResponseResult{}
	if result.Services, err = a.wakeAffected(p, e.At, woken, unlocked); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.Envelope{Data: result})
}

// noServicesAffected answers a posture response without a wake or unlock,
// most of them.
var noServicesAffected = api.NewFixed(postureResponseResult{Services: []timeoutChange{}})

// wakeAffected lists the services reachable through a policy with an MFA
// check that prompts on the wake or unlock recorded at at, and whose time
// left that signal shortened: the check then needs a TOTP within the grace.
// Everything is evaluated at the event's time, with the evaluator's
// MFATimeoutRemaining, as the projection evaluates it.
func (a postureResponses) wakeAffected(p *api.Principal, at time.Time, woken, unlocked bool) ([]timeoutChange, error) {
	_, sessions, err := a.store.PostureData(p.Identity.ID)
	if err != nil {
		return nil, err
	}
	var after *posture.SessionPosture
	for i := range sessions {
		if sessions[i].APISessionID == p.Session.ID {
			after = &sessions[i]
		}
	}
	out := []timeoutChange{}
	if after == nil || after.MFAPassedAt == nil {
		return out, nil
	}
	// before is the session's posture without this signal.
	before := *after
	if woken {
		before.WokenAt = nil
	}
	if unlocked {
		before.UnlockedAt = nil
	}
	grace := int64(a.grace.Seconds())
	dBefore := evaluator.Data{Session: before, MFAGrace: a.grace}
	grants := a.store.ServicesFor(p.Identity.ID, "")
	results, err := evaluateGrants(a.store, p, grants, at)
	if err != nil {
		return nil, err
	}
	for _, g := range grants {
		best := int64(0)
		found := false
		for _, pid := range g.Policies {
			for _, cr := range results[pid].Checks {
				ch := cr.Check
				if ch.TypeID != posture.CheckMFA || !((woken && ch.PromptOnWake) || (unlocked && ch.PromptOnUnlock)) {
					continue
				}
				// A timeout that ends within the grace is not shortened
				// by the signal. ignoreLegacyEndpoints hides the time left
				// from legacy clients, not the timeout (wire reference
				// 5.4): it does not count here.
				unhidden := ch
				unhidden.IgnoreLegacyEndpoints = false
				if timeout := evaluator.MFATimeout(ch); timeout != evaluator.NoTimeout &&
					evaluator.MFATimeoutRemaining(unhidden, dBefore, at) <= grace {
					continue
				}
				if !found || (ch.TimeoutSeconds > 0 && (best <= 0 || ch.TimeoutSeconds < best)) {
					best = ch.TimeoutSeconds
				}
				found = true
			}
		}
		if found {
			name := serviceName(a.store, g.ServiceID)
			if best <= 0 {
				best = -1
			}
			out = append(out, timeoutChange{ID: g.ServiceID, Name: name, PostureQueryType: string(posture.CheckMFA), Timeout: best, TimeoutRemaining: grace})
		}
	}
	return out, nil
}

// policyEvaluator evaluates policies for an API session (Store.Evaluate).
type policyEvaluator interface {
	Evaluate(identityID, apiSessionID string, policyIDs []string, now time.Time) ([]posture.PolicyResult, error)
}

// evaluateGrants evaluates, once each, the policies of a set of grants.
func evaluateGrants(store policyEvaluator, p *api.Principal, grants []posture.Grant, now time.Time) (map[string]posture.PolicyResult, error) {
	seen := map[string]bool{}
	var pids []string
	for _, g := range grants {
		for _, pid := range g.Policies {
			if !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	results, err := store.Evaluate(p.Identity.ID, p.Session.ID, pids, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]posture.PolicyResult, len(results))
	for _, r := range results {
		out[r.PolicyID] = r
	}
	return out, nil
}

// postureRoutes are posture responses, services and sessions.
func (a *API) postureRoutes() []api.Route {
	pr := a.postureResponses()
	return []api.Route{
		{Method: http.MethodPost, Path: "/posture-response", Access: api.Session, Handler: pr.create},
		{Method: http.MethodPost, Path: "/posture-response-bulk", Access: api.Session, Handler: pr.createBulk},
		{Method: http.MethodGet, Path: "/services", Access: api.Session, Handler: a.listServices},
		{Method: http.MethodGet, Path: "/services/:id", Access: api.Session, Handler: a.detailService},
		{Method: http.MethodPut, Path: "/services/:id", Access: api.Admin, Handler: func(c echo.Context) error { return a.ServiceAdmin.UpdateService(c) }},
		{Method: http.MethodPatch, Path: "/services/:id", Access: api.Admin, Handler: func(c echo.Context) error { return a.ServiceAdmin.PatchService(c) }},
		{Method: http.MethodDelete, Path: "/services/:id", Access: api.Admin, Handler: func(c echo.Context) error { return a.ServiceAdmin.DeleteService(c) }},
		{Method: http.MethodGet, Path: "/services/:id/edge-routers", Access: api.Session, Handler: a.serviceEdgeRouters},
		{Method: http.MethodGet, Path: "/services/:id/terminators", Access: api.Session, Handler: a.serviceTerminators},
		{Method: http.MethodGet, Path: "/current-api-session/service-updates", Access: api.Session, Handler: a.serviceUpdates},
		{Method: http.MethodGet, Path: "/current-identity/edge-routers", Access: api.Session, Handler: a.currentIdentityEdgeRouters},
		{Method: http.MethodGet, Path: "/sessions", Access: api.Session, Handler: a.listSessions},
		{Method: http.MethodPost, Path: "/sessions", Access: api.Session, Handler: a.createSession},
		{Method: http.MethodGet, Path: "/sessions/:id", Access: api.Session, Handler: a.detailSession},
		{Method: http.MethodDelete, Path: "/sessions/:id", Access: api.Session, Handler: a.deleteSession},
	}
}
