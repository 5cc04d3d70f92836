package api

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/seed-0809debe/posture"
)

// Budget bounds the bytes each key (an identity) may have a node keep for
// the facts its own requests cause: posture responses, logins, session
// requests (granted or refused), session certificates, MFA changes,
// changes of its own authenticators and certificate extensions. It is a token
// bucket of bytes per key, refilled at a steady rate up to a burst. Every
// such fact is kept in the log for good, so without a bound one identity
// could fill the disk and stop every write of every user (the node refuses
// writes below --disk-reserve-mib).
//
// The budget is in memory, per node. It remembers at most budgetKeys keys;
// beyond them it forgets full buckets first, then others, which only gives
// those keys a fresh burst. A nil *Budget limits nothing.
type Budget struct {
	mu    sync.Mutex
	m     map[string]*rate.Limiter
	limit rate.Limit
	burst int
	now   Clock
}

// budgetKeys is how many keys a Budget remembers before it prunes.
const budgetKeys = 100_000

// NewBudget returns a budget of perSecond bytes a second per key, with
// bursts of up to burst bytes (at least MaxBody, so that any body a request
// may carry can pass on a full bucket). now is its clock (nil: time.Now).
func NewBudget(perSecond, burst int, now Clock) *Budget {
	if now == nil {
		now = time.Now
	}
	return &Budget{m: map[string]*rate.Limiter{}, limit: rate.Limit(perSecond), burst: max(burst, MaxBody), now: now}
}

// Take takes n bytes from key's bucket, or answers 429
// SERVER_TOO_MANY_REQUESTS with a Retry-After header (the seconds until the
// bucket holds n bytes again) and takes nothing.
func (b *Budget) Take(c echo.Context, key string, n int) error { return b.take(c, key, n, true) }

// Check answers as Take would, and takes nothing: a request refuses early
// what it could not keep, before the work that tells its exact cost.
func (b *Budget) Check(c echo.Context, key string, n int) error { return b.take(c, key, n, false) }

func (b *Budget) take(c echo.Context, key string, n int, take bool) error {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	now := b.now()
	lim := b.m[key]
	if lim == nil {
		if len(b.m) >= budgetKeys {
			prune(b.m, now, budgetKeys)
		}
		lim = rate.NewLimiter(b.limit, b.burst)
		b.m[key] = lim
	}
	n = min(n, b.burst)
	if take && lim.AllowN(now, n) || !take && lim.TokensAt(now) >= float64(n) { // AllowN takes nothing when it refuses
		b.mu.Unlock()
		return nil
	}
	wait := (float64(n) - lim.TokensAt(now)) / float64(b.limit) // seconds
	b.mu.Unlock()
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait))))
	return &posture.Error{Code: posture.CodeTooManyRequests,
		Message: fmt.Sprintf("this identity asked this node to keep more than its budget (%d bytes a second, in bursts of up to %d); try again later", int(b.limit), b.burst)}
}

// smallEvent is the size under which an event's data is not checked
// against the log's limit before it is charged: far under what a message
// of the log takes (1 MiB on a default NATS server), whatever the event's
// envelope adds. Under a server that takes less, such an event is charged
// and then refused.
const smallEvent = 64 << 10

// RequestCost is what a request costs a budget beyond the bytes of its
// event: about what its history entry and the event's envelope add, so that
// many small requests cost what they take.
const RequestCost = 512

// TransitionCost is what a request that may change an identity's standing
// costs beyond its event: the transitions it derives are kept in the
// transitions stream, and each is delivered to every webhook, one attempt
// event each. A posture response that changes the identity's values or
// signals a wake or unlock pays it, and so does a session that report-only
// checks would deny: a client that flips its posture as fast as it can
// would otherwise fill every webhook's queue.
const TransitionCost = 4096

// Budgeted wraps the decide of a change an identity's own request makes
// (Writer.Change, Writer.Model): the events it decides cost their size and
// RequestCost against the identity's budget before they are appended, and
// past it the change is answered 429 and appends nothing. A change that
// loses a race and decides again pays again.
func Budgeted(c echo.Context, b *Budget, identityID string, decide func() ([]posture.Payload, error)) func() ([]posture.Payload, error) {
	if b == nil {
		return decide
	}
	return func() ([]posture.Payload, error) {
		payloads, err := decide()
		if err != nil || len(payloads) == 0 {
			return payloads, err
		}
		n := RequestCost
		for _, p := range payloads {
			data, err := json.Marshal(p)
			if err != nil {
				return nil, err
			}
			n += len(data)
		}
		if err := b.Take(c, identityID, n); err != nil {
			return nil, err
		}
		return payloads, nil
	}
}

// AppendBudgeted appends p for the identity once its budget has room for
// the event's data, RequestCost and extra more (429 otherwise, with nothing
// appended), and returns the event appended. An event larger than the log
// takes is 413 and costs only what its request did (its body and
// RequestCost), not the event it would have been: one mistake does not take
// an identity's whole burst, and repeating it is still bounded.
func (w *Writer) AppendBudgeted(c echo.Context, b *Budget, identityID string, p posture.Payload, extra int) (posture.Event, error) {
	e, err := w.Event(StampOf(c), p)
	if err != nil {
		return e, err
	}
	if len(e.Data) > smallEvent {
		if err := w.Log.Fits(e); err != nil {
			body, _ := ReadBody(c) // read already, to decode the request: its length, whatever Content-Length said
			if terr := b.Take(c, identityID, len(body)+RequestCost); terr != nil {
				return e, terr
			}
			return e, err
		}
	}
	if err := b.Take(c, identityID, len(e.Data)+RequestCost+extra); err != nil {
		return e, err
	}
	_, err = w.AppendEvent(c.Request().Context(), e)
	return e, err
}
