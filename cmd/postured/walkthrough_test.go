package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeBlock is the first ```sh block of README.md after a marker comment.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	readme := string(readRepoFile(t, "README.md"))
	_, after, ok := strings.Cut(readme, marker)
	if !ok {
		t.Fatalf("README.md has no marker %q", marker)
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatalf("no ```sh block after the marker %q", marker)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("the block after the marker %q does not end", marker)
	}
	return block
}

// walkthroughBlock is the shell block of the README's walkthrough.
func walkthroughBlock(t *testing.T) string {
	return readmeBlock(t, "<!-- walkthrough: TestReadmeWalkthrough runs the next block -->")
}

// TestReadmeWalkthrough runs the README's walkthrough as it is, with bash,
// curl and jq, against the real binary started as the README says (the
// only change: the address, since the test listens on a free port), and
// checks each step's answer.
func TestReadmeWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" { // .ci/run installs them
				t.Fatalf("the walkthrough needs %s", tool)
			}
			t.Skipf("the walkthrough needs %s", tool)
		}
	}
	block := walkthroughBlock(t)
	dir := t.TempDir()
	p := startBinary(t, filepath.Join(dir, "data"), "POSTURED_ADMIN_PASSWORD=change-me-please")
	if !strings.Contains(block, "https://localhost:1280/") {
		t.Fatal("the walkthrough does not use https://localhost:1280")
	}
	script := strings.ReplaceAll(block, "https://localhost:1280/", p.base+"/")

	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("walkthrough: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	t.Logf("walkthrough output:\n%s", out)

	// One line per step that prints, in this order.
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	id := `"id":"[0-9a-zA-Z-]+"`
	want := []struct{ step, re string }{
		{"4. service policy created", `^\{.*` + id},
		{"5. authenticator created", `^\{.*` + id},
		{"7. old OS reported", `^\[?\{.*`},
		{"8. session refused", `^\{"code":"INVALID_POSTURE","cause":\{"data":\{"[^"]+":\[\{` + id + `,"typeId":"OS","isPassing":false\}\]\}`},
		{"9. failed service request", `^\{.*"6\.1\.7601".*>=10\.0\.19041`},
		{"9. explanation", `^"denied"$`},
		{"10. new OS reported", `^\[?\{.*`},
		{"10. session", `^\{` + id + `,"type":"Dial","service":"crm"\}$`},
	}
	if len(lines) != len(want) {
		t.Fatalf("walkthrough printed %d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile(w.re).MatchString(lines[i]) {
			t.Errorf("step %s: %q does not match %s", w.step, lines[i], w.re)
		}
	}
	p.stop(t)
}

// rolloutBlock is the shell block of the README's "roll out a new check
// safely".
func rolloutBlock(t *testing.T) string {
	return readmeBlock(t, "<!-- rollout: TestReadmeRolloutWalkthrough runs the next block after the walkthrough's -->")
}

// TestReadmeRolloutWalkthrough runs the README's walkthrough and then its
// "roll out a new check safely" in the same shell, against the real binary:
// a report-only check grants a would-deny, the client sees the check's
// verdict and message, the admin reads the would-deny and the impact, and
// at enforceAt the check enforces and the session is gone.
func TestReadmeRolloutWalkthrough(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq", "date"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("the walkthrough needs %s", tool)
			}
			t.Skipf("the walkthrough needs %s", tool)
		}
	}
	first, rollout := walkthroughBlock(t), rolloutBlock(t)
	dir := t.TempDir()
	p := startBinary(t, filepath.Join(dir, "data"), "POSTURED_ADMIN_PASSWORD=change-me-please")
	script := strings.ReplaceAll(first+"\necho ---rollout---\n"+rollout, "https://localhost:1280/", p.base+"/")
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("walkthrough: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	_, after, ok := strings.Cut(string(out), "---rollout---\n")
	if !ok {
		t.Fatalf("the walkthrough's first block failed:\n%s", out)
	}
	t.Logf("rollout output:\n%s", after)
	lines := strings.Split(strings.TrimSpace(after), "\n")
	want := []struct{ step, re string }{
		{"12. session granted", `^\{"type":"Dial","service":"crm"\}$`},
		{"13. the client's query", `^\{"dialable":true,"check":\{"isPassing":false,"enforcement":"report","message":"Windows 11 is required from \S+"\}\}$`},
		{"14. would-deny", `^\{"service":"crm","checks":\[\{"postureCheckName":"windows-11","actualValue":\{"type":"Windows","version":"10\.0\.19045".*>=10\.0\.22000`},
		{"14. impact", `^\{"failingCount":1,"identities":\[\{"identityName":"alice","failingSince":"[^"]+","loses":\["crm"\]\}\]\}$`},
		{"15. enforced", `^"enforce"$`},
		{"15. sessions", `^0$`},
		{"15. refused", `^"INVALID_POSTURE"$`},
	}
	if len(lines) != len(want) {
		t.Fatalf("the rollout printed %d lines, want %d:\n%s", len(lines), len(want), after)
	}
	for i, w := range want {
		if !regexp.MustCompile(w.re).MatchString(lines[i]) {
			t.Errorf("step %s: %q does not match %s", w.step, lines[i], w.re)
		}
	}
	p.stop(t)
}
