package evaluator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/Masterminds/semver/v3"
	posture "github.com/seed-0809debe/posture"
)

// OS check rules.
//
// The reported OS type is compared with each entry's type after
// posture.CanonicalOSType on both sides ("WINDOWS", "windows" and "Windows"
// are the same type); a type that is not a supported one is compared
// case-insensitively as is. When several entries name the same type, the last
// one wins (as in the original controller). An entry without versions accepts
// any version, even one that does not parse. Otherwise the reported version,
// completed with the build number by NormalizeVersion, must satisfy at least
// one of the entry's ranges (ParseVersionRange). A version that cannot be
// normalised, or a range that cannot be parsed, matches nothing.

// OSValue is the actual value of an OS verdict: the last OS posture response,
// as reported (zero values when none was received).
type OSValue struct {
	Type    string `json:"type"`
	Version string `json:"version"`
	Build   string `json:"build"`
}

func evalOS(c posture.Check, os *posture.OSPosture, ranges RangeParser) Verdict {
	v := Verdict{Actual: OSValue{}, Expected: cloneOperatingSystems(c.OperatingSystems)}
	if os == nil {
		v.Reason = "no OS posture received"
		return v
	}
	v.Actual = OSValue{Type: os.Type, Version: os.Version, Build: os.Build}

	entry, ok := lastEntryFor(c.OperatingSystems, os.Type)
	if !ok {
		v.Reason = fmt.Sprintf("OS type %q is not listed", os.Type)
		return v
	}
	if len(entry.Versions) == 0 {
		v.Pass = true
		return v
	}
	ver, err := NormalizeVersion(os.Version, os.Build)
	if err != nil {
		v.Reason = err.Error()
		return v
	}
	invalid := 0
	parse := ParseVersionRange
	if ranges != nil {
		parse = ranges.Parse
	}
	for _, r := range entry.Versions {
		cs, err := parse(r)
		if err != nil {
			invalid++
			continue
		}
		if cs.Check(ver) {
			v.Pass = true
			return v
		}
	}
	v.Reason = fmt.Sprintf("version %s is in none of the listed ranges", ver)
	if invalid > 0 {
		v.Reason += fmt.Sprintf(" (%d of %d do not parse)", invalid, len(entry.Versions))
	}
	return v
}

// lastEntryFor returns the last entry of list whose type is the same OS type
// as reported.
func lastEntryFor(list []posture.OperatingSystem, reported string) (posture.OperatingSystem, bool) {
	want := osKey(reported)
	for i := len(list) - 1; i >= 0; i-- {
		if osKey(list[i].Type) == want {
			return list[i], true
		}
	}
	return posture.OperatingSystem{}, false
}

// osKey is the comparison key of an OS type: its canonical name when it is a
// supported type, else the trimmed lower-case string.
func osKey(s string) string {
	if t, ok := posture.CanonicalOSType(s); ok {
		return t
	}
	return strings.ToLower(strings.TrimSpace(s))
}

func cloneOperatingSystems(list []posture.OperatingSystem) []posture.OperatingSystem {
	out := make([]posture.OperatingSystem, len(list))
	for i, os := range list {
		out[i] = posture.OperatingSystem{Type: os.Type, Versions: strs(os.Versions)}
	}
	return out
}

// NormalizeVersion turns an OS version and build number, as an endpoint
// reports them, into a semantic version.
//
// Surrounding spaces are ignored. The version is one to three dot-separated
// decimal numbers without leading zeros, optionally followed by a semver
// pre-release ("-beta.1") and build metadata ("+abc"); anything else (a "v"
// prefix, four numbers, "10.", "") is an error.
//
//   - X.Y.Z: used as is; the build is ignored.
//   - X.Y: the build number becomes the patch level (seed 2.1: "where an OS
//     has no explicit patch level, its build number is used"), so "10.0" with
//     build "19045" is 10.0.19045.
//   - X: the minor level is 0 and the build number is the patch level, so
//     "14" with build "3" is 14.0.3.
//
// The build number is the leading run of decimal digits of the build when it
// makes up the whole build or is followed by a '.' ("19045" and
// "19045.3693" give 19045), read as an unsigned 64-bit number (leading zeros
// dropped). A build that is empty or not such a number ("22H2",
// "UP1A.231005.007", more than 64 bits) is ignored, and the missing patch
// level is 0: "14.2" without a usable build is 14.2.0.
func NormalizeVersion(version, build string) (*semver.Version, error) {
	version = strings.TrimSpace(version)
	if version == "" {
		return nil, errors.New("empty OS version")
	}
	core, suffix := version, ""
	if i := strings.IndexAny(version, "-+"); i >= 0 {
		core, suffix = version[:i], version[i:]
	}
	parts := strings.Split(core, ".")
	switch len(parts) {
	case 3:
	case 1, 2:
		if len(parts) == 1 {
			parts = append(parts, "0")
		}
		parts = append(parts, buildNumber(build))
	default:
		return nil, fmt.Errorf("OS version %q has more than three numbers", version)
	}
	v, err := semver.StrictNewVersion(strings.Join(parts, ".") + suffix)
	if err != nil {
		return nil, fmt.Errorf("OS version %q (build %q) is not a version: %v", version, build, err)
	}
	return v, nil
}

// buildNumber returns the patch level a build stands for, in canonical
// decimal form, or "0" when the build is not a number.
func buildNumber(build string) string {
	b := strings.TrimSpace(build)
	if i := strings.IndexByte(b, '.'); i >= 0 {
		b = b[:i]
	}
	if b == "" || strings.TrimLeft(b, "0123456789") != "" {
		return "0"
	}
	n, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return "0"
	}
	return strconv.FormatUint(n, 10)
}

// ParseVersionRange parses one entry of an OS check's versions: a
// Masterminds/semver constraint such as ">=1.2.7 <1.3.0" (AND within a group;
// a comma works too) or "1.2.7 || >=1.2.9 <2.0.0" (OR between groups).
// Management validation should use it so that whatever is stored also
// evaluates. Notes on the syntax:
//
//   - A bare version means equality: "1.2.7" is "=1.2.7".
//   - A partial version is a wildcard: "1.2" and "=1.2" are 1.2.x, ">=10" is
//     ">=10.0.0"; "~", "^", "x" and hyphen ranges ("1.2 - 1.4") work.
//   - Pre-release versions take part in ordinary semver precedence (unlike
//     Masterminds' default, which excludes them): 1.3.0-beta satisfies
//     ">=1.2.7 <1.3.0" because it sorts before 1.3.0.
//   - The operators of the blang/semver ranges the controller evaluates are
//     taken too: "==1.2.7" is "=1.2.7" and "!1.2.7" is "!=1.2.7".
//   - An empty or blank range is an error; it never matches "everything".
func ParseVersionRange(s string) (*semver.Constraints, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty version range")
	}
	cs, err := semver.NewConstraint(blangOperators(s))
	if err != nil {
		return nil, fmt.Errorf("version range %q: %v", s, err)
	}
	cs.IncludePrerelease = true
	return cs, nil
}

// blangOperators rewrites blang/semver's "==" and "!" operators, at the
// start of a comparator, as Masterminds/semver's "=" and "!=".
func blangOperators(s string) string {
	if !strings.ContainsAny(s, "=!") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		start := i == 0 || strings.IndexByte(" \t,|", s[i-1]) >= 0
		switch {
		case start && strings.HasPrefix(s[i:], "=="):
			b.WriteByte('=')
			i++
		case start && s[i] == '!' && !strings.HasPrefix(s[i:], "!="):
			b.WriteString("!=")
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// NegatesEveryVersion reports whether a range holds a negated wildcard
// ("!=*", "!x", "!= *.*"): Masterminds/semver reads it as every version
// but 0.0.0, the opposite of what it seems to say. Management refuses such
// ranges when they are written; ranges stored before are evaluated as they
// were.
func NegatesEveryVersion(s string) bool {
	for _, group := range strings.Split(blangOperators(strings.TrimSpace(s)), "||") {
		fields := strings.FieldsFunc(group, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' })
		for i, f := range fields {
			v, ok := strings.CutPrefix(f, "!=")
			if !ok {
				continue
			}
			if v == "" && i+1 < len(fields) {
				v = fields[i+1]
			}
			if v != "" && strings.Trim(v, "*xX.") == "" {
				return true
			}
		}
	}
	return false
}
