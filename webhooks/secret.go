package webhooks

import (
	"fmt"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Sign returns the webhook-signature header of a delivery.
func Sign(secret, id string, at time.Time, body []byte) (string, error) {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return "", fmt.Errorf("webhooks: secret: %w", err)
	}
	return wh.Sign(id, at, body)
}
