package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandsRunAgainstPostured runs the load generator's commands end to
// end, as `task load:*` does, at a scale small enough for a test: both
// binaries built, postured, the null server and the decider each in their
// own process.
func TestCommandsRunAgainstPostured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs postured and the load generator")
	}
	bin := t.TempDir()
	postured, load := filepath.Join(bin, "postured"), filepath.Join(bin, "postured-load")
	for out, pkg := range map[string]string{postured: "../postured", load: "."} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	small := []string{"--postured", postured, "--runs", "1", "--duration", "300ms", "--clients", "4"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"ingest"}, small...), "median: null "},
		{append([]string{"decisions", "--identities", "500", "--settle", "0"}, small...), "median of 1 runs: idle p50 "},
		// Every decision a new session: the decider fails if postured
		// answers a session it ended.
		{append([]string{"decisions", "--identities", "500", "--settle", "0", "--new-sessions"}, small...), "median of 1 runs: idle p50 "},
	} {
		out, err := exec.CommandContext(t.Context(), load, tc.args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("postured-load %s: %v\n%s", strings.Join(tc.args, " "), err, out)
		}
	}
}
