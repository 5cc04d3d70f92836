package projections

import (
	"fmt"

	"github.com/seed-0809debe/posture"
)

// handler applies one decoded event to the batch. Handlers are deterministic:
// they read only the event and the store.
type handler func(tx *Tx, e posture.Event, p posture.Payload) error

var handlers = map[string]handler{}

// on registers the handler of payload type P.
func on[P posture.Payload](f func(tx *Tx, e posture.Event, p P) error) {
	var zero P
	typ := zero.EventType()
	if _, dup := handlers[typ]; dup {
		panic("projections: two handlers for " + typ)
	}
	handlers[typ] = func(tx *Tx, e posture.Event, p posture.Payload) error { return f(tx, e, p.(P)) }
}

func apply(tx *Tx, e posture.Event) error {
	p, err := e.Decode()
	if err != nil {
		return fmt.Errorf("projections: %w", err)
	}
	tx.event = e
	if e.Part == 0 {
		tx.transitions = 0 // counted per message (transitionKey)
	}
	h, ok := handlers[e.Type]
	if !ok {
		return fmt.Errorf("projections: event %d: no handler for %q", e.Seq, e.Type)
	}
	if err := h(tx, e, p); err != nil {
		return fmt.Errorf("projections: event %d (%s): %w", e.Seq, e.Type, err)
	}
	if err := tx.flushHistory(); err != nil {
		return fmt.Errorf("projections: event %d (%s): %w", e.Seq, e.Type, err)
	}
	return nil
}
