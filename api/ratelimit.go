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
	// username, an identity's MFA codes) from one source address:
	// SubjectBurst failures at once, then one more each SubjectEvery.
	// Default: 10, then one every 6 s.
	SubjectEvery time.Duration
	SubjectBurst int
	// SpreadEvery and SpreadBurst bound the failures per subject from all
	// sources together (guessing spread over many addresses). Once they are
	// used up, the subject is refused from every source except those it
	// authenticated from before (see KnownFor). Default: 100, then one
	// every 6 s.
	SpreadEvery time.Duration
	SpreadBurst int
	// SourceEvery and SourceBurst bound the failures per source address,
	// whatever the subject. Default: 100, then one every 500 ms.
	SourceEvery time.Duration
	SourceBurst int
	// KnownFor is how long a source a subject authenticated from stays
	// known to it (default 30 days); a subject remembers its KnownPerSubject
	// latest sources (default 16).
	KnownFor        time.Duration
	KnownPerSubject int
	// MaxKeys bounds the subjects, the pairs and the sources remembered
	// (each). Only buckets that have refilled (no failure left to
	// remember) are forgotten; while every bucket still holds failures, a
	// new key is refused (429) rather than an old failure forgotten.
	// Default 100,000.
	MaxKeys int
	// Now is the limiter's clock (default time.Now).
	Now Clock
}

func (o LimiterOptions) withDefaults() LimiterOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(n *int, v int) {
		if *n <= 0 {
			*n = v
		}
	}
	def(&o.SubjectEvery, 6*time.Second)
	defInt(&o.SubjectBurst, 10)
	def(&o.SpreadEvery, 6*time.Second)
	defInt(&o.SpreadBurst, 100)
	def(&o.SourceEvery, 500*time.Millisecond)
	defInt(&o.SourceBurst, 100)
	def(&o.KnownFor, 30*24*time.Hour)
	defInt(&o.KnownPerSubject, 16)
	defInt(&o.MaxKeys, 100_000)
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Limiter limits failed authentication attempts (wrong passwords, MFA codes
// or external JWTs) with token buckets, so that guessing is slow and no one
// can lock a user out from elsewhere:
//
//   - per source address, whatever the subject: one address guessing many
//     usernames;
//   - per (subject, source): one address guessing one user's password. A
//     source's failures never refuse the subject from another source;
//   - per subject over all sources: guessing spread over many addresses.
//     When that is used up, the subject is refused only from sources it has
//     not authenticated from before: from a known source (a successful
//     login within KnownFor) the user still gets in, limited by its own
//     (subject, source) bucket.
//
// Only failures take tokens: a caller checks Allow before verifying a
// credential, reports Failed when it did not verify and Succeeded when it
// did, so that any number of successful logins one after another from one
// address (endpoints behind one NAT or load balancer) is never refused. An
// attempt holds its failure while it is checked, so attempts on one subject
// run at once only as far as it has failures left, even if all of them
// would succeed. A success also clears the (subject, source) failures.
// Refused attempts are not counted.
//
// The source is the connection's peer address; X-Forwarded-For, which a
// client can set to anything, is believed only from a trusted proxy (see
// ClientIP). The limiter is in memory, per node. A nil *Limiter limits
// nothing.
type Limiter struct {
	mu       sync.Mutex
	opts     LimiterOptions
	pairs    *buckets // subject + "\x00" + source
	subjects *buckets
	sources  *buckets
	known    map[string]map[string]time.Time // subject -> source -> last success
}

// NewLimiter returns a Limiter.
func NewLimiter(opts LimiterOptions) *Limiter {
	l := &Limiter{}
	l.Configure(opts)
	return l
}

// Configure replaces the options and forgets every failure and every known
// source recorded.
func (l *Limiter) Configure(opts LimiterOptions) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opts = opts.withDefaults()
	o := l.opts
	l.pairs = newBuckets(o.SubjectEvery, o.SubjectBurst, o.MaxKeys)
	l.subjects = newBuckets(o.SpreadEvery, o.SpreadBurst, o.MaxKeys)
	l.sources = newBuckets(o.SourceEvery, o.SourceBurst, o.MaxKeys)
	l.known = map[string]map[string]time.Time{}
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

func pairKey(subject, source string) string { return subject + "\x00" + source }

// Allow answers 429 SERVER_TOO_MANY_REQUESTS, with a Retry-After header,
// when the request's source, the subject from this source, or the subject
// from a source it is not known at has no failure left. An allowed attempt
// on a subject holds its failure of the subject at once, as if it will
// fail: concurrent guesses cannot all pass before the first failure is
// recorded, and at most as many attempts on one subject are checked at
// once as it has failures left. Succeeded and Released give it back;
// Failed takes it.
// An empty subject checks the source only.
func (l *Limiter) Allow(c echo.Context, subject string) error {
	if l == nil {
		return nil
	}
	source := Source(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	wait := l.sources.waitFor(source, now)
	if subject != "" {
		wait = max(wait, l.pairs.waitFor(pairKey(subject, source), now))
		if !l.isKnown(subject, source, now) {
			wait = max(wait, l.subjects.waitFor(subject, now))
		}
	}
	if wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		return &posture.Error{Code: posture.CodeTooManyRequests, Message: "too many failed authentication attempts, or too many at once; try again later"}
	}
	if subject != "" {
		pair := pairKey(subject, source)
		a := &attempt{pair: pair, subject: subject}
		a.heldPair, a.heldSubject = l.pairs.hold(pair, now), l.subjects.hold(subject, now)
		c.Set(attemptKey+subject, a)
	}
	return nil
}

// attempt is the failure of a subject an allowed attempt holds, in the
// (subject, source) bucket and the subject's (false: none, for want of a
// token or of room).
type attempt struct {
	pair, subject         string
	heldPair, heldSubject bool
}

// release gives back what the attempt holds; with fail, it records the
// failures instead.
func (l *Limiter) release(a *attempt, fail bool, now time.Time) {
	if a.heldPair {
		l.pairs.unhold(a.pair, fail, now)
	}
	if a.heldSubject {
		l.subjects.unhold(a.subject, fail, now)
	}
}

// attemptKey is the request's attempt in its context, followed by its
// subject.
const attemptKey = "postured.limiter.attempt:"

// taken returns and forgets the request's attempt for subject.
func taken(c echo.Context, subject string) *attempt {
	r, _ := c.Get(attemptKey + subject).(*attempt)
	if r != nil {
		c.Set(attemptKey+subject, (*attempt)(nil))
	}
	return r
}

// Failed records a failed attempt for the request's source and, if not
// empty, for the subject from this source and for the subject (what Allow
// held is taken).
func (l *Limiter) Failed(c echo.Context, subject string) {
	if l == nil {
		return
	}
	r := taken(c, subject)
	source := Source(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	// Charged even past an empty bucket: the source's attempts are not
	// held while they run, so guesses sent at once can all be checked
	// (up to the connections a source may hold); the overshoot is then
	// owed, and the source waits it out.
	l.sources.charge(source, now)
	switch {
	case subject == "":
	case r != nil:
		l.release(r, true, now)
	default:
		l.pairs.take(pairKey(subject, source), now)
		l.subjects.take(subject, now)
	}
}

// Succeeded records that the subject authenticated from the request's
// source: the failure Allow held is given back, the source becomes known to
// the subject, and the subject's failures from it are forgotten.
func (l *Limiter) Succeeded(c echo.Context, subject string) {
	if l == nil || subject == "" {
		return
	}
	r := taken(c, subject)
	source := Source(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Now()
	if r != nil {
		l.release(r, false, now) // not a failure after all
	}
	l.pairs.forget(pairKey(subject, source))
	m := l.known[subject]
	if m == nil {
		if len(l.known) >= l.opts.MaxKeys {
			l.pruneKnown(now)
		}
		m = map[string]time.Time{}
		l.known[subject] = m
	}
	m[source] = now
	for len(m) > l.opts.KnownPerSubject {
		oldest, at := "", now
		for s, t := range m {
			if !t.After(at) {
				oldest, at = s, t
			}
		}
		delete(m, oldest)
	}
}

// Released gives back the failure Allow held for an attempt that ended
// neither way (nothing to check a code against, a conflict, an error of
// the node's): it is not counted, and the source does not become known.
func (l *Limiter) Released(c echo.Context, subject string) {
	if l == nil || subject == "" {
		return
	}
	r := taken(c, subject)
	if r == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.release(r, false, l.opts.Now())
}

func (l *Limiter) isKnown(subject, source string, now time.Time) bool {
	at, ok := l.known[subject][source]
	return ok && now.Sub(at) < l.opts.KnownFor
}

// pruneKnown forgets the known sources that expired and, if that is not
// enough, other subjects until the map is at half its bound.
func (l *Limiter) pruneKnown(now time.Time) {
	for subject, m := range l.known {
		for s, at := range m {
			if now.Sub(at) >= l.opts.KnownFor {
				delete(m, s)
			}
		}
		if len(m) == 0 {
			delete(l.known, subject)
		}
	}
	for subject := range l.known {
		if len(l.known) <= l.opts.MaxKeys/2 {
			break
		}
		delete(l.known, subject)
	}
}

// buckets are the token buckets of one kind of key (sources, subjects or
// pairs), at most bound of them.
type buckets struct {
	m map[string]*rate.Limiter
	// held counts the failures that attempts in progress hold in a key's
	// bucket (hold): not taken from it yet, but not available to others.
	held      map[string]int
	every     time.Duration
	burst     int
	bound     int
	fullUntil time.Time // a prune freed nothing: none is tried again before
}

func newBuckets(every time.Duration, burst, bound int) *buckets {
	return &buckets{m: map[string]*rate.Limiter{}, held: map[string]int{}, every: every, burst: burst, bound: bound}
}

// pruneRetry is how long a map full of buckets that all hold failures is
// not scanned again: a flood of new keys must not make every request scan
// the whole map.
const pruneRetry = time.Second

// room reports whether a new key may be added. At the bound it forgets the
// buckets that have refilled (they remember no failure); buckets that still
// hold failures are never forgotten, so a new key has no room until one of
// them refills.
func (b *buckets) room(now time.Time) bool {
	if len(b.m) < b.bound {
		return true
	}
	if now.Before(b.fullUntil) {
		return false
	}
	for k, lim := range b.m {
		if b.held[k] == 0 && lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(b.m, k)
		}
	}
	if len(b.m) < b.bound {
		return true
	}
	b.fullUntil = now.Add(pruneRetry)
	return false
}

// waitFor is how long until the key's bucket holds a token again (0 when it
// holds one now, or was never used and there is room for it; one period
// when there is no room to remember its failures).
func (b *buckets) waitFor(key string, now time.Time) time.Duration {
	lim, ok := b.m[key]
	if !ok {
		if b.room(now) {
			return 0
		}
		return b.every
	}
	tokens := b.available(lim, key, now)
	if tokens >= 1 {
		return 0
	}
	// At least a nanosecond: a bucket a hair short of a token must not
	// round to "allowed" and then have nothing to take.
	return max(time.Duration((1-tokens)/float64(lim.Limit())*float64(time.Second)), 1)
}

// bucket is key's bucket, made when missing (nil when there is no room
// for a new key).
func (b *buckets) bucket(key string, now time.Time) *rate.Limiter {
	lim, ok := b.m[key]
	if !ok {
		if !b.room(now) {
			return nil
		}
		lim = rate.NewLimiter(rate.Every(b.every), b.burst)
		b.m[key] = lim
	}
	return lim
}

// available is the tokens of key's bucket that no attempt holds.
func (b *buckets) available(lim *rate.Limiter, key string, now time.Time) float64 {
	return lim.TokensAt(now) - float64(b.held[key])
}

// hold sets a failure of key's bucket aside for an attempt in progress,
// and reports whether it did (not without room, nor when none is
// available: a subject's bucket, from a known source). unhold ends it.
func (b *buckets) hold(key string, now time.Time) bool {
	lim := b.bucket(key, now)
	if lim == nil || b.available(lim, key, now) < 1 {
		return false
	}
	b.held[key]++
	return true
}

// unhold ends a hold of key's bucket: with fail, the failure is taken.
func (b *buckets) unhold(key string, fail bool, now time.Time) {
	if b.held[key]--; b.held[key] <= 0 {
		delete(b.held, key)
	}
	if fail {
		// Taken even when others' failures emptied the bucket meanwhile:
		// the attempt was counted on.
		b.charge(key, now)
	}
}

// charge records a failure for key even when its bucket is empty (it then
// owes it, and refills later). With no room for a new key the failure is
// not recorded (Allow refuses such keys before they are verified).
func (b *buckets) charge(key string, now time.Time) {
	if lim := b.bucket(key, now); lim != nil {
		lim.ReserveN(now, 1)
	}
}

// forget drops key's bucket, its failures with it (not what attempts in
// progress hold).
func (b *buckets) forget(key string) { delete(b.m, key) }

// take records a failure for key. With no room for a new key the failure
// is not recorded (Allow refuses such keys before they are verified).
func (b *buckets) take(key string, now time.Time) {
	if lim := b.bucket(key, now); lim != nil {
		lim.AllowN(now, 1)
	}
}

// prune forgets the buckets that have refilled (they hold no record of a
// recent failure); if that is not enough, it forgets others until the map
// is at half its bound. It suits buckets whose loss costs nothing but a
// fresh burst (Auth's catch-ups); the limiter's failures use buckets.
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
