package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReleaseDeb builds the linux/amd64 artifacts, checks the Debian
// package with dpkg-deb (its files, its control fields, its scripts), runs
// the packaged binary's version commands and checks SHA256SUMS.
func TestReleaseDeb(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release")
	}
	for _, tool := range []string{"dpkg-deb", "git", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	out := filepath.Join(t.TempDir(), "dist")
	arts, err := Release(t.Context(), Options{Root: "../..", Out: out, Targets: []string{"linux/amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	var deb, bin string
	for _, a := range arts {
		switch {
		case strings.HasSuffix(a, ".deb"):
			deb = a
		case strings.HasPrefix(filepath.Base(a), "postured_") && strings.HasSuffix(a, "_linux_amd64"):
			bin = a
		}
	}
	if deb == "" || bin == "" || len(arts) != 3 {
		t.Fatalf("artifacts %q: want a binary, a .deb and SHA256SUMS", arts)
	}

	dpkg := func(args ...string) string {
		t.Helper()
		b, err := exec.Command("dpkg-deb", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("dpkg-deb %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	// The files, with their modes.
	listing := dpkg("--contents", deb)
	for _, want := range []struct{ mode, path string }{
		{"-rwxr-xr-x", "." + debBinary},
		{"-rw-r--r--", "." + debUnit},
		{"-rw-r--r--", "." + debSysusers},
	} {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(want.mode) + ` .* ` + regexp.QuoteMeta(want.path) + `$`).MatchString(listing) {
			t.Errorf("%s: no %s %s in:\n%s", filepath.Base(deb), want.mode, want.path, listing)
		}
	}
	// The control fields.
	for field, want := range map[string]string{"Package": "postured", "Architecture": "amd64"} {
		if got := strings.TrimSpace(dpkg("--field", deb, field)); got != want {
			t.Errorf("%s: %s %q, want %q", filepath.Base(deb), field, got, want)
		}
	}
	if v := strings.TrimSpace(dpkg("--field", deb, "Version")); !regexp.MustCompile(`^[0-9]`).MatchString(v) {
		t.Errorf("Version %q does not start with a digit", v)
	}

	// The unfolded package: the unit runs the packaged binary as the user
	// the sysusers.d entry creates, and postinst creates it.
	root := t.TempDir()
	dpkg("--extract", deb, root)
	ctrl := t.TempDir()
	dpkg("--control", deb, ctrl)
	unit := readFile(t, filepath.Join(root, debUnit))
	for _, want := range []string{"ExecStart=" + debBinary + " serve", "User=postured", "StateDirectory=postured", "StateDirectoryMode=0700", "UMask=0077"} {
		if !strings.Contains(unit, want) {
			t.Errorf("packaged unit has no %q:\n%s", want, unit)
		}
	}
	// systemd's own measure of the sandbox: 8.5 EXPOSED before it was
	// hardened, 1.7 after (the threshold is in tenths: 3.0).
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		if b, err := exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=30", filepath.Join(root, debUnit)).CombinedOutput(); err != nil {
			t.Errorf("systemd-analyze security: %v\n%s", err, b)
		}
	}
	if sysusers := readFile(t, filepath.Join(root, debSysusers)); !regexp.MustCompile(`(?m)^u postured - .* /var/lib/postured$`).MatchString(sysusers) {
		t.Errorf("sysusers.d entry:\n%s", sysusers)
	}
	if postinst := readFile(t, filepath.Join(ctrl, "postinst")); !strings.Contains(postinst, "systemd-sysusers postured.conf") {
		t.Errorf("postinst does not create the user:\n%s", postinst)
	}
	if postinst := readFile(t, filepath.Join(ctrl, "postinst")); !strings.Contains(postinst, "systemctl try-restart postured.service") {
		t.Errorf("postinst does not restart the service on an upgrade:\n%s", postinst)
	}
	if prerm := readFile(t, filepath.Join(ctrl, "prerm")); !strings.Contains(prerm, "systemctl stop postured.service") {
		t.Errorf("prerm does not stop the service on a removal:\n%s", prerm)
	}
	if postrm := readFile(t, filepath.Join(ctrl, "postrm")); !strings.Contains(postrm, "deb-systemd-helper purge postured.service") {
		t.Errorf("postrm does not forget the service's enablement on a purge:\n%s", postrm)
	}
	if got := strings.TrimSpace(dpkg("--field", deb, "Depends")); got != "systemd | adduser" {
		t.Errorf("Depends %q", got)
	}

	// The packaged binary is stamped: its version commands name the
	// module version and this checkout's revision.
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		for _, args := range [][]string{{"version"}, {"--version"}} {
			b, err := exec.Command(filepath.Join(root, debBinary), args...).CombinedOutput()
			line := strings.TrimSpace(string(b))
			if err != nil || !regexp.MustCompile(`^postured v\d+\.\d+\.\d+\S* \(revision `+strings.TrimSpace(string(head))+`[,)]`).MatchString(line) {
				t.Errorf("postured %s: %v %q, want the module version and revision %s", args[0], err, line, head)
			}
			t.Logf("postured %s: %s", args[0], line)
		}
		// /version answers the same revision.
		if v := serveVersion(t, filepath.Join(root, debBinary)); v.Revision != strings.TrimSpace(string(head)) || !strings.HasPrefix(v.Version, "v") {
			t.Errorf("/version of the packaged binary: %+v, want revision %s", v, head)
		}
	}

	// SHA256SUMS holds the binary and the package, and sha256sum agrees.
	sums := readFile(t, filepath.Join(out, "SHA256SUMS"))
	var names []string
	for sc := bufio.NewScanner(strings.NewReader(sums)); sc.Scan(); {
		f := strings.Fields(sc.Text())
		names = append(names, f[len(f)-1])
	}
	slices.Sort(names)
	if want := []string{filepath.Base(bin), filepath.Base(deb)}; !slices.Equal(names, sortedCopy(want)) {
		t.Errorf("SHA256SUMS names %q, want %q", names, want)
	}
	check := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	check.Dir = out
	if b, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, b)
	}
}

// serveVersion starts bin serve on a free port and returns its /version.
func serveVersion(t *testing.T, bin string) (v struct{ Version, Revision string }) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), "POSTURED_ADMIN_PASSWORD=release-test-password")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	var url string
	for sc := bufio.NewScanner(stderr); sc.Scan() && url == ""; {
		var rec struct{ Msg, URL string }
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == "listening" {
			url = rec.URL
		}
	}
	if url == "" {
		t.Fatal("the packaged binary did not say where it listens")
	}
	go io.Copy(io.Discard, stderr)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, filepath.Join(dir, "pki", "ca.pem"))))
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	// /version is answered once the node has caught up with its (empty) log.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := client.Get(url + "/version")
		if err == nil && resp.StatusCode == http.StatusOK {
			var env struct{ Data json.RawMessage }
			err = json.NewDecoder(resp.Body).Decode(&env)
			resp.Body.Close()
			if err == nil && json.Unmarshal(env.Data, &v) == nil {
				return v
			}
		} else if err == nil {
			resp.Body.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("/version: %v", err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestReleaseRefusesAFullDirectory keeps a release from mixing with old
// artifacts.
func TestReleaseRefusesAFullDirectory(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "old"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Release(t.Context(), Options{Root: "../..", Out: out, Targets: []string{"linux/amd64"}}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("release into a full directory: %v", err)
	}
}
