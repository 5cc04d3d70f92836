package evaluator

import (
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	posture "github.com/seed-0809debe/posture"
)

// MFA check rules (seed sections 2.1, 3 and 6; wire reference 5.4).
//
// Let P be the session's MFAPassedAt (the last valid TOTP), T the check's
// timeoutSeconds and G = Data.MFAGrace (negative counts as 0). At instant now
// the check
//
//   - fails when P is nil (MFA never passed in this API session);
//   - with T > 0, passes while now <= P+T and fails after (at P+T exactly it
//     still passes; one nanosecond later it fails). T <= 0 (stored as -1)
//     means no timeout. Once the projection has found a timeout elapsed
//     (SessionPosture.MFATimedOutAt), every MFA check fails until MFA is
//     passed again, whatever the timeouts become;
//   - with promptOnWake, when WokenAt is set and WokenAt >= P (a wake at or
//     after the last TOTP; an earlier wake was answered by that TOTP and is
//     ignored), passes while now <= WokenAt+G and fails after;
//   - with promptOnUnlock, the same with UnlockedAt.
//
// All applicable conditions must hold. A passing verdict carries ValidUntil,
// the earliest of the applicable deadlines P+T, WokenAt+G and UnlockedAt+G: it
// is the last instant at which the check passes. A deadline beyond
// 9999-12-31T23:59:59Z (which JSON cannot carry) counts as no deadline.
//
// Actual and Expected are MFAValue. Actual.TimedOut is true when the timeout
// has elapsed, and also when MFA was never passed (as the original reports
// it). Actual.PassedOnWake is true only when promptOnWake is set and its
// condition holds, so that it equals Expected.PassedOnWake (= promptOnWake)
// exactly when the wake rule is satisfied; likewise PassedOnUnlock.

// MFAValue is the actual and expected value of an MFA verdict.
type MFAValue struct {
	PassedMFA      bool `json:"passedMfa"`
	PassedOnWake   bool `json:"passedOnWake"`
	PassedOnUnlock bool `json:"passedOnUnlock"`
	TimedOut       bool `json:"timedOut"`
}

// MFACriteria are the facts an MFA verdict was reached from, reported to
// administrators as the failed check's criteria.
type MFACriteria struct {
	PassedMFAAt             *time.Time `json:"passedMfaAt"`
	WokenAt                 *time.Time `json:"wokenAt"`
	UnlockedAt              *time.Time `json:"unlockedAt"`
	TimeoutSeconds          int64      `json:"timeoutSeconds"`          // MFATimeout
	TimeoutRemainingSeconds int64      `json:"timeoutRemainingSeconds"` // MFATimeoutRemaining
}

// NoTimeout is the timeout and timeoutRemaining reported for checks that do
// not time out.
const NoTimeout int64 = -1

// sdkTypeC is the SDK type of the clients that may be non-legacy for
// ignoreLegacyEndpoints (from version 0.25.0 on).
const sdkTypeC = "ziti-sdk-c"

func evalMFA(c posture.Check, d Data, now time.Time) Verdict {
	s := d.Session
	v := Verdict{
		Expected: MFAValue{PassedMFA: true, PassedOnWake: c.PromptOnWake, PassedOnUnlock: c.PromptOnUnlock},
		Criteria: &MFACriteria{
			PassedMFAAt:             copyTime(s.MFAPassedAt),
			WokenAt:                 copyTime(s.WokenAt),
			UnlockedAt:              copyTime(s.UnlockedAt),
			TimeoutSeconds:          MFATimeout(c),
			TimeoutRemainingSeconds: MFATimeoutRemaining(c, d, now),
		},
	}
	if s.MFAPassedAt == nil {
		v.Actual = MFAValue{TimedOut: true}
		v.Reason = "MFA not passed in this API session"
		return v
	}
	if s.MFATimedOut() {
		// Sticky, as on the controller: a later, longer timeout (or none)
		// does not bring an MFA that timed out back.
		v.Actual = MFAValue{PassedMFA: true, TimedOut: true}
		v.Reason = fmt.Sprintf("MFA timed out (found at %s); a new TOTP is needed", stamp(*s.MFATimedOutAt))
		return v
	}
	passed := *s.MFAPassedAt
	actual := MFAValue{PassedMFA: true}
	var reasons []string
	var until time.Time // earliest deadline still ahead; zero = none
	keep := func(deadline time.Time) {
		if until.IsZero() || deadline.Before(until) {
			until = deadline
		}
	}

	if c.TimeoutSeconds > 0 {
		if end, ok := addSeconds(passed, c.TimeoutSeconds); ok {
			if now.After(end) {
				actual.TimedOut = true
				reasons = append(reasons, fmt.Sprintf("MFA timed out at %s", stamp(end)))
			} else {
				keep(end)
			}
		}
	}
	grace := max(d.MFAGrace, 0)
	if c.PromptOnWake {
		held, end, ok := graceHolds(s.WokenAt, passed, grace, now)
		actual.PassedOnWake = held
		if !held {
			reasons = append(reasons, fmt.Sprintf("no TOTP since wake at %s (grace ended %s)", stamp(*s.WokenAt), stamp(end)))
		} else if ok {
			keep(end)
		}
	}
	if c.PromptOnUnlock {
		held, end, ok := graceHolds(s.UnlockedAt, passed, grace, now)
		actual.PassedOnUnlock = held
		if !held {
			reasons = append(reasons, fmt.Sprintf("no TOTP since unlock at %s (grace ended %s)", stamp(*s.UnlockedAt), stamp(end)))
		} else if ok {
			keep(end)
		}
	}

	v.Actual = actual
	if len(reasons) > 0 {
		v.Reason = strings.Join(reasons, "; ")
		return v
	}
	v.Pass = true
	v.ValidUntil = until
	return v
}

// graceHolds applies the wake (or unlock) rule: an event at or after the last
// TOTP leaves grace to submit a new one. It reports whether the rule holds at
// now, and the end of the grace window with ok=true when one applies.
func graceHolds(event *time.Time, passed time.Time, grace time.Duration, now time.Time) (held bool, end time.Time, ok bool) {
	if event == nil || event.Before(passed) {
		return true, time.Time{}, false
	}
	end = event.Add(grace).UTC()
	if end.After(maxDeadline()) {
		return true, time.Time{}, false
	}
	return !now.After(end), end, true
}

// MFATimeout is the timeout reported to clients for check c (postureQueries
// "timeout"): its timeoutSeconds when that is positive, else NoTimeout (-1).
// Checks of other types have no timeout.
func MFATimeout(c posture.Check) int64 {
	if c.TypeID != posture.CheckMFA || c.TimeoutSeconds <= 0 {
		return NoTimeout
	}
	return c.TimeoutSeconds
}

// MFATimeoutRemaining is the number of seconds a client has left before it
// must submit a TOTP again for check c (postureQueries "timeoutRemaining",
// wire reference 5.4), at now:
//
//   - NoTimeout (-1) for checks of other types and MFA checks without a
//     timeout (even while a wake or unlock grace runs);
//   - 0 when MFA was never passed in this API session;
//   - NoTimeout when the check has ignoreLegacyEndpoints and the session's
//     client is legacy (IsLegacyEndpoint);
//   - otherwise the seconds left until the timeout (timeoutSeconds minus the
//     whole seconds elapsed since the last TOTP; a TOTP in the future counts
//     as just now), lowered to the seconds left of the wake (unlock) grace
//     when promptOnWake (promptOnUnlock) is set and the event is at or after
//     the last TOTP, and floored at 0.
//
// Partial seconds left are rounded up (as the original does for the timeout;
// it truncates the grace), so 0 means that a deadline has been reached: at the
// deadline itself the check still passes, one instant later it fails. Using
// "at or after" for the event (the original uses "after") keeps this value
// consistent with Evaluate.
func MFATimeoutRemaining(c posture.Check, d Data, now time.Time) int64 {
	if MFATimeout(c) == NoTimeout {
		return NoTimeout
	}
	s := d.Session
	if s.MFAPassedAt == nil {
		return 0
	}
	if c.IgnoreLegacyEndpoints && IsLegacyEndpoint(s.SDKInfo) {
		return NoTimeout
	}
	if s.MFATimedOut() {
		return 0
	}
	passed := *s.MFAPassedAt
	remaining := c.TimeoutSeconds - wholeSeconds(now.Sub(passed))
	grace := max(d.MFAGrace, 0)
	if c.PromptOnWake {
		remaining = min(remaining, graceRemaining(s.WokenAt, passed, grace, now))
	}
	if c.PromptOnUnlock {
		remaining = min(remaining, graceRemaining(s.UnlockedAt, passed, grace, now))
	}
	return max(remaining, 0)
}

// graceRemaining is the seconds left of the grace after event, rounded up,
// or the largest int64 when no grace applies.
func graceRemaining(event *time.Time, passed time.Time, grace time.Duration, now time.Time) int64 {
	if event == nil || event.Before(passed) {
		return 1<<63 - 1
	}
	left := grace - max(now.Sub(*event), 0)
	secs := int64(left / time.Second)
	if left%time.Second > 0 {
		secs++
	}
	return secs
}

// IsLegacyEndpoint reports whether a client counts as legacy for an MFA
// check's ignoreLegacyEndpoints: it sent no SDK info, or its SDK is anything
// other than type "ziti-sdk-c" with a strict semver version >= 0.25.0 (a
// version that does not parse is legacy; pre-releases of 0.25.0 are older
// than 0.25.0).
func IsLegacyEndpoint(info *posture.SDKInfo) bool {
	if info == nil || info.Type != sdkTypeC {
		return true
	}
	v, err := semver.StrictNewVersion(info.Version)
	if err != nil {
		return true
	}
	return v.LessThan(semver.New(0, 25, 0, "", ""))
}

// wholeSeconds truncates d to whole seconds, counting negative durations as 0.
func wholeSeconds(d time.Duration) int64 {
	return int64(max(d, 0) / time.Second)
}

// addSeconds returns t+secs in UTC, or ok=false when that is later than
// maxDeadline (to the second). It cannot overflow, unlike t.Add with a
// time.Duration of more than 292 years.
func addSeconds(t time.Time, secs int64) (time.Time, bool) {
	limit := maxDeadline()
	if secs > limit.Unix()-t.Unix() {
		return time.Time{}, false
	}
	return time.Unix(t.Unix()+secs, int64(t.Nanosecond())).UTC(), true
}

// maxDeadline is the latest deadline a verdict carries: the last second that
// RFC 3339 (and so JSON) can represent.
func maxDeadline() time.Time {
	return time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
}

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
