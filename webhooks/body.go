package webhooks

import (
	"encoding/json"
	"time"

	"github.com/seed-0809debe/posture"
)

// CloudEvent is the body of a delivery (CloudEvents 1.0, structured JSON
// mode).
type CloudEvent struct {
	SpecVersion     string    `json:"specversion"`
	ID              string    `json:"id"`
	Source          string    `json:"source"`
	Type            string    `json:"type"`
	Subject         string    `json:"subject,omitempty"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            any       `json:"data"`
}

// Event types of deliveries.
const (
	TypePrefix = "io.postured.transition." // and the kind: io.postured.transition.policy-failing
	TypeTest   = "io.postured.test"
	source     = "/postured"
)

// body is the CloudEvent of a transition.
func body(t posture.Transition) ([]byte, error) {
	return json.Marshal(CloudEvent{SpecVersion: "1.0", ID: t.ID, Source: source, Type: TypePrefix + t.Kind,
		Subject: t.IdentityID, Time: t.At.UTC(), DataContentType: "application/json", Data: t})
}
