package datadir_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture/cmd/postured/datadir"
)

func TestAcquireRefusesASecondHolder(t *testing.T) {
	dir := t.TempDir()
	l, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A second open file description conflicts even in the same process.
	_, err = datadir.Acquire(dir)
	var inUse *datadir.InUseError
	if !errors.As(err, &inUse) {
		t.Fatalf("second Acquire: %v, want an *InUseError", err)
	}
	want := fmt.Sprintf("data directory %s is in use by process %d", dir, os.Getpid())
	if err.Error() != want {
		t.Fatalf("second Acquire: %q, want %q", err, want)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

// TestLockHeldByAnotherProcess holds the lock with flock(1) in a child
// process: the error names that process, and the lock is free once it is
// gone (a killed holder leaves no stale lock).
func TestLockHeldByAnotherProcess(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) is not installed")
	}
	dir := t.TempDir()
	lockFile := filepath.Join(dir, datadir.FileName)
	// The child takes the lock, writes its pid and waits on stdin. With
	// --close only flock itself holds the lock (the shell does not inherit
	// it), so the lock is free once the process waited for below is gone.
	cmd := exec.Command(flock, "--exclusive", "--close", lockFile, "sh", "-c", `echo $PPID > "$0"; echo locked; read x`, lockFile)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "locked\n" {
		t.Fatalf("child: %q %v", buf, err)
	}
	_, err = datadir.Acquire(dir)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("in use by process %d", cmd.Process.Pid)) {
		t.Fatalf("Acquire while another process holds it: %v (holder %d)", err, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	stdin.Close()
	cmd.Wait()
	l, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire after the holder died: %v", err)
	}
	l.Release()
}

// A holder's notes reach the process it refuses; a note that would break
// the file's lines is refused.
func TestNotesReachTheRefused(t *testing.T) {
	dir := t.TempDir()
	l, err := datadir.Acquire(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := l.Note(map[string]string{"nats-url": "tls://127.0.0.1:4222", "nats-tls-ca": "/srv/pki/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	_, err = datadir.Acquire(dir)
	var inUse *datadir.InUseError
	if !errors.As(err, &inUse) || inUse.PID != os.Getpid() || inUse.Notes["nats-url"] != "tls://127.0.0.1:4222" || inUse.Notes["nats-tls-ca"] != "/srv/pki/ca.pem" {
		t.Fatalf("refused with %+v (%v)", inUse, err)
	}
	for _, bad := range []map[string]string{{"a=b": "c"}, {"a": "b\nc=d"}} {
		if err := l.Note(bad); err == nil {
			t.Errorf("note %q taken", bad)
		}
	}
}
