package projections

import "github.com/seed-0809debe/posture"

func init() {
	// A checkpoint is a statement about the log's bytes (eventlog verifies
	// it), not about the model: applying it changes nothing but the cursor.
	on(func(*Tx, posture.Event, posture.LogCheckpointed) error { return nil })
}
