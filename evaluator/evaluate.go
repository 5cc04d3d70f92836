// Package evaluator decides whether an endpoint satisfies a posture check.
//
// Evaluate(check, data, now) returns a Verdict: pass or fail, the actual and
// expected values shown to administrators, and, for a passing verdict that
// depends on time, the instant after which it may change (ValidUntil).
//
// The package is pure. It reads nothing but its arguments: no clock (time
// enters only as the now argument), no I/O, no mutable globals. The same
// arguments always give the same verdict, which lets the projector replay the
// log and reproduce every decision byte for byte. A failed check is a Verdict
// with Pass=false, never an error and never a panic, whatever the input:
// unknown check types, missing posture data, malformed versions and ranges all
// fail closed.
//
// # Rules
//
// In short (each file states its rules in full: os.go, mac.go, domain.go,
// process.go, mfa.go):
//
//   - OS: the reported type must be listed (compared through
//     posture.CanonicalOSType; the last entry of a type wins); an entry
//     without versions accepts any version, else the version, completed by
//     NormalizeVersion, must satisfy one range (ParseVersionRange).
//   - MAC: a reported address equals a listed one after posture.NormalizeHex.
//   - DOMAIN: the reported domain equals a listed one, ignoring case.
//   - PROCESS, PROCESS_MULTI: the process at the path (case-insensitive on
//     Windows) is reported, running, with a listed hash and a listed signer
//     fingerprint when those are given; AllOf needs all, AnyOf/OneOf one.
//   - MFA: a TOTP was passed in the API session; with a timeout, now <=
//     passedMfaAt+timeoutSeconds; with promptOnWake/promptOnUnlock, a wake or
//     unlock at or after the TOTP leaves Data.MFAGrace (now <= event+grace).
//     MFATimeout and MFATimeoutRemaining give what clients are told.
//   - Stale evidence: with maxAgeSeconds, evidence older than that is stale;
//     onStale "deny" (default) fails the check, "allow" judges it anyway.
//
// The scenario files in testdata/<kind>/ show every rule with its actual and
// expected values; "go test ./evaluator/ -run TestEvaluate -rewrite"
// regenerates their expected output.
//
// It imports only the standard library, the root package and
// Masterminds/semver (for OS version ranges); arch_test.go enforces this.
package evaluator

import (
	"github.com/Masterminds/semver/v3"
	"slices"
	"time"

	posture "github.com/seed-0809debe/posture"
)

// DefaultMFAGrace is the grace period of the MFA check after a wake or unlock
// event (seed section 8: 5 minutes). Evaluate does not apply it on its own:
// callers put it, or a configured value, in Data.MFAGrace.
const DefaultMFAGrace = 5 * time.Minute

// Data is everything an evaluation may look at.
type Data struct {
	// Identity is the identity-wide posture data (OS, MAC, domain, processes).
	Identity posture.IdentityPosture
	// Session is the posture data of the API session the request comes from
	// (MFA, wake and unlock, SDK info).
	Session posture.SessionPosture
	// MFAGrace is how long an MFA check with promptOnWake or promptOnUnlock
	// keeps passing after a wake or unlock event. A negative value counts as
	// zero. Callers normally pass DefaultMFAGrace.
	MFAGrace time.Duration
	// Ranges, when set, parses OS version ranges, typically from a cache
	// (the same ranges are evaluated over and over). Nil parses every time
	// with ParseVersionRange.
	Ranges RangeParser
}

// RangeParser parses a version range as ParseVersionRange does.
type RangeParser interface {
	Parse(r string) (*semver.Constraints, error)
}

// Verdict is the outcome of evaluating one check against posture data at one
// instant.
type Verdict struct {
	// Pass reports whether the check is satisfied.
	Pass bool `json:"pass"`
	// Actual is the JSON-friendly value shown to administrators as a failed
	// check's actualValue (wire reference 4.4). Its type depends on the check
	// type: OSValue, []string (MAC), string (DOMAIN, and the type id of an
	// unsupported check), ProcessValue (PROCESS), []ProcessMultiValue
	// (PROCESS_MULTI) or MFAValue. Slices are never nil.
	Actual any `json:"actualValue"`
	// Expected is the JSON-friendly value shown as expectedValue:
	// []posture.OperatingSystem (OS), []string (MAC, DOMAIN),
	// posture.Process (PROCESS), []posture.Process (PROCESS_MULTI), MFAValue
	// (MFA) or []posture.CheckType (unsupported type: the supported ones).
	Expected any `json:"expectedValue"`
	// ValidUntil is zero when the verdict does not depend on time. Otherwise
	// (only a passing MFA check with a timeout or a running wake/unlock grace)
	// the verdict holds for every instant t with now <= t <= ValidUntil, as
	// long as the data does not change, and it fails for t > ValidUntil. It is
	// the earliest such deadline, in UTC. A failing verdict always has a zero
	// ValidUntil: under these rules a failure never turns into a pass by the
	// passing of time alone. Evidence that goes stale under onStale "deny"
	// is such a deadline too.
	ValidUntil time.Time `json:"validUntil,omitzero"`
	// Semantic is the canonical semantic of a PROCESS_MULTI check (AllOf or
	// AnyOf; the raw value when it is not understood), reported next to the
	// actual and expected values. Empty for other types.
	Semantic string `json:"semantic,omitempty"`
	// Criteria are the facts an MFA verdict was reached from. Nil for other
	// types.
	Criteria *MFACriteria `json:"criteria,omitempty"`
	// Stale reports that the evidence judged is older than the check's
	// maxAgeSeconds (stale.go). With onStale "deny" the verdict fails.
	Stale bool `json:"stale,omitempty"`
	// Reason says in a few words why a verdict fails, for logs and tests. It
	// is empty when Pass is true and is not part of the wire format.
	Reason string `json:"reason,omitempty"`
}

// Evaluate judges check c against data d at instant now. It never panics and
// never reads the clock; see the per-type files (os.go, mac.go, domain.go,
// process.go, mfa.go) for the rules, and stale.go for the age of evidence. A check of an unsupported type fails,
// with the type id as Actual and the supported types as Expected.
func Evaluate(c posture.Check, d Data, now time.Time) Verdict {
	return applyStale(c, d, now, evaluate(c, d, now))
}

func evaluate(c posture.Check, d Data, now time.Time) Verdict {
	switch c.TypeID {
	case posture.CheckOS:
		return evalOS(c, d.Identity.OS, d.Ranges)
	case posture.CheckMAC:
		return evalMAC(c, d.Identity.MAC)
	case posture.CheckDomain:
		return evalDomain(c, d.Identity.Domain)
	case posture.CheckProcess:
		return evalProcess(c, d.Identity.Processes)
	case posture.CheckProcessMulti:
		return evalProcessMulti(c, d.Identity.Processes)
	case posture.CheckMFA:
		return evalMFA(c, d, now)
	default:
		return Verdict{
			Actual:   string(c.TypeID),
			Expected: slices.Clone(posture.CheckTypes),
			Reason:   "unsupported check type",
		}
	}
}

// strs returns a copy of s that is never nil, so that it encodes as [] and
// not as null, and so that a verdict never shares memory with its inputs.
func strs(s []string) []string {
	out := make([]string, len(s))
	copy(out, s)
	return out
}

// normalizedHex returns NormalizeHex of every element of s, never nil.
func normalizedHex(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = posture.NormalizeHex(x)
	}
	return out
}

// hexSet is the set of the non-empty normalised forms of s. Values that
// normalise to the empty string match nothing.
func hexSet(s []string) map[string]bool {
	set := make(map[string]bool, len(s))
	for _, x := range s {
		if n := posture.NormalizeHex(x); n != "" {
			set[n] = true
		}
	}
	return set
}
