package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// jsonLines decodes every line of a log; a line that is not a JSON object
// fails the test.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON line on stderr with --log-format json: %q", line)
			continue
		}
		recs = append(recs, rec)
	}
	return recs
}

// TestJSONLogEveryLine runs the binary with --log-format json (as the
// systemd unit does) through a first start, requests and a stop: every line
// on stderr is a JSON object, the listening address and the file of the
// generated admin password included, and the password in it logs in.
func TestJSONLogEveryLine(t *testing.T) {
	p := startBinary(t, t.TempDir(), "POSTURED_LOG_FORMAT=json", "POSTURED_LOG_LEVEL=debug")
	var password string
	var sawListening, sawSettings bool
	for _, rec := range jsonLines(t, p.log()) {
		switch rec["msg"] {
		case "settings recorded in the log":
			sawSettings = rec["mfaGrace"] == "5m0s" && rec["apiSessionTimeout"] == "30m0s"
		case "listening":
			sawListening = strings.HasPrefix(rec["url"].(string), "https://127.0.0.1:") && rec["advertise"] != nil
		case "default admin created with a generated password, in the file":
			file, _ := rec["file"].(string)
			password = readPasswordFile(t, file)
		}
	}
	if !sawListening || password == "" || !sawSettings {
		t.Fatalf("no listening record, no password record or no settings in durations:\n%s", p.log())
	}
	tok, err := p.login("admin", password)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body, err := p.request(http.MethodGet, "/edge/management/v1/nosuch", tok, nil); err != nil || status != http.StatusNotFound {
		t.Fatalf("unknown route: %d %s %v", status, body, err)
	}
	p.stop(t)
	jsonLines(t, p.log())
	if !strings.Contains(p.log(), `"msg":"shutting down"`) {
		t.Errorf("no shutdown record:\n%s", p.log())
	}

	// A start that fails says why in JSON too, and exits 1.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "serve", "--data-dir", file, "--listen", "127.0.0.1:0", "--log-format", "json")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitFailed {
		t.Fatalf("serve with a file as data directory: exit %d, %v\n%s", code, err, out)
	}
	recs := jsonLines(t, string(out))
	if last := recs[len(recs)-1]; last["msg"] != "postured stopped" || !strings.Contains(last["err"].(string), "data directory") {
		t.Errorf("last record %v, want the reason", last)
	}
}

// TestOpenDataDirectoryIsSaid: a data directory that other users may read
// (made by someone else with a wider mode) is left as it is and said at
// start; postured's own (0700) is not.
func TestOpenDataDirectoryIsSaid(t *testing.T) {
	const warning = "the data directory is open to other users: chmod 700 it (under systemd: StateDirectoryMode=0700)"
	for _, mode := range []os.FileMode{0o755, 0o700} {
		dir := t.TempDir()
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		p := startBinary(t, dir, "POSTURED_LOG_FORMAT=json")
		p.stop(t)
		said := false
		for _, rec := range jsonLines(t, p.log()) {
			said = said || rec["msg"] == warning && rec["mode"] == "0755" && rec["level"] == "WARN"
		}
		if said != (mode == 0o755) {
			t.Errorf("data directory %04o: warned %v:\n%s", mode, said, p.log())
		}
	}
}
