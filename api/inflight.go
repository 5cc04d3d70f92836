package api

import (
	"net"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
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
	key, ip := sourceKey(remote)
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

// sourceKey is the key a request from remote ("ip:port") is counted
// under, as connlimit.Source counts connections: the IPv4 address, or the
// IPv6 /64 network.
func sourceKey(remote string) (string, net.IP) {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host, nil
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String(), ip4
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64", ip
}
