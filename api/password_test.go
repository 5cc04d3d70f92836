package api

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

func TestPasswordHash(t *testing.T) {
	h, err := HashPassword(t.Context(), "correct horse")
	if err != nil {
		t.Fatal(err)
	}
	check := func(hash, password string) bool {
		t.Helper()
		ok, err := CheckPassword(t.Context(), hash, password)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !check(h, "correct horse") || check(h, "wrong horse") {
		t.Fatal("argon2id hash does not verify")
	}
	if h == hashPassword("correct horse") {
		t.Fatal("hashes are not salted")
	}
	for _, bad := range []string{"", "plain", "$argon2id$v=19$m=1,t=1,p=1$$"} {
		if check(bad, "x") {
			t.Fatalf("malformed hash %q verified", bad)
		}
	}
}

// TestPasswordChecksAreBounded: at most cap(passwordSlots) argon2id
// computations run at once, each holding 19 MiB; the others wait for a
// slot, and one that waits longer than passwordWait is answered 429 without
// computing anything.
func TestPasswordChecksAreBounded(t *testing.T) {
	h := hashPassword("correct horse")
	var mu sync.Mutex
	running, most := 0, 0
	var wg sync.WaitGroup
	for range 4 * cap(passwordSlots) {
		wg.Go(func() {
			err := withPasswordSlot(t.Context(), func() {
				mu.Lock()
				running++
				most = max(most, running)
				mu.Unlock()
				checkPassword(h, "wrong horse")
				mu.Lock()
				running--
				mu.Unlock()
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if most > cap(passwordSlots) {
		t.Errorf("%d computations at once, want at most %d", most, cap(passwordSlots))
	}

	// Every slot taken: a check waits passwordWait, then is refused.
	defer func(d time.Duration) { passwordWait = d }(passwordWait)
	passwordWait = 50 * time.Millisecond
	for range cap(passwordSlots) {
		passwordSlots <- struct{}{}
	}
	defer func() {
		for range cap(passwordSlots) {
			<-passwordSlots
		}
	}()
	ok, err := CheckPassword(t.Context(), h, "correct horse")
	var pe *posture.Error
	if ok || !errors.As(err, &pe) || pe.Code != posture.CodeTooManyRequests || pe.RetryAfter <= 0 {
		t.Fatalf("with every slot taken: %v %v", ok, err)
	}
	if _, err := HashPassword(t.Context(), "x"); !errors.Is(err, errPasswordsBusy) {
		t.Fatalf("hash with every slot taken: %v", err)
	}
}
