package evaluator

import (
	"testing"
	"time"

	posture "github.com/seed-0809debe/posture"
)

func TestNormalizeVersion(t *testing.T) {
	for _, tt := range []struct {
		version, build string
		want           string // "" = error
	}{
		{"10.0.19045", "", "10.0.19045"},
		{"10.0.19045", "22000", "10.0.19045"}, // explicit patch wins
		{"10.0", "19045", "10.0.19045"},
		{"10.0", "19045.3693", "10.0.19045"},
		{"10.0", " 19045 ", "10.0.19045"},
		{"10.0", "0042", "10.0.42"},
		{"10.0", "", "10.0.0"},
		{"10.0", "22H2", "10.0.0"},
		{"10.0", "19045a", "10.0.0"},
		{"10.0", "99999999999999999999999", "10.0.0"}, // does not fit: ignored
		{"14", "3", "14.0.3"},
		{"14", "UP1A.231005.007", "14.0.0"},
		{"14", "", "14.0.0"},
		{" 14.2 ", "", "14.2.0"},
		{"14.2-beta.1", "7", "14.2.7-beta.1"},
		{"1.2.3-rc.1+build.5", "", "1.2.3-rc.1+build.5"},
		{"0.0.0", "", "0.0.0"},
		{"", "19045", ""},
		{"  ", "", ""},
		{"10.0.19045.3693", "", ""},
		{"v10.0.1", "", ""},
		{"10.", "19045", ""},
		{".10", "", ""},
		{"10.01", "1", ""},
		{"10.0.01", "", ""},
		{"ten", "", ""},
		{"10.0-", "1", ""},
		{"-1.0", "", ""},
	} {
		v, err := NormalizeVersion(tt.version, tt.build)
		switch {
		case tt.want == "" && err == nil:
			t.Errorf("NormalizeVersion(%q, %q) = %s, want an error", tt.version, tt.build, v)
		case tt.want != "" && err != nil:
			t.Errorf("NormalizeVersion(%q, %q): %v, want %s", tt.version, tt.build, err, tt.want)
		case tt.want != "" && v.String() != tt.want:
			t.Errorf("NormalizeVersion(%q, %q) = %s, want %s", tt.version, tt.build, v, tt.want)
		}
	}
}

// TestSeedRanges checks the range examples of seed section 2.1 directly, so
// that a careless -rewrite of testdata/os/seed_ranges.txt cannot hide a
// regression.
func TestSeedRanges(t *testing.T) {
	for _, tt := range []struct {
		rng     string
		matches []string
		not     []string
	}{
		{">=1.2.7 <1.3.0", []string{"1.2.7", "1.2.8", "1.2.99"}, []string{"1.2.6", "1.3.0", "1.1.0"}},
		{">=1.2.7", []string{"1.2.7", "1.2.8", "2.5.3", "1.3.9"}, []string{"1.2.6", "1.1.0"}},
		{"1.2.7 || >=1.2.9 <2.0.0", []string{"1.2.7", "1.2.9", "1.4.6"}, []string{"1.2.8", "2.0.0"}},
	} {
		check := posture.Check{TypeID: posture.CheckOS, OperatingSystems: []posture.OperatingSystem{
			{Type: posture.OSWindows, Versions: []string{tt.rng}},
		}}
		for want, versions := range map[bool][]string{true: tt.matches, false: tt.not} {
			for _, ver := range versions {
				d := Data{Identity: posture.IdentityPosture{OS: &posture.OSPosture{Type: "WINDOWS", Version: ver}}}
				if got := Evaluate(check, d, time.Time{}).Pass; got != want {
					t.Errorf("%q with %s: pass=%t, want %t", tt.rng, ver, got, want)
				}
			}
		}
	}
}

func TestParseVersionRange(t *testing.T) {
	for _, tt := range []struct {
		rng     string
		ok      bool
		matches []string
		not     []string
	}{
		{">=10.0.19041 <11.0.0", true, []string{"10.0.19041", "10.5.0"}, []string{"11.0.0", "10.0.19040"}},
		{">=1.2.7, <1.3.0", true, []string{"1.2.7"}, []string{"1.3.0"}},
		{"1.2.7", true, []string{"1.2.7", "1.2.7+meta"}, []string{"1.2.8", "1.2.6"}},
		{"1.2", true, []string{"1.2.0", "1.2.99"}, []string{"1.3.0"}},
		{"~1.2.3", true, []string{"1.2.9"}, []string{"1.3.0"}},
		{"^1.2.3", true, []string{"1.9.0"}, []string{"2.0.0"}},
		{"1.2 - 1.4", true, []string{"1.3.5", "1.4.9"}, []string{"1.5.0"}},
		{"<1.3.0", true, []string{"1.3.0-beta"}, []string{"1.3.0"}},
		// blang/semver's operators, as the controller's ranges use them.
		{"==1.2.3", true, []string{"1.2.3"}, []string{"1.2.4"}},
		{"!1.2.3", true, []string{"1.2.4", "1.2.2"}, []string{"1.2.3"}},
		{">=1.2.3 !1.2.5", true, []string{"1.2.3", "1.2.6"}, []string{"1.2.5", "1.2.2"}},
		{"<1.0.0 || ==1.2.3", true, []string{"0.9.0", "1.2.3"}, []string{"1.2.4"}},
		{"!=1.2.3", true, []string{"1.2.4"}, []string{"1.2.3"}},
		{"!", false, nil, nil},
		{"", false, nil, nil},
		{"   ", false, nil, nil},
		{"nope", false, nil, nil},
		{">=1.2.7 ||", false, nil, nil},
	} {
		cs, err := ParseVersionRange(tt.rng)
		if (err == nil) != tt.ok {
			t.Errorf("ParseVersionRange(%q): err=%v, want ok=%t", tt.rng, err, tt.ok)
			continue
		}
		for want, versions := range map[bool][]string{true: tt.matches, false: tt.not} {
			for _, ver := range versions {
				v, err := NormalizeVersion(ver, "")
				if err != nil {
					t.Fatal(err)
				}
				if got := cs.Check(v); got != want {
					t.Errorf("%q with %s: %t, want %t", tt.rng, ver, got, want)
				}
			}
		}
	}
}

// TestNegatesEveryVersion: a negated wildcard, in any spelling, is found;
// negations of a version or a partial version are not.
func TestNegatesEveryVersion(t *testing.T) {
	for rng, want := range map[string]bool{
		"!*": true, "!x": true, "!=*": true, "!= *": true, "!=X.x": true, ">=1.0.0 !*": true, "1.2.3 || !=*.*": true, ">=1, !=x": true,
		"!1.2.3": false, "!=1.2": false, "!=0": false, ">=1.0.0": false, "*": false, "1.2.x": false, "!=1.x": false,
	} {
		if got := NegatesEveryVersion(rng); got != want {
			t.Errorf("NegatesEveryVersion(%q) = %t, want %t", rng, got, want)
		}
	}
}
