package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/seed-0809debe/posture"
)

// HeaderSession carries the API session token.
const HeaderSession = "zt-session"

// Sessions looks up API sessions and their identities (projections.Store
// implements it).
type Sessions interface {
	APISessionByTokenHash(hash string) (posture.APISession, error)
	Identity(id string) (posture.Identity, error)
}

// Principal is the caller of an authenticated request.
type Principal struct {
	Session  posture.APISession
	Identity posture.Identity
	Token    string
}

// ExpiresAt is when the API session ends unless it is used again.
func (p *Principal) ExpiresAt(timeout time.Duration) time.Time {
	return p.Session.LastActivityAt.Add(timeout)
}

const principalKey = "postured.principal"

// PrincipalOf returns the caller of an authenticated request (nil on public
// routes).
// WithPrincipal records the request's authenticated caller: Auth's
// middleware does, and so do handler tests that bypass it.
func WithPrincipal(c echo.Context, p *Principal) { c.Set(principalKey, p) }

func PrincipalOf(c echo.Context) *Principal {
	p, _ := c.Get(principalKey).(*Principal)
	return p
}

// TokenHash is the form in which API session tokens are stored.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Auth authenticates requests by their zt-session header and keeps API
// sessions alive: activity is recorded in the log at most once per tenth of
// the idle timeout (and at least once a minute), which moves the expiry.
type Auth struct {
	Sessions Sessions
	Log      Log
	Now      Clock
	Timeout  time.Duration
	Logger   *slog.Logger
	// CatchUp waits until the node has applied every event the log holds
	// (nil: the node never waits). A token the node does not know may have
	// been issued through another node milliseconds ago: it is looked up
	// again once the node caught up, for at most catchUpWait.
	CatchUp func(ctx context.Context) error
	// CatchUpBurst and CatchUpEvery bound, per source address, the unknown
	// tokens that make the node catch up: CatchUpBurst at once, then one
	// each CatchUpEvery (default 20, then one every 100 ms). Beyond that an
	// unknown token is answered 401 at once, without catching up, so that
	// a flood of garbage tokens costs a map lookup each.
	CatchUpBurst int
	CatchUpEvery time.Duration

	touched sync.Map // API session id -> time.Time of the last touch sent

	touchesOnce sync.Once
	touches     chan posture.Event // activity events waiting for Run

	catchUpMu      sync.Mutex
	catchUpSources map[string]*rate.Limiter
}

// Authenticate resolves the request's API session. It answers 401
// UNAUTHORIZED for a missing, malformed, unknown or idle-expired token and
// for a disabled identity.
func (a *Auth) Authenticate(c echo.Context) (*Principal, error) {
	token := c.Request().Header.Get(HeaderSession)
	if !posture.IsToken(token) {
		return nil, &posture.Error{Code: posture.CodeUnauthorized}
	}
	s, err := a.apiSession(c, TokenHash(token))
	if errors.Is(err, posture.ErrNotFound) {
		return nil, &posture.Error{Code: posture.CodeUnauthorized}
	}
	if err != nil {
		return nil, err
	}
	now := a.Now()
	if !now.Before(s.LastActivityAt.Add(a.Timeout)) {
		return nil, &posture.Error{Code: posture.CodeUnauthorized, Message: "the API session has expired"}
	}
	id, err := a.Sessions.Identity(s.IdentityID)
	if errors.Is(err, posture.ErrNotFound) {
		return nil, &posture.Error{Code: posture.CodeUnauthorized}
	}
	if err != nil {
		return nil, err
	}
	if id.IsDisabled(now) {
		return nil, &posture.Error{Code: posture.CodeUnauthorized, Message: "the identity is disabled"}
	}
	p := &Principal{Session: s, Identity: id, Token: token}
	a.touch(c, p, now)
	return p, nil
}

// catchUpWait bounds how long a request with an unknown token waits for
// the node to catch up with the log.
const catchUpWait = time.Second

// catchUpSourcesMax bounds the sources whose catch-ups are counted.
const catchUpSourcesMax = 100_000

// apiSession is the API session of a token hash, looked up again after
// catching up with the log when the node does not know it and the source
// has catch-ups left.
func (a *Auth) apiSession(c echo.Context, hash string) (posture.APISession, error) {
	s, err := a.Sessions.APISessionByTokenHash(hash)
	if !errors.Is(err, posture.ErrNotFound) || a.CatchUp == nil || !a.mayCatchUp(Source(c)) {
		return s, err
	}
	if !a.catchUp(c) {
		return s, err // still unknown as far as the node can tell
	}
	return a.Sessions.APISessionByTokenHash(hash)
}

// catchUp waits, at most catchUpWait, until the node has applied every
// event the log held when the request came, and says whether it did.
func (a *Auth) catchUp(c echo.Context) bool {
	if a.CatchUp == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), catchUpWait)
	defer cancel()
	return a.CatchUp(ctx) == nil
}

// mayCatchUp takes one catch-up from the source's bucket.
func (a *Auth) mayCatchUp(source string) bool {
	a.catchUpMu.Lock()
	defer a.catchUpMu.Unlock()
	if a.catchUpSources == nil {
		a.catchUpSources = map[string]*rate.Limiter{}
	}
	now := time.Now()
	b, ok := a.catchUpSources[source]
	if !ok {
		if len(a.catchUpSources) >= catchUpSourcesMax {
			prune(a.catchUpSources, now, catchUpSourcesMax)
		}
		every, burst := a.CatchUpEvery, a.CatchUpBurst
		if every <= 0 {
			every = 100 * time.Millisecond
		}
		if burst <= 0 {
			burst = 20
		}
		b = rate.NewLimiter(rate.Every(every), burst)
		a.catchUpSources[source] = b
	}
	return b.AllowN(now, 1)
}

// Require returns middleware that admits callers of the access level.
func (a *Auth) Require(level Access) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, err := a.Authenticate(c)
			if err != nil {
				return err
			}
			if level >= Session && p.Session.MFARequired && !p.Session.MFAComplete {
				return &posture.Error{Code: posture.CodeUnauthorized, Message: "MFA authentication is required to complete the API session"}
			}
			if level == Admin && !p.Identity.IsAdmin {
				return &posture.Error{Code: posture.CodeUnauthorized, Message: "an administrator's API session is required"}
			}
			WithPrincipal(c, p)
			a.SetExpiryHeaders(c, p.Session.LastActivityAt)
			return next(c)
		}
	}
}

// SetExpiryHeaders sets expiration-seconds and expires-at for an API session
// last active at the given time.
func (a *Auth) SetExpiryHeaders(c echo.Context, lastActivity time.Time) {
	expires := lastActivity.Add(a.Timeout)
	h := c.Response().Header()
	h.Set("Expiration-Seconds", strconv.Itoa(max(0, int(math.Round(expires.Sub(a.Now()).Seconds())))))
	h.Set("Expires-At", expires.UTC().Format(TimeFormat))
}

func (a *Auth) touch(c echo.Context, p *Principal, now time.Time) {
	every := min(a.Timeout/10, time.Minute)
	last := p.Session.LastActivityAt
	if t, ok := a.touched.Load(p.Session.ID); ok && t.(time.Time).After(last) {
		last = t.(time.Time)
	}
	if now.Sub(last) < every {
		return
	}
	a.touched.Store(p.Session.ID, now)
	p.Session.LastActivityAt = now
	e, err := posture.NewEvent(posture.APISessionTouched{ID: p.Session.ID, IdentityID: p.Session.IdentityID, At: now}, now)
	if err != nil {
		return
	}
	e.Actor = p.Identity.ID
	e.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	// Activity is best effort: the request does not wait for it; Run
	// appends it. A full queue drops it (the next request touches again).
	select {
	case a.queue() <- e:
	default:
		a.touched.Delete(p.Session.ID)
		a.Logger.Warn("API session activity dropped: the queue is full", "apiSessionId", p.Session.ID)
	}
}

// touchQueue is how many activity events may wait for Run.
const touchQueue = 4096

func (a *Auth) queue() chan posture.Event {
	a.touchesOnce.Do(func() { a.touches = make(chan posture.Event, touchQueue) })
	return a.touches
}

// Run appends the API sessions' activity events until ctx ends; its owner
// (the node's errgroup) waits for it. Events still queued when ctx ends are
// dropped: activity is best effort.
func (a *Auth) Run(ctx context.Context) error {
	q := a.queue()
	prune := time.NewTicker(time.Minute)
	defer prune.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-prune.C:
			a.pruneTouched(a.Now())
		case e := <-q:
			actx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := a.Log.Append(actx, e); err != nil && ctx.Err() == nil {
				a.Logger.Warn("recording API session activity failed", "event", e.ID, "err", err)
			}
			cancel()
		}
	}
}

// Forget drops the activity record of an ended API session.
func (a *Auth) Forget(apiSessionID string) { a.touched.Delete(apiSessionID) }

// pruneTouched drops the activity records older than the idle timeout:
// their sessions expired, unless a later touch replaced the record, or
// ended where Forget does not hear of it (on another node, or as the
// least recently used of an identity's sessions).
func (a *Auth) pruneTouched(now time.Time) {
	a.touched.Range(func(id, t any) bool {
		if now.Sub(t.(time.Time)) > a.Timeout {
			a.touched.CompareAndDelete(id, t)
		}
		return true
	})
}
