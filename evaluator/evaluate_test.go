package evaluator

// Scenario tests: testdata/<kind>/*.txt, one folder per check kind. Each case
// is
//
//	eval now=<RFC 3339 instant>
//	check: <posture.Check as JSON>
//	data: <testData as JSON>
//	----
//	pass: true|false
//	validUntil: <RFC 3339 instant>|none
//	reason: ...            (only when set)
//	semantic: ...          (only when set)
//	actual: <JSON>
//	expected: <JSON>
//	criteria: <JSON>       (only when set)
//
// A JSON value may continue on the following lines, up to the next "check:",
// "data:" or "----". Unknown JSON fields are errors, so typos do not go
// unnoticed. Regenerate the expected outputs with
//
//	go test ./evaluator/ -run TestEvaluate -rewrite

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	posture "github.com/seed-0809debe/posture"
)

// kinds are the testdata folders, one per check kind; each must hold cases.
var kinds = []string{"os", "mac", "domain", "process", "process_multi", "mfa", "stale"}

// testData is the JSON form of Data in scenario files. MFAGrace is a Go
// duration ("5m", "90s"); when absent it is DefaultMFAGrace.
type testData struct {
	Identity posture.IdentityPosture `json:"identity"`
	Session  posture.SessionPosture  `json:"session"`
	MFAGrace string                  `json:"mfaGrace"`
}

func (td testData) data() (Data, error) {
	d := Data{Identity: td.Identity, Session: td.Session, MFAGrace: DefaultMFAGrace}
	if td.MFAGrace != "" {
		g, err := time.ParseDuration(td.MFAGrace)
		if err != nil {
			return Data{}, err
		}
		d.MFAGrace = g
	}
	return d, nil
}

func TestEvaluate(t *testing.T) {
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range dirs {
		if e.IsDir() {
			found = append(found, e.Name())
		}
	}
	for _, k := range kinds {
		if !slices.Contains(found, k) {
			t.Errorf("testdata/%s is missing", k)
		}
	}
	for _, kind := range found {
		t.Run(kind, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join("testdata", kind, "*.txt"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no scenario files in testdata/%s (%v)", kind, err)
			}
			for _, f := range files {
				t.Run(filepath.Base(f), func(t *testing.T) { runTestFile(t, f, runEval) })
			}
		})
	}
}

// evalInput is the parsed input of an eval case.
type evalInput struct {
	check posture.Check
	data  Data
	now   time.Time
	// raw JSON, for the fuzz corpus
	checkJSON, dataJSON string
}

func parseEvalInput(tc *testCase) (evalInput, error) {
	var in evalInput
	if tc.Cmd != "eval" {
		return in, fmt.Errorf("unknown command %q", tc.Cmd)
	}
	for k := range tc.Args {
		if k != "now" {
			return in, fmt.Errorf("unknown argument %q", k)
		}
	}
	now, err := time.Parse(time.RFC3339Nano, tc.Args["now"])
	if err != nil {
		return in, fmt.Errorf("now=: %v", err)
	}
	in.now = now

	fields := map[string]*strings.Builder{"check": {}, "data": {}}
	var cur *strings.Builder
	for _, line := range strings.Split(tc.Input, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && fields[k] != nil {
			if fields[k].Len() > 0 {
				return in, fmt.Errorf("%s: given twice", k)
			}
			cur = fields[k]
			cur.WriteString(strings.TrimSpace(v) + "\n")
			continue
		}
		if cur == nil {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return in, fmt.Errorf("input line %q is neither check: nor data:", line)
		}
		cur.WriteString(line + "\n")
	}
	in.checkJSON, in.dataJSON = fields["check"].String(), fields["data"].String()
	if in.checkJSON == "" {
		return in, fmt.Errorf("no check:")
	}
	if err := strictJSON(in.checkJSON, &in.check); err != nil {
		return in, fmt.Errorf("check: %v", err)
	}
	var td testData
	if in.dataJSON != "" {
		if err := strictJSON(in.dataJSON, &td); err != nil {
			return in, fmt.Errorf("data: %v", err)
		}
	}
	if in.data, err = td.data(); err != nil {
		return in, fmt.Errorf("data: mfaGrace: %v", err)
	}
	return in, nil
}

func strictJSON(s string, v any) error {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}

func runEval(t *testing.T, tc *testCase) string {
	in, err := parseEvalInput(tc)
	if err != nil {
		t.Fatalf("%s: %v", tc.Pos, err)
	}
	v := Evaluate(in.check, in.data, in.now)
	checkInvariants(t, v, in.now)
	return formatVerdict(v)
}

// checkInvariants holds for every verdict: a failing verdict has no deadline,
// a passing one is not past its deadline, and a deadline is JSON-encodable.
func checkInvariants(t *testing.T, v Verdict, now time.Time) {
	t.Helper()
	if v.ValidUntil.IsZero() {
		return
	}
	if !v.Pass {
		t.Errorf("failing verdict with ValidUntil %v", v.ValidUntil)
	}
	if now.After(v.ValidUntil) {
		t.Errorf("passing verdict at %v is past its ValidUntil %v", now, v.ValidUntil)
	}
	if _, err := v.ValidUntil.MarshalJSON(); err != nil {
		t.Errorf("ValidUntil %v: %v", v.ValidUntil, err)
	}
}

func formatVerdict(v Verdict) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "pass: %t\n", v.Pass)
	if v.ValidUntil.IsZero() {
		b.WriteString("validUntil: none\n")
	} else {
		fmt.Fprintf(&b, "validUntil: %s\n", v.ValidUntil.UTC().Format(time.RFC3339Nano))
	}
	if v.Reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", v.Reason)
	}
	if v.Semantic != "" {
		fmt.Fprintf(&b, "semantic: %s\n", v.Semantic)
	}
	if v.Stale {
		b.WriteString("stale: true\n")
	}
	fmt.Fprintf(&b, "actual: %s\n", mustJSON(v.Actual))
	fmt.Fprintf(&b, "expected: %s\n", mustJSON(v.Expected))
	if v.Criteria != nil {
		fmt.Fprintf(&b, "criteria: %s\n", mustJSON(v.Criteria))
	}
	return b.String()
}

// mustJSON is compact JSON without HTML escaping, so that ranges read as
// ">=1.2.7" and not "\u003e=1.2.7".
func mustJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "error: " + err.Error()
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func TestEvaluateUnsupportedType(t *testing.T) {
	for _, typ := range []posture.CheckType{"", "FOO", "os", "ENDPOINT_STATE"} {
		v := Evaluate(posture.Check{TypeID: typ}, Data{}, time.Unix(0, 0))
		if v.Pass || !v.ValidUntil.IsZero() {
			t.Errorf("%q: got pass=%t validUntil=%v, want a plain failure", typ, v.Pass, v.ValidUntil)
		}
		got := formatVerdict(v)
		want := fmt.Sprintf("pass: false\nvalidUntil: none\nreason: unsupported check type\n"+
			"actual: %q\nexpected: [\"OS\",\"MAC\",\"MFA\",\"PROCESS\",\"PROCESS_MULTI\",\"DOMAIN\"]\n", typ)
		if got != want {
			t.Errorf("%q:\ngot  %s\nwant %s", typ, got, want)
		}
	}
}

// TestEvaluateZeroData evaluates every check type against empty data: each
// fails, with non-nil slices in its values.
func TestEvaluateZeroData(t *testing.T) {
	for _, typ := range posture.CheckTypes {
		v := Evaluate(posture.Check{TypeID: typ}, Data{}, time.Unix(0, 0))
		if v.Pass {
			t.Errorf("%s: passes with no data", typ)
		}
		if s := formatVerdict(v); strings.Contains(s, "null") && typ != posture.CheckMFA {
			t.Errorf("%s: null in values:\n%s", typ, s)
		}
	}
}
