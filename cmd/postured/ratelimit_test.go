package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

func (n *testNode) passwordLogin(t testing.TB, username, password string) response {
	t.Helper()
	return n.do(t, http.MethodPost, api.ClientBase+"/authenticate?method=password", "", map[string]string{"username": username, "password": password})
}

// TestFailedLoginsAreRateLimited: failed logins are limited per username and
// per source (429 SERVER_TOO_MANY_REQUESTS with Retry-After, even for the
// right password, so that guessing learns nothing); the limits recover with
// time; successes take nothing, so hundreds of logins from one address pass.
func TestFailedLoginsAreRateLimited(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	clk := newStepClock(time.Now())
	n.client.Login.Limiter.Configure(api.LimiterOptions{
		SubjectBurst: 3, SubjectEvery: time.Minute, SourceBurst: 5, SourceEvery: time.Minute, Now: clk.Now,
	})
	n.createUser(t, "other-user", "other-password", false)

	// Three failures for one username, then it is refused.
	for range 3 {
		expectError(t, n.passwordLogin(t, "admin", "wrong-password"), 401, posture.CodeInvalidAuth, "")
	}
	r := n.passwordLogin(t, "admin", testAdminPassword)
	expectError(t, r, 429, posture.CodeTooManyRequests, "")
	if r.Header.Get("Retry-After") != "60" {
		t.Fatalf("Retry-After %q, want 60", r.Header.Get("Retry-After"))
	}
	// Other usernames still work until the source runs out: five failures
	// in all from this address.
	if r := n.passwordLogin(t, "other-user", "other-password"); r.Status != http.StatusOK {
		t.Fatalf("another user: %d %s", r.Status, r.Body)
	}
	expectError(t, n.passwordLogin(t, "other-user", "wrong-password"), 401, posture.CodeInvalidAuth, "")
	expectError(t, n.passwordLogin(t, "nobody-at-all", "wrong-password"), 401, posture.CodeInvalidAuth, "")
	expectError(t, n.passwordLogin(t, "other-user", "other-password"), 429, posture.CodeTooManyRequests, "")

	// The limits recover with time: one failure per minute.
	clk.Advance(time.Minute)
	if r := n.passwordLogin(t, "admin", testAdminPassword); r.Status != http.StatusOK {
		t.Fatalf("after a minute: %d %s", r.Status, r.Body)
	}
	expectError(t, n.passwordLogin(t, "admin", "wrong-password"), 401, posture.CodeInvalidAuth, "")
	expectError(t, n.passwordLogin(t, "admin", testAdminPassword), 429, posture.CodeTooManyRequests, "")
	clk.Advance(10 * time.Minute)

	// Successes take nothing: many logins from one address, as many at
	// once as the username has failures left (3), are never refused though
	// the source allows only five failures.
	const logins, workers = 200, 3
	var refused atomic.Int32
	var wg sync.WaitGroup
	next := make(chan struct{})
	for range workers {
		wg.Go(func() {
			for range next {
				if r := n.passwordLogin(t, "other-user", "other-password"); r.Status != http.StatusOK {
					refused.Add(1)
				}
			}
		})
	}
	start := time.Now()
	for range logins {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	if refused.Load() != 0 {
		t.Fatalf("%d of %d successful logins were refused", refused.Load(), logins)
	}
	t.Logf("%d logins from one address in %v", logins, time.Since(start).Round(time.Millisecond))
}

// Guesses sent all at once do not pass the limit before the first failure
// is recorded: each takes its failure as it is allowed, so of 32 concurrent
// wrong passwords for one username only as many are checked as it has
// failures left; the rest are refused (429).
func TestConcurrentGuessesAreRateLimited(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	clk := newStepClock(time.Now())
	n.client.Login.Limiter.Configure(api.LimiterOptions{SubjectBurst: 3, SubjectEvery: time.Minute, Now: clk.Now})
	var checked, refused atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 32 {
		wg.Go(func() {
			<-start
			switch r := n.passwordLogin(t, "admin", "wrong-password"); r.Status {
			case http.StatusUnauthorized:
				checked.Add(1)
			case http.StatusTooManyRequests:
				refused.Add(1)
			default:
				t.Errorf("%d %s", r.Status, r.Body)
			}
		})
	}
	close(start)
	wg.Wait()
	if checked.Load() != 3 || refused.Load() != 29 {
		t.Fatalf("32 concurrent wrong passwords: %d checked, %d refused; want 3 and 29", checked.Load(), refused.Load())
	}
}

// TestWrongMFACodesAreRateLimited: wrong TOTP codes count against the
// identity; once it has none left, even a right code is refused (429).
func TestWrongMFACodesAreRateLimited(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	n.client.Login.Limiter.Configure(api.LimiterOptions{SubjectBurst: 2, SubjectEvery: time.Minute, Now: clk.Now})
	tok := n.createUser(t, "limited-user", "limited-password", false)
	_, secret := n.enrollAndVerifyMFA(t, tok, clk)
	partial, _ := n.loginSession(t, "limited-user", "limited-password")
	for range 2 {
		expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": wrongCode(t, secret, clk.Now())}), 400, posture.CodeMFAInvalidToken, "")
	}
	expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}), 429, posture.CodeTooManyRequests, "")
	clk.Advance(time.Minute)
	if r := n.do(t, http.MethodPost, api.ClientBase+"/authenticate/mfa", partial, map[string]string{"code": totpAt(t, secret, clk.Now())}); r.Status != http.StatusOK {
		t.Fatalf("after a minute: %d %s", r.Status, r.Body)
	}
}

// TestMFARequestsWithNothingToCheckAreNotFailures: an MFA request that ends
// without a code being checked (no enrollment to verify, 404) is not counted
// as a failed code: the identity then verifies its enrollment at once.
func TestMFARequestsWithNothingToCheckAreNotFailures(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	n.client.Login.Limiter.Configure(api.LimiterOptions{SubjectBurst: 2, SubjectEvery: time.Minute, SourceBurst: 2, SourceEvery: time.Minute, Now: clk.Now})
	tok := n.createUser(t, "early-user", "early-password", false)
	for range 3 {
		expectError(t, n.do(t, http.MethodPost, api.ClientBase+"/current-identity/mfa/verify", tok, map[string]string{"code": "123456"}), 404, posture.CodeNotFound, "")
	}
	n.enrollAndVerifyMFA(t, tok, clk)
}

// TestFullLimiterForgetsNoFailure: when the limiter remembers as many keys
// as it may, new usernames do not push out the failures it holds (which
// would let an attacker with many keys erase a user's recorded failures):
// a new key is refused instead, until buckets refill and can be forgotten.
func TestFullLimiterForgetsNoFailure(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	clk := newStepClock(time.Now())
	n.client.Login.Limiter.Configure(api.LimiterOptions{
		SubjectBurst: 2, SubjectEvery: time.Minute, SourceBurst: 1000, MaxKeys: 4, Now: clk.Now,
	})
	// The admin's failures from this address are used up.
	for range 2 {
		expectError(t, n.passwordLogin(t, "admin", "wrong-password"), 401, posture.CodeInvalidAuth, "")
	}
	expectError(t, n.passwordLogin(t, "admin", testAdminPassword), 429, posture.CodeTooManyRequests, "")
	// Failures for other usernames fill the limiter (4 keys), then new
	// usernames are refused; none of them erases the admin's failures.
	for i := range 20 {
		r := n.passwordLogin(t, fmt.Sprintf("guess-%02d", i), "wrong-password")
		switch {
		case i < 3 && r.Status != http.StatusUnauthorized:
			t.Fatalf("username %d while there is room: %d %s", i, r.Status, r.Body)
		case i >= 3:
			expectError(t, r, 429, posture.CodeTooManyRequests, "")
		}
		if i%5 == 4 {
			clk.Advance(time.Second) // past the pause between scans of a full limiter
		}
	}
	expectError(t, n.passwordLogin(t, "admin", testAdminPassword), 429, posture.CodeTooManyRequests, "")
	// Once the buckets have refilled they are forgotten, and there is room
	// again.
	clk.Advance(2 * time.Minute)
	if r := n.passwordLogin(t, "admin", testAdminPassword); r.Status != http.StatusOK {
		t.Fatalf("after the buckets refilled: %d %s", r.Status, r.Body)
	}
	expectError(t, n.passwordLogin(t, "guess-new", "wrong-password"), 401, posture.CodeInvalidAuth, "")
}
