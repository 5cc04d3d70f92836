package posture_test

import (
	"testing"

	"github.com/seed-0809debe/posture"
)

func TestMatchRoles(t *testing.T) {
	attrs := []string{"laptops", "sales"}
	cases := []struct {
		name     string
		roles    []string
		semantic string
		want     bool
	}{
		{"empty list selects nothing", nil, posture.AllOf, false},
		{"empty list selects nothing (AnyOf)", []string{}, posture.AnyOf, false},
		{"#all", []string{"#all"}, posture.AllOf, true},
		{"@id", []string{"@ident1"}, posture.AllOf, true},
		{"@other", []string{"@other"}, posture.AllOf, false},
		{"@id with an unmet AllOf attribute", []string{"@ident1", "#engineering"}, posture.AllOf, true},
		{"AllOf all present", []string{"#laptops", "#sales"}, posture.AllOf, true},
		{"AllOf one missing", []string{"#laptops", "#engineering"}, posture.AllOf, false},
		{"AnyOf one present", []string{"#laptops", "#engineering"}, posture.AnyOf, true},
		{"AnyOf none present", []string{"#phones", "#engineering"}, posture.AnyOf, false},
		{"single attribute", []string{"#sales"}, posture.AllOf, true},
		{"case matters", []string{"#Sales"}, posture.AnyOf, false},
	}
	for _, c := range cases {
		if got := posture.MatchRoles(c.roles, c.semantic, "ident1", attrs); got != c.want {
			t.Errorf("%s: MatchRoles(%v, %s) = %v, want %v", c.name, c.roles, c.semantic, got, c.want)
		}
	}
}

func TestCheckRoles(t *testing.T) {
	good := [][]string{nil, {"#all"}, {"#a", "@b"}, {"@abc"}}
	bad := [][]string{{"all"}, {"#all", "#a"}, {"#"}, {"@"}, {"a"}, {""}, {"# a"}}
	for _, r := range good {
		if msg := posture.CheckRoles(r); msg != "" {
			t.Errorf("%v rejected: %s", r, msg)
		}
	}
	for _, r := range bad {
		if posture.CheckRoles(r) == "" {
			t.Errorf("%v accepted", r)
		}
	}
	if posture.CheckAttributes([]string{"ok", "#bad"}) == "" || posture.CheckAttributes([]string{"fine"}) != "" {
		t.Error("CheckAttributes")
	}
}
