package evaluator

import (
	"fmt"
	"time"

	posture "github.com/seed-0809debe/posture"
)

// Stale evidence rules.
//
// A check of type OS, MAC, DOMAIN, PROCESS or PROCESS_MULTI with
// maxAgeSeconds M > 0 looks at the time E of the evidence it judges: the
// last response of its kind (OS, MAC, DOMAIN), the process at its path
// (PROCESS), the oldest of the reported processes at its paths
// (PROCESS_MULTI). Without evidence the rule does not apply (the check
// fails for want of data anyway). The evidence is fresh while now <= E+M
// and stale after (at E+M exactly it is still fresh).
//
//   - onStale "deny" (the default): stale evidence fails the check with
//     Stale set, whatever its values; a passing verdict on fresh evidence
//     carries ValidUntil no later than E+M, so that expiry becomes a
//     deadline event.
//   - onStale "allow": the values are judged as if fresh; Stale is set on
//     the verdict all the same and no deadline is added.
//
// MFA checks have no evidence age (their timeouts are their own rule).

// EvidenceAt is the time of the evidence check c judges in ip, and false
// when there is none or when c is of a kind without evidence age.
func EvidenceAt(c posture.Check, ip posture.IdentityPosture) (time.Time, bool) {
	switch c.TypeID {
	case posture.CheckOS:
		if ip.OS != nil {
			return ip.OS.At, true
		}
	case posture.CheckMAC:
		if ip.MAC != nil {
			return ip.MAC.At, true
		}
	case posture.CheckDomain:
		if ip.Domain != nil {
			return ip.Domain.At, true
		}
	case posture.CheckProcess:
		if c.Process != nil {
			if p, ok := findProcess(ip.Processes, *c.Process, c.ID); ok {
				return p.At, true
			}
		}
	case posture.CheckProcessMulti:
		var oldest time.Time
		found := false
		for _, want := range c.Processes {
			if p, ok := findProcess(ip.Processes, want, ""); ok {
				if !found || p.At.Before(oldest) {
					oldest = p.At
				}
				found = true
			}
		}
		return oldest, found
	}
	return time.Time{}, false
}

// StaleAfter is the last instant at which the evidence of c in ip is
// fresh, and false when c has no maximum age or there is no evidence.
func StaleAfter(c posture.Check, ip posture.IdentityPosture) (time.Time, bool) {
	if c.MaxAgeSeconds <= 0 || c.TypeID == posture.CheckMFA {
		return time.Time{}, false
	}
	at, ok := EvidenceAt(c, ip)
	if !ok {
		return time.Time{}, false
	}
	return addSeconds(at, c.MaxAgeSeconds)
}

// applyStale applies the stale evidence rule to a verdict v of c.
func applyStale(c posture.Check, d Data, now time.Time, v Verdict) Verdict {
	end, ok := StaleAfter(c, d.Identity)
	if !ok {
		return v
	}
	allow := c.OnStale == posture.OnStaleAllow
	if now.After(end) {
		v.Stale = true
		if !allow {
			reason := fmt.Sprintf("evidence stale since %s (maxAgeSeconds %d)", stamp(end), c.MaxAgeSeconds)
			if v.Reason != "" {
				reason = v.Reason + "; " + reason
			}
			v.Pass, v.ValidUntil, v.Reason = false, time.Time{}, reason
		}
		return v
	}
	if v.Pass && !allow && (v.ValidUntil.IsZero() || end.Before(v.ValidUntil)) {
		v.ValidUntil = end
	}
	return v
}
