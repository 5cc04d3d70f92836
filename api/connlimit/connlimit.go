// Package connlimit caps the connections a listener holds open: in all,
// and per source address, so that one client (a slowloris, a broken
// retry loop) cannot take every connection a server can afford and the
// server keeps answering the others.
//
// It imports the standard library and golang.org/x/net/netutil only.
package connlimit

import (
	"net"
	"sync"

	"golang.org/x/net/netutil"
)

// Options configures Wrap. Zero values mean no cap.
type Options struct {
	// Max caps the connections open at once. Once reached, Accept waits
	// for one to close (new connections wait in the kernel's backlog).
	Max int
	// PerSource caps the connections open at once from one source: an IPv4
	// address, or an IPv6 /64 (what one host usually has). A connection
	// over the cap is closed as soon as it is accepted, before the TLS
	// handshake, and does not count against Max.
	PerSource int
	// Exempt are sources not capped per source (trusted reverse proxies,
	// which carry many clients' connections); Max still applies.
	Exempt []*net.IPNet
	// OnReject, if set, is called with the source of each connection
	// closed for PerSource.
	OnReject func(source string)
}

// Wrap returns ln with the caps of opts.
func Wrap(ln net.Listener, opts Options) net.Listener {
	if opts.PerSource > 0 {
		ln = &perSource{Listener: ln, opts: opts, open: map[string]int{}}
	}
	if opts.Max > 0 {
		// The per-source listener is inside: a connection it refuses
		// never holds one of the Max slots.
		ln = netutil.LimitListener(ln, opts.Max)
	}
	return ln
}

// Source is the key a connection from addr is counted under: the IPv4
// address, or the IPv6 /64 network, as text.
func Source(addr net.Addr) (key string, ip net.IP) {
	var s string
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip = a.IP
	default:
		s = addr.String()
		if host, _, err := net.SplitHostPort(s); err == nil {
			s = host
		}
		ip = net.ParseIP(s)
	}
	if ip == nil {
		return s, nil
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String(), ip4
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64", ip
}

type perSource struct {
	net.Listener
	opts Options
	mu   sync.Mutex
	open map[string]int
}

func (l *perSource) exempt(ip net.IP) bool {
	for _, n := range l.opts.Exempt {
		if ip != nil && n.Contains(ip) {
			return true
		}
	}
	return false
}

// Accept returns the next connection whose source is under its cap;
// connections over it are closed.
func (l *perSource) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, ip := Source(c.RemoteAddr())
		if l.exempt(ip) {
			return c, nil
		}
		l.mu.Lock()
		if l.open[key] >= l.opts.PerSource {
			l.mu.Unlock()
			c.Close()
			if l.opts.OnReject != nil {
				l.opts.OnReject(key)
			}
			continue
		}
		l.open[key]++
		l.mu.Unlock()
		return &counted{Conn: c, release: func() { l.release(key) }}, nil
	}
}

func (l *perSource) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}

// counted is a connection that leaves its source's count once closed.
type counted struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *counted) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
