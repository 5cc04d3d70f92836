package api

import (
	"net"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/connlimit"
)

// InFlight caps the requests being served at once per source address (the
// connection's peer, counted like connlimit counts connections: an IPv4
// address or an IPv6 /64). Over HTTP/1.1 a connection carries one request
// at a time and the connection cap bounds them; over HTTP/2 one connection
// carries many streams, so without this cap a few connections from one
// address could hold thousands of slow requests. A request over the cap is
// answered 429 SERVER_TOO_MANY_REQUESTS at once, its body unread. Trusted
// proxies, which carry many clients, are exempt. One InFlight is shared by
// every echo instance of a server. The zero value and a nil *InFlight cap
// nothing.
type InFlight struct {
	// PerSource is the cap (0: none).
	PerSource int
	// Exempt are sources not capped (trusted proxies).
	Exempt []*net.IPNet

	mu   sync.Mutex
	open map[string]int
}

// Middleware applies the cap.
func (f *InFlight) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	if f == nil || f.PerSource <= 0 {
		return next
	}
	return func(c echo.Context) error {
		key, ok := f.acquire(c.Request().RemoteAddr)
		if !ok {
			return &posture.Error{Code: posture.CodeTooManyRequests,
				Message: "too many requests in progress from this address; try again when some have ended"}
		}
		defer f.release(key)
		return next(c)
	}
}

func (f *InFlight) acquire(remote string) (string, bool) {
	key, ip := connlimit.Source(addr(remote))
	for _, n := range f.Exempt {
		if ip != nil && n.Contains(ip) {
			return "", true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open == nil {
		f.open = map[string]int{}
	}
	if f.open[key] >= f.PerSource {
		return "", false
	}
	f.open[key]++
	return key, true
}

func (f *InFlight) release(key string) {
	if key == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.open[key]--; f.open[key] <= 0 {
		delete(f.open, key)
	}
}

// addr is a remote address as a request carries it ("ip:port").
type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }
