// Package datadir guards a node's data directory: one process at a time.
//
// postured serve takes the lock before it opens anything in the directory
// (the embedded NATS store, the projections, the PKI) and keeps it until it
// exits; the offline commands (replay, audit, explain, events tail on a
// data directory) take it too, so that no second JetStream server ever runs
// on a live store. The lock is an advisory flock on <dir>/LOCK, which the
// kernel releases when the process dies, however it dies: a stale LOCK file
// never blocks a restart. The file holds the owner's process id, so that a
// refused process can name it.
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FileName is the lock file inside the data directory.
const FileName = "LOCK"

// Lock is a held lock on a data directory.
type Lock struct {
	dir string
	f   *os.File
}

// InUseError is the error of Acquire on a directory another process holds.
type InUseError struct {
	Dir string // the directory, absolute
	PID int    // the holder's process id (0 if it could not be read)
}

func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("data directory %s is in use by another process", e.Dir)
	}
	return fmt.Sprintf("data directory %s is in use by process %d", e.Dir, e.PID)
}

// Acquire locks dir (which must exist) for this process. It does not wait:
// when another process holds the lock it fails at once with an
// *InUseError.
func Acquire(dir string) (*Lock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	path := filepath.Join(abs, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("datadir: lock %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &InUseError{Dir: abs, PID: readPID(f)}
		}
		return nil, fmt.Errorf("datadir: lock %s: %w", path, err)
	}
	// The holder's pid replaces the previous holder's.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("datadir: lock %s: write the process id: %w", path, err)
	}
	return &Lock{dir: abs, f: f}, nil
}

// readPID reads the process id a holder wrote (0 when there is none yet).
func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}

// Dir is the locked directory, absolute.
func (l *Lock) Dir() string { return l.dir }

// Release unlocks the directory. The LOCK file stays: removing it would let
// a process that opened it before the removal hold a lock nobody else sees.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
