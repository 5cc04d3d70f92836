package evaluator

import (
	"strings"

	posture "github.com/seed-0809debe/posture"
)

// DOMAIN check rules.
//
// The check passes when the reported Windows domain equals one of the check's
// domains, ignoring case (strings.EqualFold, no trimming). An empty reported
// domain matches nothing, not even an empty entry. Actual is the reported
// domain ("" when nothing was received); Expected is the check's list.

func evalDomain(c posture.Check, dom *posture.DomainPosture) Verdict {
	v := Verdict{Actual: "", Expected: strs(c.Domains)}
	if dom == nil {
		v.Reason = "no domain posture received"
		return v
	}
	v.Actual = dom.Domain
	if dom.Domain != "" {
		for _, want := range c.Domains {
			if strings.EqualFold(dom.Domain, want) {
				v.Pass = true
				return v
			}
		}
	}
	v.Reason = "domain is not listed"
	return v
}
