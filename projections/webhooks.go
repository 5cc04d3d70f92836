package projections

import (
	"slices"

	"github.com/seed-0809debe/posture"
)

// Webhook keys (besides the entity record):
//
//	u/webhooks/name/<name>     -> id
//	w/d/<webhookId>/<seq>      a recent delivery attempt (posture.WebhookDelivery),
//	                           the last MaxWebhookDeliveries
func deliveryPrefix(webhookID string) []byte { return []byte("w/d/" + webhookID + "/") }

func init() {
	onEntity(entityHooks[posture.Webhook]{beforeDelete: func(tx *Tx, old posture.Webhook) error {
		return tx.delPrefix(deliveryPrefix(old.ID))
	}})
	on(func(tx *Tx, e posture.Event, p posture.WebhookAttempted) error {
		if _, found, err := getOld[posture.Webhook](tx, posture.KindWebhook, p.WebhookID); err != nil || !found {
			return err
		}
		prefix := deliveryPrefix(p.WebhookID)
		if err := tx.put(appendPosition(prefix, e), posture.WebhookDelivery{WebhookAttempted: p, At: e.At}); err != nil {
			return err
		}
		return trimRing(tx, prefix, posture.MaxWebhookDeliveries)
	})
}

// Webhooks lists every webhook in id order.
func (s *Store) Webhooks() ([]posture.Webhook, error) { return List[posture.Webhook](s) }

// WebhookDeliveries lists a webhook's recent delivery attempts, newest
// first.
func (s *Store) WebhookDeliveries(webhookID string) ([]posture.WebhookDelivery, error) {
	var out []posture.WebhookDelivery
	err := scan(s.r(), deliveryPrefix(webhookID), func(_, value []byte) (bool, error) {
		var d posture.WebhookDelivery
		if err := unmarshal(value, &d); err != nil {
			return false, err
		}
		out = append(out, d)
		return true, nil
	})
	slices.Reverse(out)
	return out, err
}
