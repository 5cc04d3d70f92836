package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed-0809debe/posture"
)

// result is the outcome of one attempt.
type result struct {
	status  int
	latency time.Duration
	err     error
}

func (r result) ok() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

// errText is the error shown in the deliveries list (and kept in the
// log). A failed name lookup is said without the node's resolver's address.
func (r result) errText() string {
	var dns *net.DNSError
	switch {
	case errors.As(r.err, &dns):
		what := dns.Err
		if dns.IsNotFound {
			what = "no such host"
		}
		return "the lookup of " + dns.Name + " failed: " + what
	case r.err != nil:
		return r.err.Error()
	case !r.ok():
		return "the receiver answered " + strconv.Itoa(r.status)
	}
	return ""
}

// CheckCA validates a PEM bundle of CA certificates.
func CheckCA(pem string) error {
	if !x509.NewCertPool().AppendCertsFromPEM([]byte(pem)) {
		return errors.New("holds no PEM certificate")
	}
	return nil
}

// newClient is the HTTP client of a webhook: NewClient for its URL, with
// its CA when it has one.
func newClient(w posture.Webhook, timeout time.Duration, deny []*net.IPNet) (*http.Client, error) {
	var roots *x509.CertPool
	if w.CAPEM != "" {
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM([]byte(w.CAPEM)) {
			return nil, errors.New("webhooks: the webhook's CA holds no PEM certificate")
		}
	}
	return NewClient(w.URL, roots, timeout, deny)
}

// NewClient is the HTTP client of postured's requests to a URL an admin
// gave (webhook deliveries, the key sets of external JWT signers): TLS
// verified against roots (nil: the system's), redirects not followed, each
// request bounded by timeout, no connection to an address in deny. Through
// a proxy (HTTPS_PROXY, HTTP_PROXY), it is the target's addresses that are
// checked, as its name resolves before each request, not the proxy's; the
// proxy is then asked for the address checked (guarded).
func NewClient(rawURL string, roots *x509.CertPool, timeout time.Duration, deny []*net.IPNet) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	dialer := &net.Dialer{Timeout: timeout}
	var transport http.RoundTripper = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DialContext: dialer.DialContext}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("webhooks: url: %w", err)
	}
	switch proxy, err := http.ProxyFromEnvironment(&http.Request{URL: u}); {
	case len(deny) == 0:
	case err == nil && proxy != nil:
		// The proxy connects to an address, not the name: TLS verifies
		// the name still.
		tc.ServerName = u.Hostname()
		transport = guarded{next: transport, deny: deny}
	default:
		dialer.Control = refuse(deny)
	}
	return &http.Client{
		Timeout:   timeout,
		Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}, nil
}

// guarded checks the addresses of a request's host, then asks the proxy for
// the first of them rather than the name, which the proxy would resolve
// again (maybe to another address: DNS rebinding). The Host header keeps
// the name.
type guarded struct {
	next http.RoundTripper
	deny []*net.IPNet
}

func (g guarded) RoundTrip(r *http.Request) (*http.Response, error) {
	addrs, err := net.DefaultResolver.LookupNetIP(r.Context(), "ip", r.URL.Hostname())
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%s has no address", r.URL.Hostname())
	}
	for _, a := range addrs {
		if err := denied(a, g.deny); err != nil {
			return nil, err
		}
	}
	port := r.URL.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
	}
	pinned := r.Clone(r.Context())
	pinned.URL.Host = net.JoinHostPort(addrs[0].Unmap().String(), port)
	if pinned.Host == "" {
		pinned.Host = r.URL.Host
	}
	return g.next.RoundTrip(pinned)
}

// CloseIdleConnections closes the idle connections of the transport
// underneath (http.Client.CloseIdleConnections asks the transport).
func (g guarded) CloseIdleConnections() {
	if c, ok := g.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// refuse is a dialer's Control that refuses the addresses in deny: it sees
// each address the name resolved to, just before connecting, so a name that
// resolves to another address the next time is checked again.
func refuse(deny []*net.IPNet) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return err
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return err
		}
		return denied(ip, deny)
	}
}

// Reachable says whether a URL whose host is an address (not a name) may
// be reached through deny: a receiver written as a denied address would only
// ever fail. A name is checked at each attempt, as it resolves then.
func Reachable(rawURL string, deny []*net.IPNet) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	host := strings.Trim(u.Hostname(), "[]")
	if host == "" {
		return errors.New("names no host")
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		if numericName(host) {
			return fmt.Errorf("%s is no host name but an IPv4 address in a short form (127.1, 0x7f000001, 2130706433), which some resolvers read as an address: write the address in dotted decimal", host)
		}
		return nil // a name
	}
	return denied(ip, deny)
}

// numericName says whether host's last label is a number, decimal or hex
// (0x...): no DNS name ends so (no top-level domain is numeric), and the C
// library's resolvers read such a host as an IPv4 address.
func numericName(host string) bool {
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	last, digits := name[strings.LastIndexByte(name, '.')+1:], "0123456789"
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		last, digits = rest, "0123456789abcdef"
	}
	return strings.Trim(last, digits) == ""
}

// denied says which network of deny holds ip, if one does.
func denied(ip netip.Addr, deny []*net.IPNet) error {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, n := range deny {
		if n.Contains(ip.AsSlice()) {
			return fmt.Errorf("%s is in %s, a network webhooks may not reach (--webhook-deny)", ip, n)
		}
	}
	return nil
}

// post makes one attempt: the signed CloudEvent to the webhook's URL.
func post(ctx context.Context, c *http.Client, w posture.Webhook, secret, id string, at time.Time, payload []byte) result {
	if err := posture.CheckWebhookURL(w.URL, w.AllowInsecureHTTP); err != nil {
		return result{err: fmt.Errorf("url %w", err)}
	}
	sig, err := Sign(secret, id, at, payload)
	if err != nil {
		return result{err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(payload))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/cloudevents+json")
	req.Header.Set("User-Agent", "postured-webhooks")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	start := time.Now()
	resp, err := c.Do(req)
	r := result{latency: time.Since(start)}
	if err != nil {
		r.err = err
		return r
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	r.status = resp.StatusCode
	return r
}
