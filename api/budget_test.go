package api_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestBudgetPerKey: a key gets its burst, then its rate; a refusal says
// when to come back and takes nothing; other keys are not affected.
func TestBudgetPerKey(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const rate, burst = 1000, 2 * api.MaxBody
	b := api.NewBudget(rate, burst, func() time.Time { return now })
	// take returns Retry-After and the error.
	take := func(key string, n int) (string, error) {
		c := echo.New().NewContext(httptest.NewRequest("POST", "/", nil), httptest.NewRecorder())
		err := b.Take(c, key, n)
		return c.Response().Header().Get("Retry-After"), err
	}
	if _, err := take("a", api.MaxBody); err != nil {
		t.Fatalf("a full bucket refused a largest body: %v", err)
	}
	if _, err := take("a", api.MaxBody-500); err != nil {
		t.Fatalf("the rest of the burst was refused: %v", err)
	}
	// 500 bytes are left: 2,000 more need 1.5 s, announced as 2.
	retry, err := take("a", 2000)
	var pe *posture.Error
	if !errors.As(err, &pe) || pe.Code != posture.CodeTooManyRequests || retry != "2" {
		t.Fatalf("over the budget: %v, Retry-After %q; want %s and 2", err, retry, posture.CodeTooManyRequests)
	}
	// Check answers as Take and takes nothing.
	check := func(n int) error {
		return b.Check(echo.New().NewContext(httptest.NewRequest("POST", "/", nil), httptest.NewRecorder()), "a", n)
	}
	if check(2000) == nil || check(500) != nil || check(500) != nil {
		t.Fatal("Check does not answer as Take, or took something")
	}
	// The refusal took nothing: the 500 bytes left still pass.
	if _, err := take("a", 500); err != nil {
		t.Fatalf("the bytes left after a refusal: %v", err)
	}
	if _, err := take("b", api.MaxBody); err != nil {
		t.Fatalf("another key was refused: %v", err)
	}
	now = now.Add(2 * time.Second) // refills 2,000 bytes
	if _, err := take("a", 2000); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	if _, err := take("a", 1); err == nil {
		t.Fatal("the refill was spent, yet one more byte passed")
	}
	var none *api.Budget
	if err := none.Take(nil, "a", 1<<30); err != nil {
		t.Fatalf("a nil budget limits nothing: %v", err)
	}
}
