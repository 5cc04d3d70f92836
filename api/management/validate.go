package management

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// maxName bounds entity names.
const maxName = 255

// name validates a required name.
func name(field string, v *string) (string, error) {
	if v == nil {
		return "", posture.Invalid(field, "is required", nil)
	}
	s := *v // not trimmed: a name with spaces around it is refused, not changed (unique)
	if strings.TrimSpace(s) == "" {
		return "", posture.Invalid(field, "must not be empty", *v)
	}
	if utf8.RuneCountInString(s) > maxName {
		return "", posture.Invalid(field, fmt.Sprintf("must be at most %d characters", maxName), *v)
	}
	return s, nil
}

// unique checks that no other entity of the kind has the name, and that a
// name new to the entity shows as it reads: no control characters (a NUL,
// a line break, an escape sequence), line or paragraph separators, or
// invisible formatting such as a bidirectional override. An entity named
// before this rule keeps its name through its updates.
func (a *API) unique(kind posture.Kind, n, selfID string) error {
	id, err := a.Store.IDByName(kind, n)
	switch {
	case err == nil && id == selfID: // its own name
		return nil
	case err == nil:
		return posture.Invalid("name", "name is already in use", n)
	case !errors.Is(err, posture.ErrNotFound):
		return err
	}
	return api.CheckVisible("name", n)
}

// tags validates a tag map (see api.CheckTags).
func tags(t posture.Tags) (posture.Tags, error) { return api.CheckTags(t) }

// attributes validates role attributes given under either spelling.
func attributes(field string, had []string, lists ...*[]string) ([]string, error) {
	var attrs []string
	for _, l := range lists {
		if l != nil && attrs != nil && !slices.Equal(*l, attrs) {
			return nil, posture.Invalid(field, "roleAttributes and attributes spell one field and differ: give one of them", *l)
		}
		if l != nil && attrs == nil {
			attrs = *l
		}
	}
	if attrs == nil {
		return []string{}, nil
	}
	if err := api.CheckLabels(field, attrs); err != nil {
		return nil, err
	}
	if msg := posture.CheckAttributes(attrs); msg != "" {
		return nil, posture.Invalid(field, msg, attrs)
	}
	for i, a := range attrs {
		if !slices.Contains(had, a) {
			if err := api.CheckVisible(fmt.Sprintf("%s[%d]", field, i), a); err != nil {
				return nil, err
			}
		}
	}
	return dedupe(attrs), nil
}

// roleAttributes are an entity's role attributes before a change (none
// for a new one).
func roleAttributes[T interface{ Attributes() []string }](old *T) []string {
	if old == nil {
		return nil
	}
	return (*old).Attributes()
}

// roles validates a policy role list.
func roles(field string, r []string) ([]string, error) {
	if r == nil {
		return []string{}, nil
	}
	if err := api.CheckLabels(field, r); err != nil {
		return nil, err
	}
	if msg := posture.CheckRoles(r); msg != "" {
		return nil, posture.Invalid(field, msg, r)
	}
	return dedupe(r), nil
}

// roleIDs validates a policy role list whose "@id" entries name entities
// of kind: each must exist (a delete strips its id from policies, so none
// is left naming nothing).
func (a *API) roleIDs(field string, kind posture.Kind, r []string) ([]string, error) {
	r, err := roles(field, r)
	if err != nil {
		return nil, err
	}
	for _, role := range r {
		id, ok := strings.CutPrefix(role, "@")
		if !ok {
			continue
		}
		_, err := a.Store.RawEntity(kind, id)
		if errors.Is(err, posture.ErrNotFound) {
			return nil, posture.Invalid(field, fmt.Sprintf("no %s with id %q", roleNouns[kind], id), role)
		}
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// roleNouns name the entities policy roles select.
var roleNouns = map[posture.Kind]string{posture.KindIdentity: "identity", posture.KindService: "service",
	posture.KindCheck: "posture check", posture.KindEdgeRouter: "edge router"}

// semantic validates a policy semantic (default AllOf).
func semantic(field, s string) (string, error) {
	switch strings.ToLower(s) {
	case "", "allof":
		return posture.AllOf, nil
	case "anyof":
		return posture.AnyOf, nil
	}
	return "", posture.Invalid(field, "must be AllOf or AnyOf", s)
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := make([]string, 0, len(in))
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// times returns the id and creation time of a record: the old one's on an
// update, fresh ones on a create.
func times(oldID string, oldCreated time.Time, isNew bool, now time.Time) (string, time.Time) {
	if isNew {
		return posture.NewID(), now
	}
	return oldID, oldCreated
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
