package evaluator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	posture "github.com/seed-0809debe/posture"
)

// FuzzEvaluate checks that no check and no data make Evaluate or the MFA
// helpers panic, and that every verdict keeps the ValidUntil contract. The
// corpus is seeded with every scenario of testdata. Besides the JSON inputs,
// the fuzzer drives the values that reach the version parser and the clock
// directly, since mutated JSON rarely stays valid.
//
//	go test ./evaluator/ -run '^$' -fuzz FuzzEvaluate -fuzztime 30s -parallel 1
func FuzzEvaluate(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.txt"))
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		chunks, err := parseTestFile(file, string(src))
		if err != nil {
			f.Fatal(err)
		}
		for _, c := range chunks {
			if c.tc == nil {
				continue
			}
			in, err := parseEvalInput(c.tc)
			if err != nil {
				f.Fatalf("%s: %v", c.tc.Pos, err)
			}
			f.Add([]byte(in.checkJSON), []byte(in.dataJSON), "", "", "", in.now.UnixNano(), int64(in.data.MFAGrace))
		}
	}
	f.Add([]byte(`{"typeId":"OS","operatingSystems":[{"type":"Windows"}]}`), []byte(`{}`), "10.0", "19045", ">=10.0.0 <11", int64(0), int64(-1))
	f.Add([]byte(`{"typeId":"MFA","timeoutSeconds":9223372036854775807,"promptOnWake":true}`),
		[]byte(`{"session":{"passedMfaAt":"9999-12-31T23:59:59+23:00","wokenAt":"0000-01-01T00:00:00Z"}}`),
		"", "", "", int64(-1<<63), int64(1<<63-1))

	f.Fuzz(func(t *testing.T, checkJSON, dataJSON []byte, version, build, rng string, nowNanos, grace int64) {
		var c posture.Check
		_ = json.Unmarshal(checkJSON, &c) // whatever decoded is a check
		var td testData
		_ = json.Unmarshal(dataJSON, &td)
		if version != "" || build != "" {
			td.Identity.OS = &posture.OSPosture{Type: "Windows", Version: version, Build: build}
		}
		if rng != "" {
			c.OperatingSystems = append(c.OperatingSystems, posture.OperatingSystem{Type: "windows", Versions: []string{rng}})
		}
		d := Data{Identity: td.Identity, Session: td.Session, MFAGrace: time.Duration(grace)}
		now := time.Unix(0, nowNanos)

		v := Evaluate(c, d, now)
		checkInvariants(t, v, now)
		if v.Pass && v.Reason != "" {
			t.Errorf("passing verdict with a reason: %q", v.Reason)
		}
		if !v.Pass && v.Reason == "" {
			t.Error("failing verdict without a reason")
		}
		if v.Pass != Evaluate(c, d, now).Pass {
			t.Error("Evaluate is not deterministic")
		}

		timeout, remaining := MFATimeout(c), MFATimeoutRemaining(c, d, now)
		if timeout != NoTimeout && timeout <= 0 {
			t.Errorf("MFATimeout = %d", timeout)
		}
		if remaining < NoTimeout || (timeout == NoTimeout && remaining != NoTimeout) || (timeout > 0 && remaining > timeout) {
			t.Errorf("MFATimeoutRemaining = %d with timeout %d", remaining, timeout)
		}
		_, _ = NormalizeVersion(version, build)
		_, _ = ParseVersionRange(rng)
	})
}
