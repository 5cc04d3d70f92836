package management

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// FleetStore is what the fleet view reads: counters and time indexes kept
// by the projection (projections.Store implements it), so that a read
// never scans the identities.
type FleetStore interface {
	FleetCounts() ([]posture.FleetCount, error)
	InGrace(now time.Time, limit int) ([]posture.TimedIdentity, int, error)
	LosingAccess(now, until time.Time, limit int) ([]posture.TimedIdentity, int, error)
	OldestEvidence(limit int) ([]posture.TimedIdentity, error)
}

type fleetCountView struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	TypeID string `json:"typeId,omitempty"`
	Pass   int64  `json:"pass"`
	Fail   int64  `json:"fail"`
	Stale  int64  `json:"stale"`
	// ReportOnlyFailing: identities that fail a check while it only
	// reports (for a policy: that pass it only because of that).
	ReportOnlyFailing int64 `json:"reportOnlyFailing"`
}

type timedView struct {
	IdentityID   string   `json:"identityId"`
	APISessionID string   `json:"apiSessionId,omitempty"`
	At           api.Time `json:"at"`
	InSeconds    int64    `json:"inSeconds"`
}

type timedListView struct {
	Count         int         `json:"count"`
	WithinMinutes int         `json:"withinMinutes,omitempty"`
	Sessions      []timedView `json:"sessions"`
}

type evidenceView struct {
	IdentityID    string   `json:"identityId"`
	LastUpdatedAt api.Time `json:"lastUpdatedAt"`
	AgeSeconds    int64    `json:"ageSeconds"`
}

type summaryView struct {
	At             api.Time         `json:"at"`
	Policies       []fleetCountView `json:"policies"`
	Checks         []fleetCountView `json:"checks"`
	InGrace        timedListView    `json:"inGrace"`
	LosingAccess   timedListView    `json:"losingAccess"`
	OldestEvidence []evidenceView   `json:"oldestEvidence"`
}

// postureSummary is GET /posture-summary: per policy and per check, how
// many identities (with an API session) pass, fail or fail only for stale
// evidence; the API sessions inside a wake/unlock grace window now and when
// it ends; the ones with a deadline within withinMinutes (default 15) that
// will lose a passing verdict unless something changes; the identities
// with the oldest evidence. Lists hold at most limit entries (default 100,
// at most 500); counts count all.
func (a *API) postureSummary(c echo.Context) error {
	within, err := intParam(c, "withinMinutes", 15, 0, 7*24*60)
	if err != nil {
		return err
	}
	limit, err := intParam(c, "limit", 100, 1, 500)
	if err != nil {
		return err
	}
	now := a.Writer.Now().UTC()
	counts, err := a.Fleet.FleetCounts()
	if err != nil {
		return err
	}
	v := summaryView{At: api.Time(now), Policies: []fleetCountView{}, Checks: []fleetCountView{}, OldestEvidence: []evidenceView{}}
	for _, fc := range counts {
		view := fleetCountView{ID: fc.ID, Pass: fc.Pass, Fail: fc.Fail, Stale: fc.Stale, ReportOnlyFailing: fc.ReportOnlyFailing}
		kind := posture.KindServicePolicy
		if fc.Kind == "c" {
			kind = posture.KindCheck
		}
		var named struct {
			Name   string `json:"name"`
			TypeID string `json:"typeId"`
		}
		if raw, err := a.Store.RawEntity(kind, fc.ID); err == nil && raw != nil {
			_ = json.Unmarshal(raw, &named)
		}
		view.Name = named.Name
		if fc.Kind == "c" {
			view.TypeID = named.TypeID
			v.Checks = append(v.Checks, view)
		} else {
			v.Policies = append(v.Policies, view)
		}
	}
	byName := func(s []fleetCountView) {
		sort.Slice(s, func(i, j int) bool { return s[i].Name < s[j].Name || (s[i].Name == s[j].Name && s[i].ID < s[j].ID) })
	}
	byName(v.Policies)
	byName(v.Checks)

	timed := func(list []posture.TimedIdentity) []timedView {
		out := make([]timedView, 0, len(list))
		for _, t := range list {
			out = append(out, timedView{IdentityID: t.IdentityID, APISessionID: t.APISessionID, At: api.Time(t.At), InSeconds: int64(max(t.At.Sub(now), 0) / time.Second)})
		}
		return out
	}
	grace, n, err := a.Fleet.InGrace(now, limit)
	if err != nil {
		return err
	}
	v.InGrace = timedListView{Count: n, Sessions: timed(grace)}
	losing, n, err := a.Fleet.LosingAccess(now, now.Add(time.Duration(within)*time.Minute), limit)
	if err != nil {
		return err
	}
	v.LosingAccess = timedListView{Count: n, WithinMinutes: within, Sessions: timed(losing)}
	oldest, err := a.Fleet.OldestEvidence(min(limit, 10))
	if err != nil {
		return err
	}
	for _, t := range oldest {
		v.OldestEvidence = append(v.OldestEvidence, evidenceView{IdentityID: t.IdentityID, LastUpdatedAt: api.Time(t.At), AgeSeconds: int64(max(now.Sub(t.At), 0) / time.Second)})
	}
	return api.OK(c, v)
}

// intParam reads an integer query parameter within [lo, hi].
func intParam(c echo.Context, name string, def, lo, hi int) (int, error) {
	s := c.QueryParam(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, posture.Invalid(name, "must be a whole number from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi), s)
	}
	return n, nil
}

func (a *API) summaryRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodGet, Path: "/posture-summary", Access: api.Admin, Handler: a.postureSummary},
		{Method: http.MethodGet, Path: "/summary", Access: api.Admin, Handler: a.entityCounts},
	}
}

// countedKinds are the stored kinds GET /summary counts, under the
// controller's names for them. Services and edge routers are counted twice,
// as the controller counts its fabric entities and their edge parts.
var countedKinds = []struct {
	names []string
	kind  posture.Kind
}{
	{[]string{"apiSessions"}, posture.KindAPISession},
	{[]string{"authenticators"}, posture.KindAuthenticator},
	{[]string{"cas"}, posture.KindCA},
	{[]string{"configTypes"}, posture.KindConfigType},
	{[]string{"configs"}, posture.KindConfig},
	{[]string{"edgeRouterPolicies"}, posture.KindEdgeRouterPolicy},
	{[]string{"enrollments"}, posture.KindEnrollment},
	{[]string{"externalJwtSigners"}, posture.KindExternalJWTSigner},
	{[]string{"identities"}, posture.KindIdentity},
	{[]string{"mfas"}, posture.KindMFA},
	{[]string{"postureChecks"}, posture.KindCheck},
	{[]string{"routers", "routers.edge"}, posture.KindEdgeRouter},
	{[]string{"serviceEdgeRouterPolicies"}, posture.KindServiceEdgeRouterPolicy},
	{[]string{"servicePolicies"}, posture.KindServicePolicy},
	{[]string{"services", "services.edge"}, posture.KindService},
	{[]string{"sessions"}, posture.KindSession},
	{[]string{"webhooks"}, posture.KindWebhook},
}

// entityCounts is GET /summary: how many entities of each kind there are,
// as the controller's informational summary counts them.
func (a *API) entityCounts(c echo.Context) error {
	counts := map[string]int{
		"authPolicies":      1,
		"identityTypes":     len(posture.IdentityTypes),
		"postureCheckTypes": len(checkTypeNames),
	}
	for _, k := range countedKinds {
		n, err := a.Store.Count(k.kind)
		if err != nil {
			return err
		}
		for _, name := range k.names {
			counts[name] = n
		}
	}
	return api.OK(c, counts)
}
