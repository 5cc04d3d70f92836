package api

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/seed-0809debe/posture"
)

// LimiterOptions configures a Limiter. Zero values take the defaults.
type LimiterOptions struct {
	// SubjectEvery and SubjectBurst bound the failures per subject (a
	// username, an identity's MFA codes): SubjectBurst failures at once,
	// then one more each SubjectEvery. Default: 10, then one every 6 s.
	SubjectEvery time.Duration
	SubjectBurst int
	// SourceEvery and SourceBurst bound the failures per source address.
	// Default: 100, then one every 500 ms.
	SourceEvery time.Duration
	SourceBurst int
	// MaxKeys bounds the subjects and the sources remembered (each); fully
	// recovered ones are forgotten first. Default 100,000.
	MaxKeys int
	// Now is the limiter's clock (default time.Now).
	Now Clock
}

func (o LimiterOptions) withDefaults() LimiterOptions {
	if o.SubjectEvery <= 0 {
		o.SubjectEvery = 6 * time.Second
	}
	if o.SubjectBurst <= 0 {
		o.SubjectBurst = 10
	}
	if o.SourceEvery <= 0 {
		o.SourceEvery = 500 * time.Millisecond
	}
	if o.SourceBurst <= 0 {
		o.SourceBurst = 100
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 100_000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Limiter limits failed authentication attempts (wrong passwords, MFA codes
// or external JWTs) per subject and per source address, with token buckets.
// Only failures take tokens: a caller checks Allow before verifying a
// credential and reports Failed when it did not verify, so that any number
// of successful logins from one address (endpoints behind one NAT or load
// balancer) is never refused, while guessing is slowed to the refill rate.
// Once a subject's or a source's bucket is empty, every attempt for it is
// refused before the credential is looked at, until the bucket refills.
//
// The source is the connection's peer address; X-Forwarded-For, which a
// client can set to anything, is believed only from a trusted proxy (see
// ClientIP). A nil *Limiter limits nothing.
type Limiter struct {
	mu       sync.Mutex
	opts     LimiterOptions
	subjects map[string]*rate.Limiter
	sources  map[string]*rate.Limiter
}

// NewLimiter returns a Limiter.
func NewLimiter(opts LimiterOptions) *Limiter {
	l := &Limiter{}
	l.Configure(opts)
	return l
}

// Configure replaces the options and forgets every failure recorded.
func (l *Limiter) Configure(opts LimiterOptions) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts = opts.withDefaults()
	l.subjects = map[string]*rate.Limiter{}
	l.sources = map[string]*rate.Limiter{}
}

// UserSubject is the limiter subject of a username.
func UserSubject(username string) string { return "u:" + username }

// IdentitySubject is the limiter subject of an identity's MFA codes.
func IdentitySubject(identityID string) string { return "i:" + identityID }

// Source is the address a request comes from, as the echo instance's IP
// extractor resolves it (see ClientIP): the connection's peer unless it is
// a trusted proxy. Without an extractor it is the peer: forwarded headers
// are never believed by default.
func Source(c echo.Context) string {
	if e := c.Echo(); e != nil && e.IPExtractor != nil {
		return c.RealIP()
	}
	return echo.ExtractIPDirect()(c.Request())
}

// Allow answers 429 SERVER_TOO_MANY_REQUESTS, with a Retry-After header,
// when the subject (if not empty) or the request's source has no failure
// left; it takes nothing.
func (l *Limiter) Allow(c echo.Context, subject string) error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	wait := time.Duration(0)
	if subject != "" {
		wait = max(wait, l.waitFor(l.subjects, subject, now))
	}
	wait = max(wait, l.waitFor(l.sources, Source(c), now))
	if wait <= 0 {
		return nil
	}
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
	return &posture.Error{Code: posture.CodeTooManyRequests, Message: "too many failed authentication attempts; try again later"}
}

// Failed records a failed attempt for the subject (if not empty) and the
// request's source.
func (l *Limiter) Failed(c echo.Context, subject string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	if subject != "" {
		l.take(l.subjects, subject, now, l.opts.SubjectEvery, l.opts.SubjectBurst)
	}
	l.take(l.sources, Source(c), now, l.opts.SourceEvery, l.opts.SourceBurst)
}

// waitFor is how long until the key's bucket holds a token again (0 when it
// holds one now, or was never used).
func (l *Limiter) waitFor(m map[string]*rate.Limiter, key string, now time.Time) time.Duration {
	b, ok := m[key]
	if !ok {
		return 0
	}
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / float64(b.Limit()) * float64(time.Second))
}

func (l *Limiter) take(m map[string]*rate.Limiter, key string, now time.Time, every time.Duration, burst int) {
	b, ok := m[key]
	if !ok {
		if len(m) >= l.opts.MaxKeys {
			prune(m, now, l.opts.MaxKeys)
		}
		b = rate.NewLimiter(rate.Every(every), burst)
		m[key] = b
	}
	b.AllowN(now, 1)
}

// prune forgets the buckets that have refilled (they hold no record of a
// recent failure); if that is not enough, it forgets others until the map
// is at half its bound.
func prune(m map[string]*rate.Limiter, now time.Time, bound int) {
	for k, b := range m {
		if b.TokensAt(now) >= float64(b.Burst()) {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= bound/2 {
			break
		}
		delete(m, k)
	}
}
