package management

import (
	"context"
	"crypto/x509"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// WebhookSender sends a webhook's test event (webhooks.Dispatcher
// implements it).
type WebhookSender interface {
	Test(ctx context.Context, w posture.Webhook) (posture.WebhookAttempted, error)
	// Reachable refuses a URL whose host is an address in --webhook-deny.
	Reachable(url string) error
}

// WebhookStore reads a webhook's recent delivery attempts
// (projections.Store implements it).
type WebhookStore interface {
	WebhookDeliveries(webhookID string) ([]posture.WebhookDelivery, error)
}

type webhookInput struct {
	Name              *string      `json:"name,omitempty"`
	URL               *string      `json:"url,omitempty"`
	Secret            *string      `json:"secret,omitempty"`
	Kinds             []string     `json:"kinds,omitempty"`
	Enabled           *bool        `json:"enabled,omitempty"`
	AllowInsecureHTTP *bool        `json:"allowInsecureHttp,omitempty"`
	CAPEM             *string      `json:"caPem,omitempty"`
	Tags              posture.Tags `json:"tags,omitempty"`
}

func (a *API) webhooks() *resource[posture.Webhook, webhookInput] {
	return &resource[posture.Webhook, webhookInput]{
		a: a, kind: posture.KindWebhook, noun: "webhook",
		input: func(w posture.Webhook, _ time.Time) webhookInput {
			return webhookInput{Name: &w.Name, URL: &w.URL, Kinds: w.Kinds, Enabled: &w.Enabled,
				AllowInsecureHTTP: &w.AllowInsecureHTTP, CAPEM: optional(w.CAPEM), Tags: w.Tags}
		},
		build: a.buildWebhook,
		view:  pure(webhookView),
		shred: true,
	}
}

// webhookRoutes are the webhook operations: list, get, update, patch and
// delete as for every resource; a create that answers the generated secret
// once; the recent deliveries; a test event.
func (a *API) webhookRoutes() []api.Route {
	r := a.webhooks()
	routes := r.routes()
	for i := range routes {
		if routes[i].Method == http.MethodPost {
			routes[i].Handler = a.createWebhook
		}
	}
	return append(routes,
		api.Route{Method: http.MethodGet, Path: "/webhooks/:id/deliveries", Access: api.Admin, Handler: a.webhookDeliveries},
		api.Route{Method: http.MethodPost, Path: "/webhooks/:id/test", Access: api.Admin, Handler: a.testWebhook},
	)
}

// buildWebhook validates a webhook. The secret is set on create only (see
// createWebhook); an update that names one is refused.
func (a *API) buildWebhook(in webhookInput, old *posture.Webhook, now time.Time) (posture.Webhook, error) {
	var w posture.Webhook
	var oldID string
	var oldCreated time.Time
	if old != nil {
		oldID, oldCreated, w.SecretSealed = old.ID, old.CreatedAt, old.SecretSealed
		if in.Secret != nil {
			return w, posture.Invalid("secret", "is set when the webhook is created and cannot change: create a new webhook to rotate it", nil)
		}
	}
	w.ID, w.CreatedAt = times(oldID, oldCreated, old == nil, now)
	w.UpdatedAt = now
	var err error
	if w.Name, err = name("name", in.Name); err != nil {
		return w, err
	}
	if err := a.unique(posture.KindWebhook, w.Name, w.ID); err != nil {
		return w, err
	}
	w.AllowInsecureHTTP = deref(in.AllowInsecureHTTP, false)
	w.URL = strings.TrimSpace(deref(in.URL, ""))
	if w.URL == "" {
		return w, posture.Invalid("url", "is required", nil)
	}
	if err := posture.CheckWebhookURL(w.URL, w.AllowInsecureHTTP); err != nil {
		return w, posture.Invalid("url", err.Error(), posture.RedactedURL(w.URL))
	}
	if old == nil || old.URL != w.URL { // one kept as it was delivers as it did
		if err := a.reachable("url", w.URL); err != nil {
			return w, err
		}
	}
	w.Kinds = []string{}
	for i, k := range in.Kinds {
		if !slices.Contains(posture.TransitionKinds, k) {
			return w, posture.Invalid("kinds["+strconv.Itoa(i)+"]", "must be one of "+strings.Join(posture.TransitionKinds, ", "), k)
		}
		if !slices.Contains(w.Kinds, k) {
			w.Kinds = append(w.Kinds, k)
		}
	}
	w.Enabled = deref(in.Enabled, true)
	if w.CAPEM = strings.TrimSpace(deref(in.CAPEM, "")); w.CAPEM != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(w.CAPEM)) {
		return w, posture.Invalid("caPem", "holds no PEM certificate", nil)
	}
	if w.Tags, err = tags(in.Tags); err != nil {
		return w, err
	}
	return w, nil
}

func webhookView(w posture.Webhook) any {
	return map[string]any{
		"id": w.ID, "name": w.Name, "url": w.URL, "kinds": w.Kinds, "enabled": w.Enabled,
		"allowInsecureHttp": w.AllowInsecureHTTP, "caPem": optional(w.CAPEM), "hasSecret": w.SecretSealed != "",
		"tags": w.Tags, "createdAt": api.Time(w.CreatedAt), "updatedAt": api.Time(w.UpdatedAt),
		"_links": api.SelfLink(string(posture.KindWebhook), w.ID),
	}
}

// createdWebhook is the answer of a create: the secret, shown this once.
type createdWebhook struct {
	ID     string    `json:"id"`
	Secret string    `json:"secret,omitempty"`
	Links  api.Links `json:"_links"`
}

// createWebhook is POST /webhooks: the secret given, or a generated one,
// is sealed for the new webhook; a generated secret is answered once.
func (a *API) createWebhook(c echo.Context) error {
	var in webhookInput
	if err := decodeObject(c, &in); err != nil {
		return err
	}
	secret, generated := "", false
	if in.Secret != nil && *in.Secret != "" {
		secret = *in.Secret
		if err := posture.CheckWebhookSecret(secret); err != nil {
			return posture.Invalid("secret", err.Error(), nil) // never echo a secret
		}
	} else {
		secret, generated = posture.NewWebhookSecret(), true
	}
	in.Secret = nil
	var id string
	err := a.Writer.Model(c, func() ([]posture.Payload, error) {
		w, err := a.buildWebhook(in, nil, a.Writer.Now().UTC())
		if err != nil {
			return nil, err
		}
		if w.SecretSealed, err = api.Seal(c.Request().Context(), a.Secrets, w.ID, posture.FieldWebhookSecret, secret); err != nil {
			return nil, err
		}
		id = w.ID
		return []posture.Payload{posture.Created[posture.Webhook]{Entity: w}}, nil
	})
	if err != nil {
		return err
	}
	out := createdWebhook{ID: id, Links: api.SelfLink(string(posture.KindWebhook), id)}
	if generated {
		out.Secret = secret
	}
	return c.JSON(http.StatusCreated, api.Envelope{Data: out})
}

type deliveryView struct {
	posture.WebhookAttempted
	At      api.Time  `json:"at"`
	RetryAt *api.Time `json:"retryAt,omitempty"`
}

// webhookDeliveries is GET /webhooks/:id/deliveries: the recent attempts,
// newest first.
func (a *API) webhookDeliveries(c echo.Context) error {
	w, err := get[posture.Webhook](a.Store, "webhook", c.Param("id"))
	if err != nil {
		return err
	}
	ds, err := a.Deliveries.WebhookDeliveries(w.ID)
	if err != nil {
		return err
	}
	out := make([]any, 0, len(ds))
	for _, d := range ds {
		v := deliveryView{WebhookAttempted: d.WebhookAttempted, At: api.Time(d.At), RetryAt: api.TimePtr(d.RetryAt)}
		v.WebhookAttempted.RetryAt = nil
		out = append(out, v)
	}
	return api.List(c, out)
}

// testWebhook is POST /webhooks/:id/test: a test event sent at once; the
// answer is the attempt.
func (a *API) testWebhook(c echo.Context) error {
	w, err := get[posture.Webhook](a.Store, "webhook", c.Param("id"))
	if err != nil {
		return err
	}
	if a.Webhooks == nil {
		return &posture.Error{Code: posture.CodeNotFound, Message: "webhook delivery is not configured on this node"}
	}
	att, err := a.Webhooks.Test(c.Request().Context(), w)
	if err != nil {
		return err
	}
	return api.OK(c, att)
}

// reachable refuses, on field, a URL the node may not reach: its host is an
// address in --webhook-deny (webhook deliveries and key-set fetches alike).
func (a *API) reachable(field, url string) error {
	if a.Webhooks == nil {
		return nil
	}
	if err := a.Webhooks.Reachable(url); err != nil {
		return posture.Invalid(field, err.Error(), posture.RedactedURL(url))
	}
	return nil
}
