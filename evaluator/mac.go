package evaluator

import (
	posture "github.com/seed-0809debe/posture"
)

// MAC check rules.
//
// The check passes when any reported hardware address equals any address of
// the check, after posture.NormalizeHex on both sides ("AA:BB-cc..." equals
// "aabbcc..."). Addresses that normalise to the empty string match nothing.
// Actual is the list of reported addresses, normalised (empty when nothing was
// received); Expected is the check's list as given.

func evalMAC(c posture.Check, mac *posture.MACPosture) Verdict {
	var reported []string
	if mac != nil {
		reported = mac.Addresses
	}
	v := Verdict{Actual: normalizedHex(reported), Expected: strs(c.MACAddresses)}
	if mac == nil {
		v.Reason = "no MAC posture received"
		return v
	}
	allowed := hexSet(c.MACAddresses)
	for _, a := range v.Actual.([]string) {
		if allowed[a] {
			v.Pass = true
			return v
		}
	}
	v.Reason = "no reported MAC address is listed"
	return v
}
