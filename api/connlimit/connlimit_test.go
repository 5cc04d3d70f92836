package connlimit_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/api/connlimit"
)

// dialFrom connects from a local loopback address.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedByPeer reports whether the server closed the connection (a read
// ends with EOF or a reset) rather than holding it open.
func closedByPeer(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return err != nil
}

// serve accepts connections and echoes one byte on each, until ln closes.
func serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			b := make([]byte, 1)
			for {
				if _, err := c.Read(b); err != nil {
					return
				}
				if _, err := c.Write(b); err != nil {
					return
				}
			}
		}()
	}
}

func echoes(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{'x'}); err != nil {
		return false
	}
	_, err := io.ReadFull(c, make([]byte, 1))
	return err == nil
}

// TestPerSourceCap: a source over its cap has its new connections closed at
// once; another source is served; a closed connection frees its place; an
// exempt source has no cap.
func TestPerSourceCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, exempt, _ := net.ParseCIDR("127.0.0.4/32")
	rejected := make(chan string, 1)
	// The first refusal is kept; later ones (the retries below, as many as
	// the server takes to notice a close) must not block the listener.
	ln := connlimit.Wrap(raw, connlimit.Options{PerSource: 2, Max: 100, Exempt: []*net.IPNet{exempt},
		OnReject: func(s string) {
			select {
			case rejected <- s:
			default:
			}
		}})
	defer ln.Close()
	go serve(ln)
	addr := raw.Addr().String()

	a1, a2 := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.2", addr)
	if !echoes(t, a1) || !echoes(t, a2) {
		t.Fatal("the first two connections of a source are not served")
	}
	a3 := dialFrom(t, "127.0.0.2", addr)
	if !closedByPeer(t, a3) {
		t.Fatal("a third connection from the same source stayed open")
	}
	if s := <-rejected; s != "127.0.0.2" {
		t.Fatalf("rejected source %q", s)
	}
	if b := dialFrom(t, "127.0.0.3", addr); !echoes(t, b) {
		t.Fatal("another source is not served")
	}
	a1.Close()
	// The server notices the close when its read ends; retry until the
	// place is free (a refused attempt is closed at once).
	deadline := time.Now().Add(5 * time.Second)
	for {
		if c := dialFrom(t, "127.0.0.2", addr); echoes(t, c) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed connection did not free its place")
		}
	}
	for range 5 {
		if c := dialFrom(t, "127.0.0.4", addr); !echoes(t, c) {
			t.Fatal("an exempt source is capped")
		}
	}
}

// TestMaxCap: beyond Max open connections, a new one is not served until
// one closes.
func TestMaxCap(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := connlimit.Wrap(raw, connlimit.Options{Max: 2})
	defer ln.Close()
	go serve(ln)
	addr := raw.Addr().String()
	a, b := dialFrom(t, "127.0.0.2", addr), dialFrom(t, "127.0.0.3", addr)
	if !echoes(t, a) || !echoes(t, b) {
		t.Fatal("not served under the cap")
	}
	c := dialFrom(t, "127.0.0.5", addr)
	_ = c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
		t.Fatal("a third connection was served over Max")
	}
	a.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatalf("the waiting connection was not served once another closed: %v", err)
	}
}

func TestSourceKeys(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"10.1.2.3:80", "10.1.2.3"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[::ffff:10.1.2.3]:80", "10.1.2.3"},
	} {
		a, _ := net.ResolveTCPAddr("tcp", c.addr)
		if got, _ := connlimit.Source(a); got != c.want {
			t.Errorf("%s: %q, want %q", c.addr, got, c.want)
		}
	}
}
