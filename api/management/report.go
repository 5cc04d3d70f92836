package management

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// ReportStore reads what report-only checks record (projections.Store
// implements it): each identity's would-denies and a check's impact.
type ReportStore interface {
	WouldDenies(identityID string) ([]posture.WouldDeny, error)
	Impact(checkID, after string, limit int) ([]posture.CheckImpact, bool, error)
}

type wouldDenyView struct {
	SessionID      string              `json:"sessionId"`
	APISessionID   string              `json:"apiSessionId"`
	ServiceID      string              `json:"serviceId"`
	ServiceName    string              `json:"serviceName"`
	SessionType    string              `json:"sessionType"`
	When           api.Time            `json:"when"`
	PolicyFailures []policyFailureView `json:"policyFailures"`
}

// wouldDeny is GET /identities/:id/would-deny: the last
// posture.MaxFailedRequests sessions granted only because failing checks
// are report-only, oldest first, each with every granting policy and its
// failing checks (reportOnly marks the checks that only report).
func (a *API) wouldDeny(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
		return err
	}
	list, err := a.Report.WouldDenies(id)
	if err != nil {
		return err
	}
	out := make([]wouldDenyView, len(list))
	for i, w := range list {
		out[i] = wouldDenyView{SessionID: w.SessionID, APISessionID: w.APISessionID, ServiceID: w.ServiceID, ServiceName: w.ServiceName,
			SessionType: w.SessionType, When: api.Time(w.When), PolicyFailures: policyFailureViews(w.PolicyFailures)}
	}
	return api.OK(c, out)
}

type serviceAccessView struct {
	ServiceID   string `json:"serviceId"`
	ServiceName string `json:"serviceName"`
	Type        string `json:"type"`
}

type impactIdentityView struct {
	IdentityID   string   `json:"identityId"`
	IdentityName string   `json:"identityName"`
	FailingSince api.Time `json:"failingSince"`
	// FailingSeconds is how long it has failed the check, when read.
	FailingSeconds int64 `json:"failingSeconds"`
	// LosesAccess: the check is its only path to a service (Loses) or a
	// session of it would be removed.
	LosesAccess     bool                `json:"losesAccess"`
	Loses           []serviceAccessView `json:"loses"`
	SessionsRemoved int                 `json:"sessionsRemoved"`
}

type impactView struct {
	CheckID   string    `json:"checkId"`
	CheckName string    `json:"checkName"`
	Mode      string    `json:"mode"`
	EnforceAt *api.Time `json:"enforceAt"`
	Message   string    `json:"message,omitempty"`
	At        api.Time  `json:"at"`
	// FailingCount counts every identity failing the check now;
	// Identities lists a page of them, in identity id order.
	FailingCount int64                `json:"failingCount"`
	Identities   []impactIdentityView `json:"identities"`
	// LosingAccessCount counts the identities of the page that would lose
	// access at enforceAt if nothing changes.
	LosingAccessCount int `json:"losingAccessCount"`
	// Next is the identity id to pass as after for the next page.
	Next string `json:"next,omitempty"`
}

// impact is GET /posture-checks/:id/impact: for a report-only check, who
// fails it now and since when, and who would lose access at its enforceAt
// (or if it enforced now, without one) if nothing changes: the identities
// for which the check's policies are the only path to a service. Identities
// are paged in id order: limit (default 100, at most 500) and after (the
// previous page's next). 404 for an unknown check, 400 for a check that
// enforces.
func (a *API) impact(c echo.Context) error {
	id := c.Param("id")
	raw, err := a.Store.RawEntity(posture.KindCheck, id)
	if err != nil {
		return posture.NotFound("posture check", id)
	}
	var chk posture.Check
	if err := json.Unmarshal(raw, &chk); err != nil {
		return err
	}
	now := a.Writer.Now().UTC()
	if !chk.ReportOnly(now) {
		return posture.Invalid("id", `the posture check enforces: impact applies to checks in report mode (enforcement.mode "report") before their enforceAt`, id)
	}
	limit, err := intParam(c, "limit", 100, 1, 500)
	if err != nil {
		return err
	}
	list, more, err := a.Report.Impact(id, c.QueryParam("after"), limit)
	if err != nil {
		return err
	}
	v := impactView{CheckID: chk.ID, CheckName: chk.Name, Mode: chk.Enforcement.Mode, Message: chk.Enforcement.Message,
		At: api.Time(now), Identities: make([]impactIdentityView, 0, len(list))}
	if at := chk.Enforcement.EnforceAt; at != nil {
		t := api.Time(*at)
		v.EnforceAt = &t
	}
	if a.Fleet != nil {
		counts, err := a.Fleet.FleetCounts()
		if err != nil {
			return err
		}
		for _, fc := range counts {
			if fc.Kind == "c" && fc.ID == id {
				v.FailingCount = fc.ReportOnlyFailing
			}
		}
	}
	for _, e := range list {
		iv := impactIdentityView{IdentityID: e.IdentityID, IdentityName: a.name(posture.KindIdentity, e.IdentityID),
			FailingSince: api.Time(e.Since), FailingSeconds: int64(max(now.Sub(e.Since), 0) / time.Second),
			Loses: []serviceAccessView{}, SessionsRemoved: e.SessionsRemoved}
		for _, l := range e.Loses {
			iv.Loses = append(iv.Loses, serviceAccessView{l.ServiceID, a.name(posture.KindService, l.ServiceID), l.Type})
		}
		iv.LosesAccess = len(iv.Loses) > 0 || iv.SessionsRemoved > 0
		if iv.LosesAccess {
			v.LosingAccessCount++
		}
		v.Identities = append(v.Identities, iv)
	}
	if more && len(list) > 0 {
		v.Next = list[len(list)-1].IdentityID
	}
	return api.OK(c, v)
}

// name is an entity's name ("" when it cannot be read).
func (a *API) name(kind posture.Kind, id string) string {
	var named struct {
		Name string `json:"name"`
	}
	if raw, err := a.Store.RawEntity(kind, id); err == nil {
		_ = json.Unmarshal(raw, &named)
	}
	return named.Name
}

func (a *API) reportRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/identities/:id/would-deny", Access: api.Admin, Handler: a.wouldDeny},
		{Method: http.MethodGet, Path: "/posture-checks/:id/impact", Access: api.Admin, Handler: a.impact},
	}
}
