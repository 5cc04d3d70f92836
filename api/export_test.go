package api

import "time"

// SetTurnWait sets how long a change waits for its subject's turn, until
// restore.
func SetTurnWait(d time.Duration) (restore func()) {
	old := turnWait
	turnWait = d
	return func() { turnWait = old }
}
