package projections

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/seed-0809debe/posture"
)

// roleField is one role list of a policy kind and the kind it selects.
type roleField struct {
	policy posture.Kind
	field  string
	target posture.Kind
}

// Role fields of the policy kinds.
const (
	FieldIdentityRoles     = "identityRoles"
	FieldServiceRoles      = "serviceRoles"
	FieldPostureCheckRoles = "postureCheckRoles"
	FieldEdgeRouterRoles   = "edgeRouterRoles"
)

var roleFields = []roleField{
	{posture.KindServicePolicy, FieldIdentityRoles, posture.KindIdentity},
	{posture.KindServicePolicy, FieldServiceRoles, posture.KindService},
	{posture.KindServicePolicy, FieldPostureCheckRoles, posture.KindCheck},
	{posture.KindEdgeRouterPolicy, FieldIdentityRoles, posture.KindIdentity},
	{posture.KindEdgeRouterPolicy, FieldEdgeRouterRoles, posture.KindEdgeRouter},
	{posture.KindServiceEdgeRouterPolicy, FieldServiceRoles, posture.KindService},
	{posture.KindServiceEdgeRouterPolicy, FieldEdgeRouterRoles, posture.KindEdgeRouter},
}

func targetOf(policy posture.Kind, field string) (posture.Kind, bool) {
	for _, f := range roleFields {
		if f.policy == policy && f.field == field {
			return f.target, true
		}
	}
	return "", false
}

// policyNode is a policy as the graph keeps it.
type policyNode struct {
	kind     posture.Kind
	id       string
	typ      string // Dial or Bind for service policies
	semantic string
	roles    map[string][]string // field -> roles
}

type roleKey struct {
	policy posture.Kind
	field  string
	role   string
}

type policyRef struct {
	policyKind posture.Kind
	policyID   string
}

// graph is the in-memory index of who selects what: the role attributes of
// identities, services, checks and edge routers, and the role lists of
// policies, indexed by role. It answers "which policies select this
// entity" and "which entities does this policy select" without scanning
// every entity. It is rebuilt from the store on open and kept current by
// apply.
type graph struct {
	mu       sync.RWMutex
	entities map[posture.Kind]*entitySet
	policies map[posture.Kind]map[string]*policyNode
	roleIdx  map[roleKey]map[string]struct{}
	sessions map[string]map[string]struct{} // identity id -> its API session ids
}

func newGraph() *graph {
	return &graph{
		entities: map[posture.Kind]*entitySet{},
		policies: map[posture.Kind]map[string]*policyNode{},
		roleIdx:  map[roleKey]map[string]struct{}{},
		sessions: map[string]map[string]struct{}{},
	}
}

// addSession and dropSession track which API sessions an identity has.
func (g *graph) addSession(identityID, apiSessionID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	addTo(g.sessions, identityID, apiSessionID)
}

func (g *graph) dropSession(identityID, apiSessionID string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	removeFrom(g.sessions, identityID, apiSessionID)
}

// withSessions lists, sorted, the identities that have API sessions.
func (g *graph) withSessions() []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return slices.Sorted(maps.Keys(g.sessions))
}

// sessionsOf lists, sorted, an identity's API sessions.
func (g *graph) sessionsOf(identityID string) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	out := make([]string, 0, len(g.sessions[identityID]))
	for id := range g.sessions[identityID] {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func addTo[K comparable](m map[K]map[string]struct{}, k K, id string) {
	set := m[k]
	if set == nil {
		set = map[string]struct{}{}
		m[k] = set
	}
	set[id] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[string]struct{}, k K, id string) {
	if set := m[k]; set != nil {
		delete(set, id)
		if len(set) == 0 {
			delete(m, k)
		}
	}
}

// put records an entity's attributes or a policy's roles.
func (g *graph) put(e posture.Entity) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch v := e.(type) {
	case posture.Identity:
		g.setAttrs(posture.KindIdentity, v.ID, v.RoleAttributes)
	case posture.Service:
		g.setAttrs(posture.KindService, v.ID, v.RoleAttributes)
	case posture.Check:
		g.setAttrs(posture.KindCheck, v.ID, v.RoleAttributes)
	case posture.EdgeRouter:
		g.setAttrs(posture.KindEdgeRouter, v.ID, v.RoleAttributes)
	case posture.ServicePolicy:
		g.setPolicy(&policyNode{kind: posture.KindServicePolicy, id: v.ID, typ: v.Type, semantic: v.Semantic, roles: map[string][]string{
			FieldIdentityRoles: v.IdentityRoles, FieldServiceRoles: v.ServiceRoles, FieldPostureCheckRoles: v.PostureCheckRoles,
		}})
	case posture.EdgeRouterPolicy:
		g.setPolicy(&policyNode{kind: posture.KindEdgeRouterPolicy, id: v.ID, semantic: v.Semantic, roles: map[string][]string{
			FieldIdentityRoles: v.IdentityRoles, FieldEdgeRouterRoles: v.EdgeRouterRoles,
		}})
	case posture.ServiceEdgeRouterPolicy:
		g.setPolicy(&policyNode{kind: posture.KindServiceEdgeRouterPolicy, id: v.ID, semantic: v.Semantic, roles: map[string][]string{
			FieldServiceRoles: v.ServiceRoles, FieldEdgeRouterRoles: v.EdgeRouterRoles,
		}})
	}
}

// remove forgets an entity or a policy.
func (g *graph) remove(kind posture.Kind, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dropAttrs(kind, id)
	g.dropPolicy(kind, id)
}

func (g *graph) setAttrs(kind posture.Kind, id string, attrs []string) {
	s := g.entities[kind]
	if s == nil {
		s = newEntitySet()
		g.entities[kind] = s
	}
	s.set(id, attrs)
}

func (g *graph) dropAttrs(kind posture.Kind, id string) {
	if s := g.entities[kind]; s != nil {
		s.drop(id)
	}
}

// entitiesOf is the entities of a kind, to read (noEntities when there are
// none).
func (g *graph) entitiesOf(kind posture.Kind) *entitySet {
	if s := g.entities[kind]; s != nil {
		return s
	}
	return noEntities
}

// noEntities is the empty set of entities, never written.
var noEntities = newEntitySet()

func (g *graph) setPolicy(p *policyNode) {
	g.dropPolicy(p.kind, p.id)
	m := g.policies[p.kind]
	if m == nil {
		m = map[string]*policyNode{}
		g.policies[p.kind] = m
	}
	m[p.id] = p
	for field, roles := range p.roles {
		for _, r := range roles {
			addTo(g.roleIdx, roleKey{p.kind, field, r}, p.id)
		}
	}
}

func (g *graph) dropPolicy(kind posture.Kind, id string) {
	old, ok := g.policies[kind][id]
	if !ok {
		return
	}
	for field, roles := range old.roles {
		for _, r := range roles {
			removeFrom(g.roleIdx, roleKey{kind, field, r}, id)
		}
	}
	delete(g.policies[kind], id)
}

// referencing lists the policies whose role lists name "@id" of an entity
// of the kind.
func (g *graph) referencing(kind posture.Kind, id string) []policyRef {
	g.mu.RLock()
	defer g.mu.RUnlock()
	seen := map[policyRef]bool{}
	var out []policyRef
	for _, f := range roleFields {
		if f.target != kind {
			continue
		}
		for pid := range g.roleIdx[roleKey{f.policy, f.field, "@" + id}] {
			ref := policyRef{f.policy, pid}
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].policyKind != out[j].policyKind {
			return out[i].policyKind < out[j].policyKind
		}
		return out[i].policyID < out[j].policyID
	})
	return out
}

// selecting lists, sorted, the policies of a kind whose role field selects
// the entity.
func (g *graph) selecting(policy posture.Kind, field string, id string) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.selectingLocked(policy, field, id)
}

func (g *graph) selectingLocked(policy posture.Kind, field string, id string) []string {
	target, ok := targetOf(policy, field)
	if !ok {
		return nil
	}
	attrs, exists := g.entitiesOf(target).attrs(id)
	if !exists {
		return nil
	}
	cand := map[string]struct{}{}
	for pid := range g.roleIdx[roleKey{policy, field, posture.RoleAll}] {
		cand[pid] = struct{}{}
	}
	for pid := range g.roleIdx[roleKey{policy, field, "@" + id}] {
		cand[pid] = struct{}{}
	}
	for _, a := range attrs {
		for pid := range g.roleIdx[roleKey{policy, field, "#" + a}] {
			cand[pid] = struct{}{}
		}
	}
	out := make([]string, 0, len(cand))
	for pid := range cand {
		p := g.policies[policy][pid]
		if p != nil && posture.MatchRoles(p.roles[field], p.semantic, id, attrs) {
			out = append(out, pid)
		}
	}
	sort.Strings(out)
	return out
}

// selected lists, sorted, the entities a policy's role field selects.
func (g *graph) selected(policy posture.Kind, policyID, field string) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p := g.policies[policy][policyID]
	target, ok := targetOf(policy, field)
	if p == nil || !ok {
		return nil
	}
	return g.selectedBy(p.roles[field], p.semantic, target)
}

// selectedBy lists, sorted, the entities of a kind a role list selects.
// The caller holds the read lock.
func (g *graph) selectedBy(roles []string, semantic string, target posture.Kind) []string {
	set := map[string]struct{}{}
	g.eachSelected(roles, semantic, target, func(id string) { set[id] = struct{}{} })
	ids := make([]string, 0, len(set))
	for id := range set {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// eachSelected calls fn for every entity of a kind a role list selects, in
// no particular order and possibly more than once for an entity named both
// by id and by attributes. The caller holds the read lock.
func (g *graph) eachSelected(roles []string, semantic string, target posture.Kind, fn func(id string)) {
	all := g.entitiesOf(target)
	var wanted []map[int32]struct{}
	for _, r := range roles {
		switch {
		case r == posture.RoleAll:
			all.each(fn)
			return
		case strings.HasPrefix(r, "@"):
			if all.has(r[1:]) {
				fn(r[1:])
			}
		case strings.HasPrefix(r, "#"):
			wanted = append(wanted, all.withAttr(r[1:]))
		}
	}
	if len(wanted) == 0 {
		return
	}
	if semantic == posture.AnyOf {
		for _, set := range wanted {
			for slot := range set {
				fn(all.ids[slot])
			}
		}
		return
	}
	// AllOf: walk the smallest attribute set, keep those in all.
	smallest := slices.MinFunc(wanted, func(a, b map[int32]struct{}) int { return len(a) - len(b) })
next:
	for slot := range smallest {
		for _, set := range wanted {
			if _, ok := set[slot]; !ok {
				continue next
			}
		}
		fn(all.ids[slot])
	}
}

// link is one policy granting one entity.
type link struct{ target, policy string }

// grants lists, sorted by target then policy and without repeats, the
// entities that the policies selecting an entity select in turn (for
// example the services of the service policies that select an identity),
// each with the policy. typ, when set, keeps only policies of that type.
func (g *graph) grants(policy posture.Kind, from, to, id, typ string) []link {
	g.mu.RLock()
	defer g.mu.RUnlock()
	target, ok := targetOf(policy, to)
	if !ok {
		return nil
	}
	var out []link
	for _, pid := range g.selectingLocked(policy, from, id) {
		p := g.policies[policy][pid]
		if typ != "" && p.typ != typ {
			continue
		}
		g.eachSelected(p.roles[to], p.semantic, target, func(sid string) {
			out = append(out, link{sid, pid})
		})
	}
	slices.SortFunc(out, func(a, b link) int {
		if c := strings.Compare(a.target, b.target); c != 0 {
			return c
		}
		return strings.Compare(a.policy, b.policy)
	})
	return slices.Compact(out)
}

// policy returns the graph's copy of a policy's type and semantic.
func (g *graph) policy(kind posture.Kind, id string) (typ, semantic string, ok bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	p := g.policies[kind][id]
	if p == nil {
		return "", "", false
	}
	return p.typ, p.semantic, true
}

// attributes lists, sorted and distinct, the role attributes in use by the
// entities of a kind.
func (g *graph) attributes(kind posture.Kind) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.entitiesOf(kind).attributes()
}

// load fills the graph from the store.
func (g *graph) load(r reader) error {
	for _, kind := range []posture.Kind{posture.KindIdentity, posture.KindService, posture.KindCheck, posture.KindEdgeRouter} {
		if err := g.loadAttrs(r, kind); err != nil {
			return err
		}
	}
	if err := loadKind[posture.ServicePolicy](g, r); err != nil {
		return err
	}
	if err := loadKind[posture.EdgeRouterPolicy](g, r); err != nil {
		return err
	}
	if err := loadKind[posture.ServiceEdgeRouterPolicy](g, r); err != nil {
		return err
	}
	return scan(r, []byte(sessionStatePrefix), func(key, value []byte) (bool, error) {
		var st struct {
			IdentityID string `json:"identityId"`
		}
		if err := json.Unmarshal(value, &st); err != nil {
			return false, err
		}
		addTo(g.sessions, st.IdentityID, strings.TrimPrefix(string(key), sessionStatePrefix))
		return true, nil
	})
}

// loadAttrs reads the ids and role attributes of the entities of a kind,
// and nothing else of them (a model of a million identities is read at
// every start).
func (g *graph) loadAttrs(r reader, kind posture.Kind) error {
	type attrs struct {
		ID             string   `json:"id"`
		RoleAttributes []string `json:"roleAttributes"`
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return scanJSON(r, entityPrefix(kind), func(e attrs) bool {
		g.setAttrs(kind, e.ID, e.RoleAttributes)
		return true
	})
}

func loadKind[T posture.Entity](g *graph, r reader) error {
	var zero T
	return scanJSON(r, entityPrefix(zero.EntityKind()), func(v T) bool {
		g.put(v)
		return true
	})
}

// selector is an identity role list of a policy and its semantic.
type selector struct {
	roles    []string
	semantic string
}

// identitySelectors lists the identity role lists of the service policies
// that a change of the entity affects: the policy itself, or the policies
// that select a posture check or a service.
func (g *graph) identitySelectors(kind posture.Kind, id string) []selector {
	g.mu.RLock()
	defer g.mu.RUnlock()
	var pids []string
	switch kind {
	case posture.KindServicePolicy:
		pids = []string{id}
	case posture.KindCheck:
		pids = g.selectingLocked(posture.KindServicePolicy, FieldPostureCheckRoles, id)
	case posture.KindService:
		pids = g.selectingLocked(posture.KindServicePolicy, FieldServiceRoles, id)
	default:
		return nil
	}
	var out []selector
	for _, pid := range pids {
		if p := g.policies[posture.KindServicePolicy][pid]; p != nil {
			out = append(out, selector{slices.Clone(p.roles[FieldIdentityRoles]), p.semantic})
		}
	}
	return out
}

// selectedByAny reports whether any of the role lists selects the identity.
func (g *graph) selectedByAny(selectors []selector, identityID string) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	attrs, _ := g.entitiesOf(posture.KindIdentity).attrs(identityID)
	for _, s := range selectors {
		if posture.MatchRoles(s.roles, s.semantic, identityID, attrs) {
			return true
		}
	}
	return false
}

// granting lists, sorted, the service policies of a type ("" for both) that
// select both an identity and a service.
func (g *graph) granting(identityID, serviceID, typ string) []string {
	byService := g.selecting(posture.KindServicePolicy, FieldServiceRoles, serviceID)
	var out []string
	for _, pid := range g.selecting(posture.KindServicePolicy, FieldIdentityRoles, identityID) {
		if _, ok := slices.BinarySearch(byService, pid); !ok {
			continue
		}
		if ptype, _, _ := g.policy(posture.KindServicePolicy, pid); typ == "" || ptype == typ {
			out = append(out, pid)
		}
	}
	return out
}
