package management

import (
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

type servicePolicyInput struct {
	Name              *string      `json:"name,omitempty"`
	Type              string       `json:"type,omitempty"`
	Semantic          string       `json:"semantic,omitempty"`
	IdentityRoles     []string     `json:"identityRoles,omitempty"`
	ServiceRoles      []string     `json:"serviceRoles,omitempty"`
	PostureCheckRoles []string     `json:"postureCheckRoles,omitempty"`
	Tags              posture.Tags `json:"tags,omitempty"`
}

func (a *API) servicePolicies() *resource[posture.ServicePolicy, servicePolicyInput] {
	return &resource[posture.ServicePolicy, servicePolicyInput]{
		a: a, kind: posture.KindServicePolicy, noun: "service policy",
		input: func(p posture.ServicePolicy, _ time.Time) servicePolicyInput {
			return servicePolicyInput{Name: &p.Name, Type: p.Type, Semantic: p.Semantic, IdentityRoles: p.IdentityRoles,
				ServiceRoles: p.ServiceRoles, PostureCheckRoles: p.PostureCheckRoles, Tags: p.Tags}
		},
		build: a.buildServicePolicy,
		view:  pure(a.servicePolicyView),
	}
}

func (a *API) buildServicePolicy(in servicePolicyInput, old *posture.ServicePolicy, now time.Time) (posture.ServicePolicy, error) {
	var p posture.ServicePolicy
	var err error
	if old != nil {
		p.ID, p.CreatedAt = old.ID, old.CreatedAt
	} else {
		p.ID, p.CreatedAt = posture.NewID(), now
	}
	p.UpdatedAt = now
	if p.Name, err = name("name", in.Name); err != nil {
		return p, err
	}
	if err := a.unique(posture.KindServicePolicy, p.Name, p.ID); err != nil {
		return p, err
	}
	switch strings.ToLower(in.Type) {
	case "dial":
		p.Type = posture.Dial
	case "bind":
		p.Type = posture.Bind
	case "":
		return p, posture.Invalid("type", "is required: Dial or Bind", nil)
	default:
		return p, posture.Invalid("type", "must be Dial or Bind", in.Type)
	}
	if p.Semantic, err = semantic("semantic", in.Semantic); err != nil {
		return p, err
	}
	if p.IdentityRoles, err = a.roleIDs("identityRoles", posture.KindIdentity, in.IdentityRoles); err != nil {
		return p, err
	}
	if p.ServiceRoles, err = a.roleIDs("serviceRoles", posture.KindService, in.ServiceRoles); err != nil {
		return p, err
	}
	if p.PostureCheckRoles, err = a.roleIDs("postureCheckRoles", posture.KindCheck, in.PostureCheckRoles); err != nil {
		return p, err
	}
	p.Tags, err = tags(in.Tags)
	return p, err
}

// RoleDisplay shows a role with a readable name: "@<name>" for "@<id>".
type RoleDisplay struct {
	Role string `json:"role"`
	Name string `json:"name"`
}

func (a *API) display(kind posture.Kind, roles []string) []RoleDisplay {
	out := make([]RoleDisplay, len(roles))
	for i, r := range roles {
		out[i] = RoleDisplay{Role: r, Name: r}
		if strings.HasPrefix(r, "@") {
			if raw, err := a.Store.RawEntity(kind, r[1:]); err == nil {
				if n := nameOf(raw); n != "" {
					out[i].Name = "@" + n
				}
			}
		}
	}
	return out
}

func (a *API) policyLinks(kind posture.Kind, id string, subs ...string) api.Links {
	links := api.SelfLink(string(kind), id)
	for _, sub := range subs {
		links[sub] = api.Link{Href: "./" + string(kind) + "/" + id + "/" + sub}
	}
	return links
}

func (a *API) servicePolicyView(p posture.ServicePolicy) any {
	return map[string]any{
		"id": p.ID, "name": p.Name, "type": p.Type, "semantic": p.Semantic,
		"identityRoles": p.IdentityRoles, "serviceRoles": p.ServiceRoles, "postureCheckRoles": p.PostureCheckRoles,
		"identityRolesDisplay":     a.display(posture.KindIdentity, p.IdentityRoles),
		"serviceRolesDisplay":      a.display(posture.KindService, p.ServiceRoles),
		"postureCheckRolesDisplay": a.display(posture.KindCheck, p.PostureCheckRoles),
		"tags":                     p.Tags, "createdAt": api.Time(p.CreatedAt), "updatedAt": api.Time(p.UpdatedAt),
		"_links": a.policyLinks(posture.KindServicePolicy, p.ID, "identities", "services", "posture-checks"),
	}
}

type edgeRouterPolicyInput struct {
	Name            *string      `json:"name,omitempty"`
	Semantic        string       `json:"semantic,omitempty"`
	IdentityRoles   []string     `json:"identityRoles,omitempty"`
	ServiceRoles    []string     `json:"serviceRoles,omitempty"`
	EdgeRouterRoles []string     `json:"edgeRouterRoles,omitempty"`
	Tags            posture.Tags `json:"tags,omitempty"`
}

// routerPolicyFields is what both router policy kinds share.
type routerPolicyFields struct {
	id, name, semantic string
	a, b               []string // identityRoles or serviceRoles; edgeRouterRoles
	tags               posture.Tags
	createdAt          time.Time
}

func (a *API) buildRouterPolicy(kind posture.Kind, firstField string, in edgeRouterPolicyInput, first []string, oldID string, oldCreated time.Time, isNew bool, now time.Time) (routerPolicyFields, error) {
	var f routerPolicyFields
	var err error
	f.id, f.createdAt = times(oldID, oldCreated, isNew, now)
	if f.name, err = name("name", in.Name); err != nil {
		return f, err
	}
	if err := a.unique(kind, f.name, f.id); err != nil {
		return f, err
	}
	if f.semantic, err = semantic("semantic", in.Semantic); err != nil {
		return f, err
	}
	firstKind := posture.KindIdentity
	if firstField == serviceRoles {
		firstKind = posture.KindService
	}
	if f.a, err = a.roleIDs(firstField, firstKind, first); err != nil {
		return f, err
	}
	if f.b, err = a.roleIDs("edgeRouterRoles", posture.KindEdgeRouter, in.EdgeRouterRoles); err != nil {
		return f, err
	}
	f.tags, err = tags(in.Tags)
	return f, err
}

func (a *API) edgeRouterPolicies() *resource[posture.EdgeRouterPolicy, edgeRouterPolicyInput] {
	return &resource[posture.EdgeRouterPolicy, edgeRouterPolicyInput]{
		a: a, kind: posture.KindEdgeRouterPolicy, noun: "edge router policy",
		input: func(p posture.EdgeRouterPolicy, _ time.Time) edgeRouterPolicyInput {
			return edgeRouterPolicyInput{Name: &p.Name, Semantic: p.Semantic, IdentityRoles: p.IdentityRoles, EdgeRouterRoles: p.EdgeRouterRoles, Tags: p.Tags}
		},
		build: func(in edgeRouterPolicyInput, old *posture.EdgeRouterPolicy, now time.Time) (posture.EdgeRouterPolicy, error) {
			var o posture.EdgeRouterPolicy
			if old != nil {
				o = *old
			}
			f, err := a.buildRouterPolicy(posture.KindEdgeRouterPolicy, "identityRoles", in, in.IdentityRoles, o.ID, o.CreatedAt, old == nil, now)
			return posture.EdgeRouterPolicy{ID: f.id, Name: f.name, Semantic: f.semantic, IdentityRoles: f.a,
				EdgeRouterRoles: f.b, Tags: f.tags, CreatedAt: f.createdAt, UpdatedAt: now}, err
		},
		view: pure(func(p posture.EdgeRouterPolicy) any {
			return map[string]any{
				"id": p.ID, "name": p.Name, "semantic": p.Semantic, "isSystem": false,
				"identityRoles": p.IdentityRoles, "edgeRouterRoles": p.EdgeRouterRoles,
				"identityRolesDisplay":   a.display(posture.KindIdentity, p.IdentityRoles),
				"edgeRouterRolesDisplay": a.display(posture.KindEdgeRouter, p.EdgeRouterRoles),
				"tags":                   p.Tags, "createdAt": api.Time(p.CreatedAt), "updatedAt": api.Time(p.UpdatedAt),
				"_links": a.policyLinks(posture.KindEdgeRouterPolicy, p.ID, "identities", "edge-routers"),
			}
		}),
	}
}

func (a *API) serviceEdgeRouterPolicies() *resource[posture.ServiceEdgeRouterPolicy, edgeRouterPolicyInput] {
	return &resource[posture.ServiceEdgeRouterPolicy, edgeRouterPolicyInput]{
		a: a, kind: posture.KindServiceEdgeRouterPolicy, noun: "service edge router policy",
		input: func(p posture.ServiceEdgeRouterPolicy, _ time.Time) edgeRouterPolicyInput {
			return edgeRouterPolicyInput{Name: &p.Name, Semantic: p.Semantic, ServiceRoles: p.ServiceRoles, EdgeRouterRoles: p.EdgeRouterRoles, Tags: p.Tags}
		},
		build: func(in edgeRouterPolicyInput, old *posture.ServiceEdgeRouterPolicy, now time.Time) (posture.ServiceEdgeRouterPolicy, error) {
			var o posture.ServiceEdgeRouterPolicy
			if old != nil {
				o = *old
			}
			f, err := a.buildRouterPolicy(posture.KindServiceEdgeRouterPolicy, "serviceRoles", in, in.ServiceRoles, o.ID, o.CreatedAt, old == nil, now)
			return posture.ServiceEdgeRouterPolicy{ID: f.id, Name: f.name, Semantic: f.semantic, ServiceRoles: f.a,
				EdgeRouterRoles: f.b, Tags: f.tags, CreatedAt: f.createdAt, UpdatedAt: now}, err
		},
		view: pure(func(p posture.ServiceEdgeRouterPolicy) any {
			return map[string]any{
				"id": p.ID, "name": p.Name, "semantic": p.Semantic,
				"serviceRoles": p.ServiceRoles, "edgeRouterRoles": p.EdgeRouterRoles,
				"serviceRolesDisplay":    a.display(posture.KindService, p.ServiceRoles),
				"edgeRouterRolesDisplay": a.display(posture.KindEdgeRouter, p.EdgeRouterRoles),
				"tags":                   p.Tags, "createdAt": api.Time(p.CreatedAt), "updatedAt": api.Time(p.UpdatedAt),
				"_links": a.policyLinks(posture.KindServiceEdgeRouterPolicy, p.ID, "services", "edge-routers"),
			}
		}),
	}
}

type edgeRouterInput struct {
	Name              *string      `json:"name,omitempty"`
	RoleAttributes    *[]string    `json:"roleAttributes,omitempty"`
	Attributes        *[]string    `json:"attributes,omitempty"`
	IsTunnelerEnabled *bool        `json:"isTunnelerEnabled,omitempty"`
	Cost              *int64       `json:"cost,omitempty"`
	NoTraversal       *bool        `json:"noTraversal,omitempty"`
	Disabled          *bool        `json:"disabled,omitempty"`
	Hostname          string       `json:"hostname,omitempty"`
	AppData           posture.Tags `json:"appData,omitempty"`
	Tags              posture.Tags `json:"tags,omitempty"`
}

func (a *API) edgeRouters() *resource[posture.EdgeRouter, edgeRouterInput] {
	return &resource[posture.EdgeRouter, edgeRouterInput]{
		a: a, kind: posture.KindEdgeRouter, noun: "edge router",
		input: func(r posture.EdgeRouter, _ time.Time) edgeRouterInput {
			return edgeRouterInput{Name: &r.Name, RoleAttributes: &r.RoleAttributes, IsTunnelerEnabled: &r.IsTunnelerEnabled,
				Cost: &r.Cost, NoTraversal: &r.NoTraversal, Disabled: &r.Disabled, Hostname: r.Hostname, AppData: r.AppData, Tags: r.Tags}
		},
		build: func(in edgeRouterInput, old *posture.EdgeRouter, now time.Time) (posture.EdgeRouter, error) {
			var r posture.EdgeRouter
			var err error
			if old != nil {
				r.ID, r.CreatedAt, r.RouterEnrollment = old.ID, old.CreatedAt, old.RouterEnrollment
			} else {
				r.ID, r.CreatedAt = posture.NewID(), now
				if r.RouterEnrollment, err = a.routerEnrollment(r.ID, now); err != nil {
					return r, err
				}
			}
			r.UpdatedAt = now
			if r.Name, err = name("name", in.Name); err != nil {
				return r, err
			}
			if err := a.unique(posture.KindEdgeRouter, r.Name, r.ID); err != nil {
				return r, err
			}
			if r.RoleAttributes, err = attributes("roleAttributes", roleAttributes(old), in.RoleAttributes, in.Attributes); err != nil {
				return r, err
			}
			if r.Cost = deref(in.Cost, 0); r.Cost < 0 || r.Cost > 65535 {
				return r, posture.Invalid("cost", "must be between 0 and 65535", r.Cost)
			}
			r.IsTunnelerEnabled, r.NoTraversal, r.Disabled = deref(in.IsTunnelerEnabled, false), deref(in.NoTraversal, false), deref(in.Disabled, false)
			r.Hostname = strings.TrimSpace(in.Hostname)
			if r.AppData = in.AppData; r.AppData == nil {
				r.AppData = posture.Tags{}
			}
			r.Tags, err = tags(in.Tags)
			return r, err
		},
		view:    pure(a.edgeRouterView),
		aliases: [][]string{{"roleAttributes", "attributes"}},
		shred:   true,
	}
}

func (a *API) edgeRouterView(r posture.EdgeRouter) any {
	return map[string]any{
		"id": r.ID, "name": r.Name, "roleAttributes": r.RoleAttributes, "isTunnelerEnabled": r.IsTunnelerEnabled,
		"cost": r.Cost, "noTraversal": r.NoTraversal, "disabled": r.Disabled, "hostname": r.Hostname,
		"appData": r.AppData, "isOnline": false, "isVerified": r.IsVerified, "syncStatus": "",
		"fingerprint":         r.Fingerprint,
		"enrollmentToken":     a.reveal(r.ID, posture.FieldRouterEnrollToken, r.EnrollmentTokenSealed, r.EnrollmentToken),
		"enrollmentJwt":       a.reveal(r.ID, posture.FieldRouterEnrollJWT, r.EnrollmentJWTSealed, r.EnrollmentJWT),
		"enrollmentCreatedAt": api.Time(r.EnrollmentCreatedAt), "enrollmentExpiresAt": api.Time(r.EnrollmentExpiresAt),
		"supportedProtocols": map[string]string{}, "tags": r.Tags,
		"createdAt": api.Time(r.CreatedAt), "updatedAt": api.Time(r.UpdatedAt),
		"_links": api.SelfLink(string(posture.KindEdgeRouter), r.ID),
	}
}
