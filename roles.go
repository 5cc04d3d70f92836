package posture

import (
	"fmt"
	"strings"
)

// RoleAll is the role that selects every entity.
const RoleAll = "#all"

// CheckRoles validates a policy's role list: each entry is "#attribute" or
// "@id", and "#all" must stand alone. It returns a description of the first
// problem, or "".
func CheckRoles(roles []string) string {
	for i, r := range roles {
		switch {
		case r == RoleAll:
			if len(roles) > 1 {
				return "#all must be the only role"
			}
		case len(r) < 2 || (r[0] != '#' && r[0] != '@'):
			return fmt.Sprintf("role %d (%q): role entries must be prefixed with # (an attribute) or @ (an id)", i, r)
		case strings.TrimSpace(r[1:]) != r[1:]:
			return fmt.Sprintf("role %d (%q): no spaces around the name", i, r)
		}
	}
	return ""
}

// CheckAttributes validates an entity's own role attributes: non-empty and
// not starting with # or @.
func CheckAttributes(attrs []string) string {
	for i, a := range attrs {
		if a == "" || a[0] == '#' || a[0] == '@' {
			return fmt.Sprintf("attribute %d (%q): role attributes may not be empty or start with # or @", i, a)
		}
	}
	return ""
}

// MatchRoles reports whether an entity (its id and role attributes) is
// selected by a role list. "#all" and "@<id>" always select; "#attr"
// entries select under the semantic: AllOf needs every listed attribute,
// AnyOf at least one. An empty role list selects nothing.
func MatchRoles(roles []string, semantic, id string, attrs []string) bool {
	var wanted []string
	for _, r := range roles {
		switch {
		case r == RoleAll:
			return true
		case r == "@"+id:
			return true
		case strings.HasPrefix(r, "#"):
			wanted = append(wanted, r[1:])
		}
	}
	if len(wanted) == 0 {
		return false
	}
	has := func(a string) bool {
		for _, x := range attrs {
			if x == a {
				return true
			}
		}
		return false
	}
	if semantic == AnyOf {
		for _, w := range wanted {
			if has(w) {
				return true
			}
		}
		return false
	}
	for _, w := range wanted {
		if !has(w) {
			return false
		}
	}
	return true
}
