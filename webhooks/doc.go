// Package webhooks delivers posture transitions to HTTP receivers.
//
// Each enabled webhook has a durable JetStream consumer of the transitions
// stream (named with a key, ConsumerName; filtered by the webhook's kinds),
// shared by every node, with at most one message outstanding: deliveries are in stream
// order, so in order per identity, and a message is acknowledged only when
// the receiver answered 2xx. A failed attempt is negatively acknowledged
// with a delay (exponential backoff with jitter, from MinBackoff up to
// MaxBackoff), so the retry schedule lives in the stream and survives a
// restart of any node; a transition older than GiveUpAfter (a day by
// default) is given up. Delivery runs beside ingest and never blocks it: a
// slow or dead receiver only holds its own consumer back. A consumer
// deleted on the server is noticed at the next fetch and made again where
// the node saw it stand.
//
// A delivery follows Standard Webhooks: the headers webhook-id (the
// transition's ID, the same on every retry), webhook-timestamp (Unix
// seconds of the attempt) and webhook-signature ("v1,<base64 HMAC-SHA256
// of id.timestamp.body>" under the webhook's secret "whsec_<base64>"). The
// body is a CloudEvents 1.0 JSON event whose data is the transition.
// Receivers over https are verified against the system roots, or the CA
// given with the webhook; plain http only when the webhook allows it.
//
// Every attempt is recorded as a webhook.attempted event, so that every
// node shows the same recent deliveries.
//
// It imports the root package, nats.go's jetstream and the Standard
// Webhooks library; cmd wires in the store, the secrets and the log.
package webhooks
