package management

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

type identityInput struct {
	Name           *string      `json:"name,omitempty"`
	Type           string       `json:"type,omitempty"`
	IsAdmin        *bool        `json:"isAdmin,omitempty"`
	RoleAttributes *[]string    `json:"roleAttributes,omitempty"`
	Attributes     *[]string    `json:"attributes,omitempty"`
	ExternalID     *string      `json:"externalId,omitempty"`
	Disabled       *bool        `json:"disabled,omitempty"`
	Tags           posture.Tags `json:"tags,omitempty"`
	AppData        posture.Tags `json:"appData,omitempty"`
	// The hosting fields, kept as given (posture.Identity).
	DefaultHostingCost        *int               `json:"defaultHostingCost,omitempty"`
	DefaultHostingPrecedence  string             `json:"defaultHostingPrecedence,omitempty"`
	ServiceHostingCosts       map[string]*int    `json:"serviceHostingCosts,omitempty"`
	ServiceHostingPrecedences map[string]*string `json:"serviceHostingPrecedences,omitempty"`
	// Enrollment asks for a one-time enrollment on create (enrollments.go).
	Enrollment *enrollmentRequest `json:"enrollment,omitempty"`
	// disableFor is set by POST /identities/:id/disable: disabled from
	// now, for this long (0: until enabled).
	disableFor *time.Duration
}

func (a *API) identities() *resource[posture.Identity, identityInput] {
	return &resource[posture.Identity, identityInput]{
		a: a, kind: posture.KindIdentity, noun: "identity",
		input: func(i posture.Identity, now time.Time) identityInput {
			// As shown: a timed disable that ended is no longer disabled.
			disabled := i.IsDisabled(now)
			return identityInput{Name: &i.Name, Type: i.Type, IsAdmin: &i.IsAdmin, RoleAttributes: &i.RoleAttributes,
				ExternalID: &i.ExternalID, Disabled: &disabled, Tags: i.Tags, AppData: i.AppData,
				DefaultHostingCost: &i.DefaultHostingCost, DefaultHostingPrecedence: i.DefaultHostingPrecedence,
				ServiceHostingCosts: pointers(i.ServiceHostingCosts), ServiceHostingPrecedences: pointers(i.ServiceHostingPrecedences)}
		},
		build:   a.buildIdentity,
		view:    a.identityView,
		shred:   true,
		aliases: [][]string{{"roleAttributes", "attributes"}},
		canDelete: func(i posture.Identity) error {
			if i.IsDefaultAdmin {
				return posture.Invalid("id", "the default admin cannot be deleted", i.ID)
			}
			return nil
		},
	}
}

// disableRequest is POST /identities/:id/disable's body.
type disableRequest struct {
	DurationMinutes *int64 `json:"durationMinutes"`
}

// maxDisableMinutes bounds a timed disable (about 100 years).
const maxDisableMinutes = 100 * 366 * 24 * 60

// disableIdentity is POST /identities/:id/disable {durationMinutes}: the
// identity is refused from now on, for that many minutes or, with 0 or no
// duration, until enabled. Its API sessions stop working at once.
func (a *API) disableIdentity(c echo.Context) error {
	var in disableRequest
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	minutes := deref(in.DurationMinutes, 0)
	if minutes < 0 || minutes > maxDisableMinutes {
		return posture.Invalid("durationMinutes", fmt.Sprintf("must be 0 (until enabled) to %d minutes", maxDisableMinutes), minutes)
	}
	d := time.Duration(minutes) * time.Minute
	r := a.identities()
	return r.change(c, func(old posture.Identity, now time.Time) (identityInput, error) {
		if old.IsDefaultAdmin {
			return identityInput{}, posture.Invalid("id", "the default admin cannot be disabled", old.ID)
		}
		in := r.input(old, now)
		in.Disabled, in.disableFor = new(true), &d
		return in, nil
	})
}

// enableIdentity is POST /identities/:id/enable: a disabled identity may
// authenticate again.
func (a *API) enableIdentity(c echo.Context) error {
	r := a.identities()
	return r.change(c, func(old posture.Identity, now time.Time) (identityInput, error) {
		in := r.input(old, now)
		in.Disabled = new(false)
		return in, nil
	})
}

func identityType(s string) (string, bool) {
	if s == "" {
		return posture.IdentityDefault, true
	}
	for _, t := range posture.IdentityTypes {
		if strings.EqualFold(t, s) {
			return t, true
		}
	}
	return "", false
}

func (a *API) buildIdentity(in identityInput, old *posture.Identity, now time.Time) (posture.Identity, error) {
	var i posture.Identity
	var err error
	if old != nil {
		i.ID, i.CreatedAt, i.IsDefaultAdmin = old.ID, old.CreatedAt, old.IsDefaultAdmin
	} else {
		i.ID, i.CreatedAt = posture.NewID(), now
	}
	i.UpdatedAt = now
	if i.Name, err = name("name", in.Name); err != nil {
		return i, err
	}
	if err := a.unique(posture.KindIdentity, i.Name, i.ID); err != nil {
		return i, err
	}
	var ok bool
	if i.Type, ok = identityType(in.Type); !ok {
		return i, posture.Invalid("type", "must be one of "+strings.Join(posture.IdentityTypes, ", "), in.Type)
	}
	i.IsAdmin = deref(in.IsAdmin, false)
	i.Disabled = deref(in.Disabled, false)
	if i.IsDefaultAdmin && (!i.IsAdmin || i.Disabled) {
		return i, posture.Invalid("isAdmin", "the default admin stays an enabled admin", in.IsAdmin)
	}
	switch at := now; {
	case !i.Disabled:
	case in.disableFor != nil: // disabled anew
		i.DisabledAt = &at
		if *in.disableFor > 0 {
			until := now.Add(*in.disableFor)
			i.DisabledUntil = &until
		}
	case old != nil && old.IsDisabled(now): // still disabled, as it was (a timed disable keeps its end)
		i.DisabledAt, i.DisabledUntil = old.DisabledAt, old.DisabledUntil
	default: // disabled by an update: until enabled
		i.DisabledAt = &at
	}
	if i.RoleAttributes, err = attributes("roleAttributes", roleAttributes(old), in.RoleAttributes, in.Attributes); err != nil {
		return i, err
	}
	if i.Tags, err = tags(in.Tags); err != nil {
		return i, err
	}
	if err := a.hosting(&i, in, old); err != nil {
		return i, err
	}
	i.ExternalID = strings.TrimSpace(deref(in.ExternalID, ""))
	if i.ExternalID != "" {
		other, err := a.Store.IdentityByExternalID(i.ExternalID)
		if err == nil && other.ID != i.ID {
			return i, posture.Invalid("externalId", "externalId is already in use", i.ExternalID)
		}
		if err != nil && !errors.Is(err, posture.ErrNotFound) {
			return i, err
		}
	}
	return i, nil
}

// maxHostingServices bounds an identity's per-service hosting costs and
// precedences: the identity is read at every request of its own.
const maxHostingServices = 100

// pointers is m with each value behind a pointer, as an input holds it.
func pointers[V any](m map[string]V) map[string]*V {
	if m == nil {
		return nil
	}
	out := make(map[string]*V, len(m))
	for k, v := range m {
		out[k] = &v
	}
	return out
}

// hosting validates an identity's app data and hosting fields: a cost of
// 0 to 65535, a precedence of default, required or failed, per service
// for services that exist. A service entry set to null goes; one of a
// service deleted since goes too, so that it does not hold the identity's
// other changes (a disable) back.
func (a *API) hosting(i *posture.Identity, in identityInput, old *posture.Identity) error {
	var err error
	if in.AppData != nil {
		if i.AppData, err = api.CheckTagsAt("appData", in.AppData); err != nil {
			return err
		}
	}
	cost := func(field string, c int) error {
		if c < 0 || c > posture.MaxHostingCost {
			return posture.Invalid(field, fmt.Sprintf("must be 0 to %d", posture.MaxHostingCost), c)
		}
		return nil
	}
	precedence := func(field, p string) (string, error) {
		p = strings.ToLower(strings.TrimSpace(p))
		if !slices.Contains(posture.HostingPrecedences, p) {
			return "", posture.Invalid(field, "must be one of "+strings.Join(posture.HostingPrecedences, ", "), p)
		}
		return p, nil
	}
	// keep says whether a service's entry stays: the service exists, or
	// it had one before (its service deleted since: it goes quietly).
	keep := func(field, id string, had bool) (bool, error) {
		gone, err := a.gone(posture.KindService, id)
		switch {
		case err != nil:
			return false, err
		case gone && !had:
			return false, posture.Invalid(field, "no service with this id", id)
		}
		return !gone, nil
	}
	var wasCosts map[string]int
	var wasPrecedences map[string]string
	if old != nil {
		wasCosts, wasPrecedences = old.ServiceHostingCosts, old.ServiceHostingPrecedences
	}
	i.DefaultHostingCost = deref(in.DefaultHostingCost, 0)
	if err := cost("defaultHostingCost", i.DefaultHostingCost); err != nil {
		return err
	}
	if in.DefaultHostingPrecedence != "" {
		if i.DefaultHostingPrecedence, err = precedence("defaultHostingPrecedence", in.DefaultHostingPrecedence); err != nil {
			return err
		}
	}
	if len(in.ServiceHostingCosts) > maxHostingServices || len(in.ServiceHostingPrecedences) > maxHostingServices {
		return posture.Invalid("serviceHostingCosts", fmt.Sprintf("at most %d services", maxHostingServices), nil)
	}
	for id, c := range in.ServiceHostingCosts {
		field := "serviceHostingCosts." + id
		if c == nil {
			continue
		}
		_, had := wasCosts[id]
		ok, err := keep(field, id, had)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := cost(field, *c); err != nil {
			return err
		}
		if i.ServiceHostingCosts == nil {
			i.ServiceHostingCosts = map[string]int{}
		}
		i.ServiceHostingCosts[id] = *c
	}
	for id, p := range in.ServiceHostingPrecedences {
		field := "serviceHostingPrecedences." + id
		if p == nil {
			continue
		}
		_, had := wasPrecedences[id]
		ok, err := keep(field, id, had)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		v, err := precedence(field, *p)
		if err != nil {
			return err
		}
		if i.ServiceHostingPrecedences == nil {
			i.ServiceHostingPrecedences = map[string]string{}
		}
		i.ServiceHostingPrecedences[id] = v
	}
	return nil
}

// identityView reads what the API shows beside the identity; a read that
// fails fails the request (only a missing record reads as absent).
func (a *API) identityView(i posture.Identity) (any, error) {
	mfa, err := a.Login.MFAEnabled(i.ID)
	if err != nil {
		return nil, fmt.Errorf("identity %s: MFA: %w", i.ID, err)
	}
	f := api.IdentityFacts{MFAEnabled: mfa, Now: a.Writer.Now()}
	if f.Enrollment, err = a.enrollmentSummary(i.ID); err != nil {
		return nil, fmt.Errorf("identity %s: enrollments: %w", i.ID, err)
	}
	if f.Authenticators, err = a.Store.IdentityAuthenticators(i.ID); err != nil {
		return nil, fmt.Errorf("identity %s: authenticators: %w", i.ID, err)
	}
	if f.Client, err = a.Store.ClientInfo(i.ID); err != nil {
		return nil, fmt.Errorf("identity %s: client info: %w", i.ID, err)
	}
	if f.HasAPISession, err = a.Store.HasAPISession(i.ID); err != nil {
		return nil, fmt.Errorf("identity %s: API sessions: %w", i.ID, err)
	}
	links := api.SelfLink(string(posture.KindIdentity), i.ID)
	for _, sub := range []string{"service-policies", "services", "edge-routers", "posture-data", "failed-service-requests", "authenticators"} {
		links[sub] = api.Link{Href: "./identities/" + i.ID + "/" + sub}
	}
	return api.IdentityView(i, f, links), nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deleteIdentityMFA is DELETE /identities/:id/mfa: an administrator removes
// an identity's MFA enrollment (an mfa.removed event; the identity's API
// sessions lose their MFA posture). Removing none is a success too. The
// default admin's is removed by itself only, with a code.
func (a *API) deleteIdentityMFA(c echo.Context) error {
	id := c.Param("id")
	if err := a.exists(posture.KindIdentity, "identity", id); err != nil {
		return err
	}
	if a.isDefaultAdmin(id) {
		return &posture.Error{Code: posture.CodeUnauthorized, Message: "the default admin's MFA is removed by the default admin only, with a code (DELETE /current-identity/mfa)"}
	}
	if _, err := a.Store.RawEntity(posture.KindMFA, id); errors.Is(err, posture.ErrNotFound) {
		return api.Empty(c)
	} else if err != nil {
		return err
	}
	if _, err := a.Writer.Append(c, posture.MFARemoved{IdentityID: id, By: posture.MFARemovedByAdmin}); err != nil {
		return err
	}
	return api.Empty(c)
}

func (a *API) identityRoutes() []api.Route {
	return []api.Route{
		{Method: http.MethodDelete, Path: "/identities/:id/mfa", Access: api.Admin, Handler: a.deleteIdentityMFA},
		{Method: http.MethodPost, Path: "/identities/:id/disable", Access: api.Admin, Handler: a.disableIdentity},
		{Method: http.MethodPost, Path: "/identities/:id/enable", Access: api.Admin, Handler: a.enableIdentity},
		{Method: http.MethodGet, Path: "/identities/:id/authenticators", Access: api.Admin, Handler: a.identityAuthenticators},
		{Method: http.MethodGet, Path: "/identity-types", Access: api.Admin, Handler: listIdentityTypes},
		{Method: http.MethodGet, Path: "/identity-types/:id", Access: api.Admin, Handler: detailIdentityType},
	}
}

// identityTypeView is a built-in identity type: its id is its name.
type identityTypeView struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	CreatedAt api.Time     `json:"createdAt"`
	UpdatedAt api.Time     `json:"updatedAt"`
	Tags      posture.Tags `json:"tags"`
	Links     api.Links    `json:"_links"`
}

func identityTypeViews() []identityTypeView {
	out := make([]identityTypeView, len(posture.IdentityTypes))
	for i, t := range posture.IdentityTypes {
		out[i] = identityTypeView{ID: t, Name: t, CreatedAt: api.Time(api.BuiltinTime), UpdatedAt: api.Time(api.BuiltinTime),
			Tags: posture.Tags{}, Links: api.SelfLink("identity-types", t)}
	}
	return out
}

func listIdentityTypes(c echo.Context) error { return api.List(c, identityTypeViews()) }

func detailIdentityType(c echo.Context) error {
	if t, ok := identityType(c.Param("id")); ok && c.Param("id") != "" {
		for _, v := range identityTypeViews() {
			if v.ID == t {
				return api.OK(c, v)
			}
		}
	}
	return posture.NotFound("identity type", c.Param("id"))
}
