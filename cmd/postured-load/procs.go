package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process (postured or the null server) whose output is
// read until it says where it listens, then drained.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string // host:port it listens on
	done chan struct{}
	tail *lines // its last lines of output, for errors
}

// start runs path with args and waits (up to a minute) for a line of its
// output that starts with marker; what follows the marker up to a space is
// the address.
func start(ctx context.Context, name, path string, args, env []string, marker string) (*proc, error) {
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), tail: &lines{max: 30}}
	go func() { _ = cmd.Wait(); pw.Close(); close(p.done) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.tail.add(line)
			if i := strings.Index(line, marker); i >= 0 {
				addr, _, _ := strings.Cut(line[i+len(marker):], " ")
				select {
				case found <- addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	select {
	case p.addr = <-found:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("%s exited before listening: %s", name, p.tail)
	case <-time.After(time.Minute):
		p.stop()
		return nil, fmt.Errorf("%s did not listen within a minute: %s", name, p.tail)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// stop ends the process (SIGTERM, then SIGKILL after 30 s) and waits.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// rssMiB is the process's resident memory (VmRSS) and its peak (VmHWM).
func (p *proc) rssMiB() (rss, peak float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, peak, nil
}

// cpu is the user and system CPU time the process has used.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// lines keeps the last lines of a process's output.
type lines struct {
	mu  sync.Mutex
	max int
	buf []string
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, s)
	if len(l.buf) > l.max {
		l.buf = l.buf[1:]
	}
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.buf, "\n")
}
