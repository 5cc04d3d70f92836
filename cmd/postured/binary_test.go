package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/projections"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds postured once per test run.
func binary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "postured-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "postured")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// process is a running postured binary.
type process struct {
	cmd    *exec.Cmd
	base   string // https://127.0.0.1:port
	http   *http.Client
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan error
}

// listening finds the address in the line that says it, in text or in JSON.
var listening = regexp.MustCompile(`postured listening on https://(\S+)|"msg":"listening","url":"https://([^"]+)"`)

func startBinary(t testing.TB, dataDir string, env ...string) *process {
	t.Helper()
	cmd := exec.Command(binary(t), "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, exited: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(line); m != nil {
				addr <- m[1] + m[2]
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { p.kill() })
	select {
	case a := <-addr:
		p.base = "https://" + a
	case err := <-p.exited:
		t.Fatalf("postured exited before listening: %v\n%s", err, p.log())
	case <-time.After(90 * time.Second):
		t.Fatalf("postured did not listen within 90s:\n%s", p.log())
	}
	caPEM, err := os.ReadFile(filepath.Join(dataDir, "pki", "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	p.http = &http.Client{Timeout: 20 * time.Second, Transport: validating(&http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, MaxIdleConnsPerHost: 32,
	})}
	// It listens at once and serves its APIs once caught up with the log.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		status, _, _, err := p.request(http.MethodGet, "/readyz", "", nil)
		if err == nil && status == http.StatusOK {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("postured not ready within 90s (last: %d, %v):\n%s", status, err, p.log())
		}
	}
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *process) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("postured exited with %v after SIGTERM:\n%s", err, p.log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("postured did not stop within 30s of SIGTERM:\n%s", p.log())
	}
}

func (p *process) request(method, path, token string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set(api.HeaderSession, token)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, data, err
}

func (p *process) login(username, password string) (string, error) {
	status, h, body, err := p.request(http.MethodPost, api.ClientBase+"/authenticate?method=password", "",
		map[string]string{"username": username, "password": password})
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("login: %d %s", status, body)
	}
	return h.Get(api.HeaderSession), nil
}

func TestBinaryServesAndRestarts(t *testing.T) {
	dir := t.TempDir()
	p := startBinary(t, dir)
	// The generated password is in a file only its owner reads, which
	// the log names; the log holds no password.
	file := filepath.Join(dir, "admin-password")
	if !strings.Contains(p.log(), `default admin "admin" created; its generated password is in `+file) {
		t.Fatalf("the log does not name the generated password's file:\n%s", p.log())
	}
	password := readPasswordFile(t, file)
	if strings.Contains(p.log(), password) {
		t.Fatalf("the generated password is in the log:\n%s", p.log())
	}
	tok, err := p.login("admin", password)
	if err != nil {
		t.Fatal(err)
	}
	status, _, body, err := p.request(http.MethodGet, "/version", "", nil)
	if err != nil || status != http.StatusOK || !strings.Contains(string(body), `"edge-management"`) {
		t.Fatalf("version: %d %s %v", status, body, err)
	}
	p.stop(t)

	// A restart reuses the CA, the log and the admin; the API session
	// survives because it is in the log.
	p = startBinary(t, dir, "POSTURED_ADMIN_PASSWORD=not-the-admins")
	if strings.Contains(p.log(), "default admin \"admin\" created") || !strings.Contains(p.log(), "generated password is unchanged, and still in its file") ||
		!strings.Contains(p.log(), "POSTURED_ADMIN_PASSWORD is for the first start") {
		t.Fatalf("a restart: the admin created again, or the file or the password set not said:\n%s", p.log())
	}
	if status, _, body, _ := p.request(http.MethodGet, api.ManagementBase+"/current-api-session", tok, nil); status != http.StatusOK {
		t.Fatalf("API session lost on restart: %d %s", status, body)
	}
	if _, err := p.login("admin", password); err != nil {
		t.Fatal(err)
	}
	// Once the password is changed, the next start removes the file.
	if status, _, body, err := p.request(http.MethodPut, api.ClientBase+"/current-identity/authenticators/"+adminAuthenticator(t, p, tok), tok,
		map[string]any{"username": "admin", "password": "a-new-password", "currentPassword": password}); err != nil || status != http.StatusOK {
		t.Fatalf("change the password: %d %s %v", status, body, err)
	}
	p.stop(t)
	p = startBinary(t, dir)
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(p.log(), "generated one's file is removed") {
		t.Fatalf("after the password changed, the file: %v\n%s", err, p.log())
	}
	p.stop(t)
}

// readPasswordFile reads a generated password's file, which must be its
// owner's alone.
func readPasswordFile(t *testing.T, file string) string {
	t.Helper()
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the generated password's file: %v %v", fi, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// adminAuthenticator is the id of the password authenticator of the
// caller of tok.
func adminAuthenticator(t *testing.T, p *process, tok string) string {
	t.Helper()
	status, _, body, err := p.request(http.MethodGet, api.ClientBase+"/current-identity/authenticators", tok, nil)
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Data) != 1 {
		t.Fatalf("authenticators: %d %s %v", status, body, err)
	}
	return list.Data[0].ID
}

// TestCrashLosesNoAcknowledgedWrite kills the binary with SIGKILL while
// clients write (logins append API sessions) and checks, after a restart,
// that every write answered 2xx is there. Each client logs in as an
// identity of its own, at most as many times as an identity keeps API
// sessions.
func TestCrashLosesNoAcknowledgedWrite(t *testing.T) {
	dir := t.TempDir()
	env := "POSTURED_ADMIN_PASSWORD=" + testAdminPassword
	p := startBinary(t, dir, env)
	admin, err := p.login("admin", testAdminPassword)
	if err != nil {
		t.Fatal(err)
	}
	const clients = 8
	for i := range clients {
		name := fmt.Sprintf("writer-%d", i)
		status, _, body, err := p.request(http.MethodPost, api.ManagementBase+"/identities", admin, map[string]any{"name": name, "type": "Device"})
		var created struct {
			Data struct{ ID string } `json:"data"`
		}
		if err != nil || status != http.StatusCreated || json.Unmarshal(body, &created) != nil {
			t.Fatalf("identity %s: %d %s %v", name, status, body, err)
		}
		if status, _, body, err := p.request(http.MethodPost, api.ManagementBase+"/authenticators", admin,
			map[string]any{"method": "updb", "identityId": created.Data.ID, "username": name, "password": name + "-password"}); err != nil || status != http.StatusCreated {
			t.Fatalf("authenticator %s: %d %s %v", name, status, body, err)
		}
	}

	var (
		mu     sync.Mutex
		acked  []string
		wg     sync.WaitGroup
		stopCh = make(chan struct{})
	)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("writer-%d", i)
			for range projections.MaxAPISessions {
				select {
				case <-stopCh:
					return
				default:
				}
				tok, err := p.login(name, name+"-password")
				if err != nil {
					return // the process is gone
				}
				mu.Lock()
				acked = append(acked, tok)
				mu.Unlock()
			}
		}()
	}
	// Kill once a good number of writes were acknowledged, mid-stream.
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	close(stopCh)
	wg.Wait()
	if len(acked) < 50 {
		t.Fatalf("only %d writes before the kill", len(acked))
	}

	p = startBinary(t, dir, env)
	for _, tok := range acked {
		status, _, body, err := p.request(http.MethodGet, api.ClientBase+"/current-api-session", tok, nil)
		if err != nil || status != http.StatusOK {
			t.Fatalf("acknowledged API session lost after SIGKILL: %d %s %v", status, body, err)
		}
	}
	t.Logf("%d acknowledged writes survived SIGKILL", len(acked))
	p.stop(t)
}
