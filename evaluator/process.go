package evaluator

import (
	"fmt"
	"strings"

	posture "github.com/seed-0809debe/posture"
)

// PROCESS and PROCESS_MULTI check rules.
//
// A required process is looked up by path among the identity's reported
// processes: exact match, or case-insensitive when the required process's
// osType is Windows or WindowsServer (an exact match is preferred). An empty
// required path is never found. The process is valid when it is reported,
// running, its hash is one of the required hashes if any are given, and at
// least one of its signer fingerprints is one of the required fingerprints if
// any are given. Hashes and fingerprints are compared after
// posture.NormalizeHex on both sides; a given list whose entries all normalise
// to "" matches nothing (it is not treated as absent).
//
// PROCESS requires its single process to be valid, as reported in answer to
// its own query: a report at its path that answered another check (the
// response's id) does not count. PROCESS_MULTI combines its
// processes by semantic: AllOf (also the default when the semantic is empty)
// requires every one to be valid and fails when there are none; AnyOf, or
// OneOf (the seed's spelling), requires at least one. Any other semantic
// fails. Semantics are matched ignoring case.

// ProcessValue is what was reported for the process of a PROCESS check: its
// actual value. Zero values mean nothing was reported; the hash and
// fingerprints are normalised.
type ProcessValue struct {
	Hash               string   `json:"hash"`
	IsRunning          bool     `json:"isRunning"`
	SignerFingerprints []string `json:"signerFingerprints"`
}

// ProcessExpected is a PROCESS check's expected value, in the shape the
// OpenZiti controller gives it: one signer fingerprint, as the check takes
// it (PROCESS_MULTI's list each process's, as posture.Process).
type ProcessExpected struct {
	OSType            string   `json:"osType"`
	Path              string   `json:"path"`
	Hashes            []string `json:"hashes"`
	SignerFingerprint string   `json:"signerFingerprint"`
}

func processExpected(p posture.Process) ProcessExpected {
	e := ProcessExpected{OSType: p.OSType, Path: p.Path, Hashes: strs(p.Hashes)}
	if len(p.SignerFingerprints) > 0 {
		e.SignerFingerprint = p.SignerFingerprints[0]
	}
	return e
}

// ProcessMultiValue is what was reported for one process of a PROCESS_MULTI
// check; the actual value is one per listed process, in the check's order.
// Path is the reported path, or the required one when nothing was reported
// for it.
type ProcessMultiValue struct {
	Path string `json:"path"`
	ProcessValue
}

func evalProcess(c posture.Check, reported []posture.ProcessPosture) Verdict {
	if c.Process == nil {
		return Verdict{
			Actual:   ProcessValue{SignerFingerprints: []string{}},
			Expected: processExpected(posture.Process{}),
			Reason:   "check lists no process",
		}
	}
	want := *c.Process
	got, found := findProcess(reported, want, c.ID)
	v := Verdict{Actual: processValue(got, found), Expected: processExpected(want)}
	if why := invalidProcess(want, got, found); why != "" {
		v.Reason = why
		if _, other := findProcess(reported, want, ""); !found && other {
			v.Reason = fmt.Sprintf("%q is reported only in answer to other checks", want.Path)
		}
		return v
	}
	v.Pass = true
	return v
}

func evalProcessMulti(c posture.Check, reported []posture.ProcessPosture) Verdict {
	actual := make([]ProcessMultiValue, len(c.Processes))
	expected := make([]posture.Process, len(c.Processes))
	reasons := make([]string, len(c.Processes))
	valid := 0
	for i, want := range c.Processes {
		got, found := findProcess(reported, want, "")
		actual[i] = ProcessMultiValue{Path: want.Path, ProcessValue: processValue(got, found)}
		if found {
			actual[i].Path = got.Path
		}
		expected[i] = cloneProcess(want)
		reasons[i] = invalidProcess(want, got, found)
		if reasons[i] == "" {
			valid++
		}
	}
	v := Verdict{Actual: actual, Expected: expected}
	sem, ok := canonicalSemantic(c.Semantic)
	if !ok {
		v.Semantic = c.Semantic
		v.Reason = fmt.Sprintf("unknown semantic %q", c.Semantic)
		return v
	}
	v.Semantic = sem
	switch {
	case len(c.Processes) == 0:
		v.Reason = "check lists no process"
	case sem == posture.AllOf && valid < len(c.Processes):
		for i, why := range reasons {
			if why != "" {
				v.Reason = fmt.Sprintf("process %d: %s", i, why)
				break
			}
		}
	case sem == posture.AnyOf && valid == 0:
		v.Reason = "no listed process is valid"
	default:
		v.Pass = true
	}
	return v
}

// canonicalSemantic maps a PROCESS_MULTI semantic to posture.AllOf or
// posture.AnyOf.
func canonicalSemantic(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "allof":
		return posture.AllOf, true
	case "anyof", "oneof":
		return posture.AnyOf, true
	}
	return "", false
}

// findProcess returns the reported process at want's path: of those that
// ReportsPath (a Windows path in any case), the newest report, the one at
// exactly that path when two are as new. An older report in another case
// does not hide a newer one. A checkID keeps to the reports that answered
// that check: a PROCESS check reads the responses to its own query (the
// response's id is the check's), while a PROCESS_MULTI check, whose clients
// answer with its id for every path, reads a path's newest report whichever
// query it answered (checkID "").
func findProcess(reported []posture.ProcessPosture, want posture.Process, checkID string) (posture.ProcessPosture, bool) {
	var got posture.ProcessPosture
	found := false
	for _, p := range reported {
		if checkID != "" && p.CheckID != checkID || !ReportsPath(want, p.Path) {
			continue
		}
		if !found || p.At.After(got.At) || p.At.Equal(got.At) && p.Path == want.Path && got.Path != want.Path {
			got, found = p, true
		}
	}
	return got, found
}

// ReportsPath reports whether a process reported at path is the one want
// checks: the same path, ignoring case on Windows.
func ReportsPath(want posture.Process, path string) bool {
	if want.Path == "" {
		return false
	}
	if path == want.Path {
		return true
	}
	os, _ := posture.CanonicalOSType(want.OSType)
	return (os == posture.OSWindows || os == posture.OSWindowsServer) && strings.EqualFold(path, want.Path)
}

// invalidProcess says why the reported process does not satisfy want, or
// returns "" when it does.
func invalidProcess(want posture.Process, got posture.ProcessPosture, found bool) string {
	switch {
	case want.Path == "":
		return "empty path"
	case !found:
		return fmt.Sprintf("%q is not reported", want.Path)
	case !got.IsRunning:
		return fmt.Sprintf("%q is not running", want.Path)
	case len(want.Hashes) > 0 && !hexSet(want.Hashes)[posture.NormalizeHex(got.Hash)]:
		return fmt.Sprintf("%q: hash is not listed", want.Path)
	case len(want.SignerFingerprints) > 0 && !anyIn(got.SignerFingerprints, hexSet(want.SignerFingerprints)):
		return fmt.Sprintf("%q: no signer fingerprint is listed", want.Path)
	}
	return ""
}

func anyIn(values []string, set map[string]bool) bool {
	for _, x := range values {
		if set[posture.NormalizeHex(x)] {
			return true
		}
	}
	return false
}

func processValue(p posture.ProcessPosture, found bool) ProcessValue {
	if !found {
		return ProcessValue{SignerFingerprints: []string{}}
	}
	return ProcessValue{
		Hash:               posture.NormalizeHex(p.Hash),
		IsRunning:          p.IsRunning,
		SignerFingerprints: normalizedHex(p.SignerFingerprints),
	}
}

func cloneProcess(p posture.Process) posture.Process {
	p.Hashes = strs(p.Hashes)
	p.SignerFingerprints = strs(p.SignerFingerprints)
	return p
}
