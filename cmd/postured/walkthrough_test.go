package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// walkthroughBlock is the shell block of the README's walkthrough: the
// first ```sh block after the marker comment.
func walkthroughBlock(t *testing.T) string {
	t.Helper()
	readme := string(readRepoFile(t, "README.md"))
	_, after, ok := strings.Cut(readme, "<!-- walkthrough: TestReadmeWalkthrough runs the next block -->")
	if !ok {
		t.Fatal("README.md has no walkthrough marker")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("no ```sh block after the walkthrough marker")
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatal("the walkthrough block does not end")
	}
	return block
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
