// Package datadir guards a node's data directory: one process at a time.
//
// postured serve takes the lock before it opens anything in the directory
// (the embedded NATS store, the projections, the PKI) and keeps it until it
// exits; the offline commands (replay, audit, explain, events tail on a
// data directory) take it too, so that no second JetStream server ever runs
// on a live store. The lock is an advisory flock on <dir>/LOCK, which the
// kernel releases when the process dies, however it dies: a stale LOCK file
// never blocks a restart. The file holds the owner's process id, so that a
// refused process can name it, and what the owner noted of how to reach it
// (Note).
package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	// Notes are what the holder noted (Note): names to values.
	Notes map[string]string
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
			pid, notes := read(f)
			return nil, &InUseError{Dir: abs, PID: pid, Notes: notes}
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

// read reads the process id a holder wrote (0 when there is none yet) and
// its notes, one "name=value" line each after it.
func read(f *os.File) (int, map[string]string) {
	buf := make([]byte, 64<<10)
	n, _ := f.ReadAt(buf, 0)
	lines := strings.Split(strings.TrimSpace(string(buf[:n])), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil {
		return 0, nil
	}
	notes := map[string]string{}
	for _, l := range lines[1:] {
		if k, v, ok := strings.Cut(l, "="); ok {
			notes[k] = v
		}
	}
	return pid, notes
}

// Note records, after the process id, what another process refused the
// directory may use to reach this one (names and values without new
// lines; nothing secret: the file is the owner's, mode 0600, but says
// where to find things, not what they hold).
func (l *Lock) Note(notes map[string]string) error {
	if l == nil || l.f == nil {
		return nil
	}
	var b strings.Builder
	b.WriteString(strconv.Itoa(os.Getpid()) + "\n")
	keys := make([]string, 0, len(notes))
	for k := range notes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if strings.Contains(k, "=") || strings.Contains(k+notes[k], "\n") {
			return fmt.Errorf("datadir: note %q: names hold no = and nothing holds a new line", k)
		}
		b.WriteString(k + "=" + notes[k] + "\n")
	}
	if err := l.f.Truncate(0); err != nil {
		return fmt.Errorf("datadir: note: %w", err)
	}
	if _, err := l.f.WriteAt([]byte(b.String()), 0); err != nil {
		return fmt.Errorf("datadir: note: %w", err)
	}
	return nil
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
