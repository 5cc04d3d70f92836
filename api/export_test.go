package api

import "time"

// SetTurnWait sets how long a change waits for its subject's turn, until
// restore.
func SetTurnWait(d time.Duration) (restore func()) {
	old := turnWait
	turnWait = d
	return func() { turnWait = old }
}

// Touched counts the API sessions with an activity record.
func (a *Auth) Touched() int {
	n := 0
	a.touched.Range(func(any, any) bool { n++; return true })
	return n
}

// PruneTouched is pruneTouched.
func (a *Auth) PruneTouched(now time.Time) { a.pruneTouched(now) }
