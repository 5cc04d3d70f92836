package projections

import "github.com/seed-0809debe/posture"

func init() {
	// A skip decision is about the log, not the model: in place of the
	// skipped message and where it was appended, applying it changes
	// nothing but the cursor (eventlog delivers it at both).
	on(func(*Tx, posture.Event, posture.EventSkipped) error { return nil })
}
