package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// TestLimiterGivesBackWhatSucceedsOrEndsOtherwise: an attempt holds a
// failure while it runs; one that succeeds or ends without a check
// (Released) gives it back, on a clock that moves, as a real one does
// between the start and the end of a request. Only failures count.
func TestLimiterGivesBackWhatSucceedsOrEndsOtherwise(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { now = now.Add(time.Millisecond); return now }
	l := NewLimiter(LimiterOptions{SubjectBurst: 2, SubjectEvery: time.Hour, SpreadBurst: 2, SpreadEvery: time.Hour,
		SourceBurst: 100, SourceEvery: time.Hour, Now: clock})
	e := echo.New()
	from := func(addr string) echo.Context {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.RemoteAddr = addr + ":1234"
		return e.NewContext(req, httptest.NewRecorder())
	}
	allow := func(c echo.Context, what string) {
		t.Helper()
		if err := l.Allow(c, "u:carol"); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i := range 5 {
		c := from("10.0.0.1")
		allow(c, "success "+string(rune('1'+i)))
		l.Succeeded(c, "u:carol")
	}
	for i := range 5 {
		c := from("10.0.0.1")
		allow(c, "released "+string(rune('1'+i)))
		l.Released(c, "u:carol")
	}
	// The subject's bucket is whole: a source it was never seen at passes.
	c := from("10.0.0.2")
	allow(c, "a new source after successes")
	l.Failed(c, "u:carol")
	c = from("10.0.0.3")
	allow(c, "one failure")
	l.Failed(c, "u:carol")
	// Two failures: the subject has none left from a new source.
	if err := l.Allow(from("10.0.0.4"), "u:carol"); err == nil {
		t.Fatal("a third source after two failures passed")
	}
}

// TestLimiterChargesSourcesPastEmpty: guesses from one address that were
// all let through at once, past its failures, are owed: the address then
// waits for them.
func TestLimiterChargesSourcesPastEmpty(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	l := NewLimiter(LimiterOptions{SourceBurst: 10, SourceEvery: time.Second, Now: func() time.Time { return now }})
	e := echo.New()
	from := func() echo.Context {
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.RemoteAddr = "10.0.0.9:1234"
		return e.NewContext(req, httptest.NewRecorder())
	}
	var at []echo.Context
	for range 20 { // all let through before any failed
		c := from()
		if err := l.Allow(c, ""); err != nil {
			t.Fatal(err)
		}
		at = append(at, c)
	}
	for _, c := range at {
		l.Failed(c, "")
	}
	now = now.Add(5 * time.Second) // 5 failures' worth refilled: 5 still owed
	if err := l.Allow(from(), ""); err == nil {
		t.Fatal("the address owes 10 failures and was let through after 5 s")
	}
	now = now.Add(6 * time.Second)
	if err := l.Allow(from(), ""); err != nil {
		t.Fatalf("after the debt: %v", err)
	}
}
