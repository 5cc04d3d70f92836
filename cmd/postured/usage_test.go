package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

// runMain runs a command line as the binary does and returns its exit code,
// stdout and stderr.
func runMain(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut lockedBuffer
	code = mainCode(t.Context(), args, streams{out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// TestUsageErrors: a wrong command line is one line saying what is wrong
// and one saying where help is, exit code 2; the full help only on --help.
func TestUsageErrors(t *testing.T) {
	data := "--data-dir=" + t.TempDir()
	for _, c := range []struct {
		args       []string
		error, cmd string
	}{
		{nil, "expected one of", "postured"},
		{[]string{"serv"}, "unexpected argument serv", "postured"},
		{[]string{"explain", "--identity", "i"}, `missing flags: --service=STRING`, "postured explain"},
		{[]string{"explain", "--identity", "i", "--service", "s", "--bogus"}, "unknown flag --bogus", "postured explain"},
		{[]string{"explain", "--identity", "i", "--service", "s", "--type", "host", data}, `--type "host": want Dial or Bind`, "postured explain"},
		{[]string{"serve", "--log-format", "yaml"}, `--log-format must be one of "text","json" but got "yaml"`, "postured serve"},
		{[]string{"explain", "--identity", "i", "--service", "s", "--at", "yesterday", data},
			`--at "yesterday": want an RFC 3339 time (2026-11-22T10:32:00Z, 2026-11-22T11:32:00+01:00) or a duration from now (-2h, -30m)`, "postured explain"},
		{[]string{"audit", "identity", "i", "--since", "22/11/2026", data}, `--since "22/11/2026": want an RFC 3339 time`, "postured audit identity"},
		{[]string{"replay", "--out", t.TempDir(), "--until", "10:32", data}, `--until "10:32": want an RFC 3339 time`, "postured replay"},
		{[]string{"replay", "--to-seq", "10", "--until", "-1h", data}, "--to-seq and --until can't be used together", "postured replay"},
		{[]string{"audit", "identity", "i", "--since", "2026-11-24T06:00:00Z", "--until", "2026-11-24T05:00:00Z", data}, "--until is before --since", "postured audit identity"},
		{[]string{"events", "tail", "--type", "posture.recorded,no.such.type", data}, `--type "no.such.type": not an event type (`, "postured events tail"},
		// serve's values are checked before anything is opened, and none
		// silently stands for a default.
		{[]string{"serve", "--api-session-timeout", "0s", data}, "--api-session-timeout must be at least 1s", "postured serve"},
		{[]string{"serve", "--trusted-proxies", "notanip", data}, `--trusted-proxies: "notanip"`, "postured serve"},
		{[]string{"serve", "--checkpoint-every", "60000", data}, "--checkpoint-every must be 1 to 50000 events, not 60000", "postured serve"},
		{[]string{"serve", "--checkpoint-every", "0", data}, "--checkpoint-every must be 1 to 50000 events, not 0", "postured serve"},
		{[]string{"serve", "--past-moments", "0", data}, "--past-moments must be at least 1", "postured serve"},
		{[]string{"serve", "--stream-replicas", "0", data}, "--stream-replicas must be 1 to 5", "postured serve"},
		{[]string{"serve", "--stream-replicas", "3", data}, "--stream-replicas 3 needs a NATS cluster (--nats-url)", "postured serve"},
		{[]string{"serve", "--advertise", "nohostport", data}, `--advertise "nohostport": want host:port`, "postured serve"},
		{[]string{"serve", "--nats-listen", "nohostport", data}, `--nats-listen "nohostport": want host:port`, "postured serve"},
		{[]string{"serve", "--metrics-listen", "bad", data}, `--metrics-listen "bad": want host:port`, "postured serve"},
		{[]string{"serve", "--listen", "127.0.0.1:99999", data}, `--listen "127.0.0.1:99999": the port must be 0 to 65535`, "postured serve"},
		{[]string{"serve", "--disk-reserve-mib=-1", data}, "--disk-reserve-mib may not be negative", "postured serve"},
		// A negative number needs no "=": it is the flag's value, which
		// the command checks.
		{[]string{"serve", "--max-connections", "-1", data}, "--max-connections and --max-connections-per-source may not be negative (0: no cap)", "postured serve"},
		{[]string{"serve", "--disk-reserve-mib", "-1", data}, "--disk-reserve-mib may not be negative", "postured serve"},
		{[]string{"serve", "--mfa-grace", "-5m", data}, "--mfa-grace must be at least 1s", "postured serve"},
		{[]string{"backtest", "--candidate", "usage_test.go", "--changes", "-1", data}, "--changes may not be negative (0: all), not -1", "postured backtest"},
		{[]string{"backtest", "--candidate", "usage_test.go", "--from", "720h", data}, `--from "720h" is in the future`, "postured backtest"},
		{[]string{"events", "skip", "--seq", "3", "--reason", " ", data}, "--reason is empty", "postured events skip"},
		{[]string{"events", "tail", "--nats-url", "tls://127.0.0.1:1", "--nats-nkey", "/nonexistent.nk"}, "--nats-nkey: open /nonexistent.nk", "postured events tail"},
		{[]string{"audit", "verify", "--max-problems", "-1", data}, "--max-problems must be at least 1, not -1", "postured audit verify"},
		{[]string{"serve", "--webhook-max-backoff", "1s", data}, "--webhook-max-backoff may not be under --webhook-backoff", "postured serve"},
		{[]string{"serve", "--read-timeout", "0s", data}, "--read-timeout, --write-timeout and --idle-timeout must be at least 1s", "postured serve"},
		{[]string{"serve", "--idle-timeout", "1ms", data}, "--read-timeout, --write-timeout and --idle-timeout must be at least 1s", "postured serve"},
		{[]string{"serve", "--admin-username", "ab", data}, "--admin-username must be 4 to 100 characters", "postured serve"},
	} {
		code, stdout, stderr := runMain(t, c.args...)
		lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
		if code != exitUsage || stdout != "" || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], "postured: error: ") || !strings.Contains(lines[0], c.error) ||
			lines[1] != "Run '"+c.cmd+" --help' for usage." {
			t.Errorf("postured %q: exit %d, stdout %q, stderr:\n%s\nwant exit 2, %q and the hint for %q", c.args, code, stdout, stderr, c.error, c.cmd)
		}
	}
	// POSTURED_<FLAG> sets flags, but not --version: a POSTURED_VERSION in
	// a service's environment does not turn serve into printing a version.
	t.Setenv("POSTURED_VERSION", "1.4.0")
	if code, stdout, stderr := runMain(t, "serve", "--past-moments", "0", data); code != exitUsage || stdout != "" || !strings.Contains(stderr, "--past-moments") {
		t.Errorf("serve with POSTURED_VERSION set: exit %d, %q %q", code, stdout, stderr)
	}
	// Help is asked for: all of it, on stdout, exit 0.
	if code, stdout, _ := runMain(t, "explain", "--help"); code != 0 || !strings.Contains(stdout, "Usage: postured explain") || !strings.Contains(stdout, "--at=STRING") {
		t.Errorf("explain --help: exit %d\n%s", code, stdout)
	}
	// A failing command (not a usage error) exits 1.
	if code, _, stderr := runMain(t, "audit", "identity", "nosuch", data); code != exitFailed || !strings.HasPrefix(stderr, "postured: ") {
		t.Errorf("audit of an unknown identity: exit %d, %q", code, stderr)
	}
	// A first admin's password that could never log in is refused before
	// the data directory is made.
	fresh := filepath.Join(t.TempDir(), "data")
	t.Setenv("POSTURED_ADMIN_PASSWORD", "abc")
	if code, _, stderr := runMain(t, "serve", "--data-dir", fresh); code != exitUsage || !strings.Contains(stderr, "POSTURED_ADMIN_PASSWORD must be 5 to 100 characters") || strings.Contains(stderr, "abc") {
		t.Errorf("serve with a 3-character admin password: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused serve made its data directory: %v", err)
	}
	// A value checked as the API checks it is said as a command line's
	// error, not in the API's words.
	if code, _, stderr := runMain(t, "admin", "recover", "--data-dir", fresh); code != exitUsage ||
		!strings.Contains(stderr, "POSTURED_ADMIN_PASSWORD: must be between 5 and 100 characters") || strings.Contains(stderr, posture.CodeCouldNotValidate) {
		t.Errorf("admin recover with a 3-character password: exit %d, %q", code, stderr)
	}
}

// TestVersionCommands: `postured version` and `postured --version` print
// the same line, from the build information (a test binary has no VCS
// stamp: TestReleaseDeb in cmd/release checks a stamped one).
func TestVersionCommands(t *testing.T) {
	want := readBuild().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		if code, stdout, stderr := runMain(t, args...); code != 0 || stdout != want || stderr != "" {
			t.Errorf("postured %s: exit %d, %q %q, want %q", args[0], code, stdout, stderr, want)
		}
	}
	if !strings.HasPrefix(want, "postured ") || !strings.Contains(want, "(revision ") || strings.Contains(want, "0.1.0-dev") {
		t.Errorf("version line %q", want)
	}
	// /version answers the same revision, and the version as a semver:
	// a release's own, v0.0.0 for any other build.
	for in, want := range map[string]string{"v1.2.3": "v1.2.3", "(devel)": "v0.0.0", "v0.0.0-20261123221500-a203720abcde+dirty": "v0.0.0",
		"v1.2.4-0.20261123221500-a203720abcde": "v0.0.0", "v1.2.3+dirty": "v0.0.0", "": "v0.0.0"} {
		if got := wireVersion(in); got != want {
			t.Errorf("wireVersion(%q) = %q, want %q", in, got, want)
		}
	}
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	data, _ := n.do(t, http.MethodGet, "/version", "", nil).envelope(t)
	var v struct{ Version, Revision, BuildDate string }
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if b := readBuild(); v.Version != wireVersion(b.Version) || v.Revision != b.Revision || v.BuildDate != b.Time {
		t.Errorf("/version %+v, want %+v", v, b)
	}
}

// TestCompletion prints the completion scripts of the three shells.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -o bashdefault -C ",
		"zsh":  "bashcompinit",
		"fish": `complete -f -c postured -a "(__complete_postured)"`,
	} {
		code, stdout, stderr := runMain(t, "completion", "-c", shell)
		if code != 0 || !strings.Contains(stdout, want) || stderr != "" {
			t.Errorf("completion -c %s: exit %d, %q %q, want %q", shell, code, stdout, stderr, want)
		}
		// Not on a terminal (source <(postured completion bash)): the
		// script, as with -c.
		if code, stdout, _ := runMain(t, "completion", shell); code != 0 || !strings.Contains(stdout, want) {
			t.Errorf("completion %s into a pipe: exit %d, %q", shell, code, stdout)
		}
	}
	if code, _, stderr := runMain(t, "completion", "tcsh"); code != exitUsage || !strings.Contains(stderr, "bash, zsh or fish") || strings.Contains(stderr, `""`) {
		t.Errorf("completion tcsh: exit %d, %q", code, stderr)
	}
	// Without a shell named, the one $SHELL names.
	t.Setenv("SHELL", "/usr/local/bin/fish")
	if code, stdout, _ := runMain(t, "completion"); code != 0 || !strings.Contains(stdout, `complete -f -c postured -a "(__complete_postured)"`) {
		t.Errorf("completion with SHELL=fish: exit %d, %q", code, stdout)
	}
	// The shell asking for completions of the command's argument.
	t.Setenv("COMP_LINE", "postured completion ")
	t.Setenv("COMP_POINT", "20")
	if code, stdout, _ := runMain(t); code != 0 || stdout != "bash\nzsh\nfish\n" {
		t.Errorf("completing completion's argument: exit %d, %q", code, stdout)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(h, m, s, ns int) time.Time { return time.Date(2026, 11, 22, h, m, s, ns, time.UTC) }
	for _, c := range []struct {
		in   string
		end  bool
		want time.Time
	}{
		{"", true, time.Time{}},
		{"-2h", true, at(10, 0, 0, 0)},
		{"-1h30m", false, at(10, 30, 0, 0)},
		{"2026-11-22T10:32:00Z", false, at(10, 32, 0, 0)},
		{"2026-11-22T10:32:00Z", true, at(10, 32, 0, 999999999)},      // the whole second
		{"2026-11-22T11:32:00+01:00", true, at(10, 32, 0, 999999999)}, // another zone
		{"2026-11-22T10:32:00.5Z", true, at(10, 32, 0, 599999999)},    // the end of its last digit
		{"2026-11-22T10:32:00.000Z", true, at(10, 32, 0, 999999)},     // a millisecond, as the API writes times
		{"2026-11-22T10:32:00.000000007Z", true, at(10, 32, 0, 7)},    // nanoseconds: that instant
		{"2026-11-22T10:32:00.5Z", false, at(10, 32, 0, 500000000)},   // a start: as written
	} {
		got, err := parseTime("at", c.in, c.end, now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("parseTime(%q, end=%v) = %v, %v; want %v", c.in, c.end, got, err, c.want)
		}
	}
	if _, err := parseTime("at", "2026-11-22 10:32", true, now); !errors.As(err, new(usageError)) {
		t.Errorf("a time without T and zone: %v is not a usage error", err)
	}
}

// TestWholeSecondIncludesItsEvents: --at and --until written in whole
// seconds include the events of that second, the way an operator copies a
// time from a table.
func TestWholeSecondIncludesItsEvents(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	n := startTestNode(t, cfg)
	st := newStory(t, n)
	st.play(t)
	n.srv.Close()
	n.Close()
	data := "--data-dir=" + cfg.DataDir

	timeline := func(args ...string) []posture.HistoryEntry {
		t.Helper()
		out, err := command(t, append([]string{"audit", "identity", st.ep.id, data, "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var es []posture.HistoryEntry
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var e posture.HistoryEntry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			es = append(es, e)
		}
		return es
	}
	all := timeline()
	last := all[len(all)-1] // the session created after the good report
	second := last.At.UTC().Truncate(time.Second).Format(time.RFC3339)
	if got := timeline("--until", second); len(got) != len(all) {
		t.Errorf("audit --until %s (the second of the last entry, %s): %d entries, want %d", second, last.At.Format(time.RFC3339Nano), len(got), len(all))
	}
	var e posture.Explanation
	js, err := command(t, "explain", "--identity", st.ep.id, "--service", st.svc, "--at", second, "--json", data)
	if err != nil || json.Unmarshal([]byte(js), &e) != nil || e.Decision != posture.DecisionGranted {
		t.Errorf("explain --at %s (the second access was granted in): %v\n%s", second, err, js)
	}
}

// TestTextOutputIsPrintable: what endpoints report and admins name reaches
// text tables escaped, so that no value forges a line or drives the
// terminal of whoever reads an audit, an explanation or a skip list.
func TestTextOutputIsPrintable(t *testing.T) {
	evil := "Windows\x1b[31mRED\a 6.1\n\rINJECTED LINE\u202e"
	var out bytes.Buffer
	if err := writeHistory(&out, []posture.HistoryEntry{{Seq: 7, At: time.Now(), Kind: posture.HistoryPosture, Event: posture.TypePostureRecorded,
		APISessionID: "apis\x1b", Summary: evil}}, false); err != nil {
		t.Fatal(err)
	}
	if err := writeExplanation(&out, posture.Explanation{Type: posture.Dial, ServiceName: evil, Decision: "denied",
		APISessions: []posture.SessionExplanation{{APISessionID: "a", Policies: []posture.PolicyExplanation{{PolicyName: evil,
			Checks: []posture.CheckExplanation{{PostureCheckName: evil, ActualValue: json.RawMessage("{\"build\":\"b\u202e\"}")}}}}}}}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if strings.ContainsAny(text, "\x1b\a\r\u202e") || strings.Contains(text, "\nINJECTED") || !strings.Contains(text, `Windows\x1b[31mRED\a 6.1\n\rINJECTED LINE\u202e`) {
		t.Fatalf("text output:\n%q", text)
	}
}
