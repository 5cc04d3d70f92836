package projections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/Masterminds/semver/v3"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/evaluator"
)

// policyState is what re-evaluation keeps of a policy: whether all its
// enforced checks pass (a failing report-only check does not make it fail)
// and the earliest deadline after which a passing one may stop
// passing (zero: none). verdicts memoises checks by id across the policies
// evaluated on the same data at the same time (policies often share
// checks).
func policyState(checks []*posture.Check, d evaluator.Data, at time.Time, verdicts map[string]evaluator.Verdict) (bool, time.Time) {
	passing := true
	var deadline time.Time
	for _, c := range checks {
		v, ok := verdicts[c.ID]
		if !ok {
			v = evaluator.Evaluate(*c, d, at)
			verdicts[c.ID] = v
		}
		if !v.Pass && !c.ReportOnly(at) {
			passing = false
		}
		if v.Pass && !v.ValidUntil.IsZero() && (deadline.IsZero() || v.ValidUntil.Before(deadline)) {
			deadline = v.ValidUntil
		}
	}
	return passing, deadline
}

// evalPolicy evaluates a policy's checks at a time. It returns whether all
// enforced checks pass, whether all pass (report-only ones included) and
// each check's result.
func evalPolicy(checks []*posture.Check, d evaluator.Data, at time.Time) (bool, bool, []posture.CheckResult, error) {
	passing, strict := true, true
	results := make([]posture.CheckResult, 0, len(checks))
	for _, cp := range checks {
		c := *cp
		v := evaluator.Evaluate(c, d, at)
		r := posture.CheckResult{
			Check: c, Pass: v.Pass, ValidUntil: v.ValidUntil, Semantic: v.Semantic,
			Timeout: evaluator.MFATimeout(c), TimeoutRemaining: -1, Stale: v.Stale, ReportOnly: c.ReportOnly(at),
		}
		if end, ok := evaluator.StaleAfter(c, d.Identity); ok {
			r.StaleAfter = end
		}
		var err error
		if r.Actual, err = raw(v.Actual); err != nil {
			return false, false, nil, fmt.Errorf("check %s: actual: %w", c.ID, err)
		}
		if r.Expected, err = raw(v.Expected); err != nil {
			return false, false, nil, fmt.Errorf("check %s: expected: %w", c.ID, err)
		}
		if v.Criteria != nil {
			if r.Criteria, err = raw(v.Criteria); err != nil {
				return false, false, nil, fmt.Errorf("check %s: criteria: %w", c.ID, err)
			}
		}
		if c.TypeID == posture.CheckMFA {
			r.TimeoutRemaining = evaluator.MFATimeoutRemaining(c, d, at)
		}
		results = append(results, r)
		if !v.Pass {
			strict = false
			passing = passing && r.ReportOnly
		}
	}
	return passing, strict, results, nil
}

// raw encodes a verdict value without HTML escaping, so that ranges such
// as ">=1.2.7 <1.3.0" read as written in dumps and audits. An encoding
// error is an error, never "null".
func raw(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// policyChecks loads the checks a policy selects, in id order, through a
// cache shared by one evaluation. The checks are shared: callers do not
// change them.
func policyChecks(r reader, g *graph, policyID string, cache map[string]*posture.Check) ([]*posture.Check, error) {
	ids := g.selected(posture.KindServicePolicy, policyID, FieldPostureCheckRoles)
	out := make([]*posture.Check, 0, len(ids))
	for _, id := range ids {
		c, ok := cache[id]
		if !ok {
			var v posture.Check
			found, err := getJSON(r, entityKey(posture.KindCheck, id), &v)
			if err != nil {
				return nil, err
			}
			if found {
				c = &v
			}
			cache[id] = c
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// rangeCache keeps parsed OS version ranges: the same few ranges are
// evaluated on every OS posture fact. Ranges come from checks, so the cache
// stays as small as the model.
type rangeCache struct {
	m sync.Map // string -> rangeResult
}

type rangeResult struct {
	c   *semver.Constraints
	err error
}

// Parse implements evaluator.RangeParser.
func (rc *rangeCache) Parse(r string) (*semver.Constraints, error) {
	if v, ok := rc.m.Load(r); ok {
		res := v.(rangeResult)
		return res.c, res.err
	}
	c, err := evaluator.ParseVersionRange(r)
	rc.m.Store(r, rangeResult{c, err})
	return c, err
}
