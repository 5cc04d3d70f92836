package posture

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// KindWebhook is the kind of webhooks: receivers of transitions.
const KindWebhook = Kind("webhooks")

// FieldWebhookSecret is the sealed field of a webhook's signing secret.
const FieldWebhookSecret = "webhook.secret"

// Webhook is an HTTP receiver of transitions. Deliveries follow Standard
// Webhooks (webhook-id, webhook-timestamp, webhook-signature) with a
// CloudEvents 1.0 JSON body. The signing secret ("whsec_<base64>") is
// sealed for the webhook (FieldWebhookSecret) and never shown again after
// creation.
type Webhook struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	URL  string `json:"url"`
	// SecretSealed is the signing secret, sealed.
	SecretSealed string `json:"secretSealed"`
	// Kinds are the transition kinds delivered; empty: all.
	Kinds   []string `json:"kinds"`
	Enabled bool     `json:"enabled"`
	// AllowInsecureHTTP permits a plain http:// URL.
	AllowInsecureHTTP bool `json:"allowInsecureHttp"`
	// CAPEM, when set, verifies an https receiver instead of the system
	// roots.
	CAPEM     string    `json:"caPem,omitempty"`
	Tags      Tags      `json:"tags"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

func (e Webhook) EntityKind() Kind { return KindWebhook }
func (e Webhook) EntityID() string { return e.ID }

// Delivery outcomes of an attempt.
const (
	DeliveryDelivered = "delivered" // the receiver answered 2xx
	DeliveryRetrying  = "retrying"  // failed; retried after a backoff
	DeliveryFailed    = "failed"    // failed; given up (older than a day)
)

// TypeWebhookAttempted is the event type of WebhookAttempted.
const TypeWebhookAttempted = "webhook.attempted"

// WebhookAttempted records one attempt to deliver a transition (or a test
// event) to a webhook, so that every node shows the same recent attempts.
type WebhookAttempted struct {
	WebhookID  string `json:"webhookId"`
	DeliveryID string `json:"deliveryId"` // the webhook-id header: the transition's ID
	Kind       string `json:"kind"`
	IdentityID string `json:"identityId,omitempty"`
	Attempt    int    `json:"attempt"`
	Status     int    `json:"status,omitempty"` // the HTTP status; 0: no answer
	LatencyMS  int64  `json:"latencyMs"`
	Error      string `json:"error,omitempty"`
	Outcome    string `json:"outcome"`
	// RetryAt is when the next attempt is due (Outcome retrying).
	RetryAt *time.Time `json:"retryAt,omitempty"`
}

func (WebhookAttempted) EventType() string { return TypeWebhookAttempted }
func (p WebhookAttempted) Subject() string { return SubjectFor("webhook", p.WebhookID) }

// WebhookDelivery is a recorded attempt as admins read it.
type WebhookDelivery struct {
	WebhookAttempted
	At time.Time `json:"at"`
}

// MaxWebhookDeliveries is how many recent attempts are kept per webhook.
const MaxWebhookDeliveries = 100

func init() {
	registerEntity[Webhook]()
	register(WebhookAttempted{})
}

// WebhookSecretPrefix starts every signing secret.
const WebhookSecretPrefix = "whsec_"

// NewWebhookSecret returns a fresh signing secret: "whsec_" and the base64 of 32
// random bytes.
func NewWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b)
}

// CheckWebhookSecret validates a secret given by an administrator: "whsec_" and
// the base64 of 24 to 64 bytes.
func CheckWebhookSecret(s string) error {
	raw, ok := strings.CutPrefix(s, WebhookSecretPrefix)
	if !ok {
		return fmt.Errorf("must start with %q", WebhookSecretPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return fmt.Errorf("must be %s followed by base64", WebhookSecretPrefix)
	}
	if len(b) < 24 || len(b) > 64 {
		return fmt.Errorf("must hold 24 to 64 bytes, not %d", len(b))
	}
	return nil
}

// errNoURLCredentials refuses a URL with a user name or password: a URL is
// configuration, kept in clear in the log and shown to admins, while
// secrets are sealed (a webhook's own secret signs its deliveries).
var errNoURLCredentials = errors.New("must not carry a user name or password (the URL is stored and shown in clear; a webhook signs its deliveries with its secret)")

// RedactedURL is raw with its password, if any, replaced: what may be
// echoed in an error.
func RedactedURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if u.User == nil {
			return raw
		}
		return u.Redacted()
	}
	// Not a URL, but it may still hold "user:password@" after its scheme.
	if i := strings.Index(raw, "://"); i >= 0 {
		if j := strings.LastIndex(raw, "@"); j > i {
			return raw[:i+3] + "xxxxx" + raw[j:]
		}
	}
	return raw
}

// CheckWebhookURL validates a receiver URL: absolute, https, or http when insecure
// is allowed.
func CheckWebhookURL(raw string, allowInsecureHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("must be an absolute http(s) URL")
	}
	if u.User != nil {
		return errNoURLCredentials
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowInsecureHTTP {
			return nil
		}
		return errors.New("must be https (plain http needs allowInsecureHttp: true)")
	}
	return errors.New("must be an absolute http(s) URL")
}
