package webhooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"

	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// Store lists the webhooks (projections.Store implements it).
type Store interface {
	Webhooks() ([]posture.Webhook, error)
}

// Secrets opens a webhook's sealed secret (*secrets.Keyring implements it).
type Secrets interface {
	OpenString(ctx context.Context, owner, field, sealed string) (string, error)
}

// Log records delivery attempts (eventlog.Log implements it).
type Log interface {
	Append(ctx context.Context, e posture.Event) (uint64, error)
}

// Options configure a Dispatcher.
type Options struct {
	// Stream is the transitions stream; Subjects its subject prefix
	// ("postured-transitions.").
	Stream   jetstream.Stream
	Subjects string
	Store    Store
	Secrets  Secrets
	Log      Log
	Now      func() time.Time
	Logger   *slog.Logger
	// MinBackoff and MaxBackoff bound the delay before a retry (defaults
	// 5s and 1h): the n-th retry waits about MinBackoff*2^(n-1), capped,
	// with equal jitter (half fixed, half random).
	MinBackoff, MaxBackoff time.Duration
	// GiveUpAfter is how old a transition may get before its delivery is
	// given up (default 24h).
	GiveUpAfter time.Duration
	// Timeout bounds one attempt (default 10s).
	Timeout time.Duration
	// Deny are the networks no delivery may connect to (--webhook-deny),
	// checked on each address dialled, after name resolution.
	Deny []*net.IPNet
	// Poll is how often the list of webhooks is read again (default 1s).
	Poll time.Duration
	// NameKey keys the names of the webhooks' consumers (ConsumerName):
	// the same on every node, and secret, so that a reader of the
	// transitions stream (the auditor's credentials may create, pull and
	// acknowledge consumers) cannot name a webhook's consumer to take its
	// deliveries or change its filter.
	NameKey []byte
}

// Dispatcher delivers transitions to the webhooks. Every node may run one:
// the nodes share each webhook's durable consumer.
type Dispatcher struct {
	opts Options
	// started is when the dispatcher was made: a webhook created since
	// never had a consumer under its legacy name (consumer).
	started time.Time
}

// New returns a Dispatcher.
func New(opts Options) *Dispatcher {
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 5 * time.Second
	}
	if opts.MaxBackoff < opts.MinBackoff {
		opts.MaxBackoff = max(time.Hour, opts.MinBackoff)
	}
	if opts.GiveUpAfter <= 0 {
		opts.GiveUpAfter = 24 * time.Hour
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Dispatcher{opts: opts, started: opts.Now()}
}

// ConsumerName is the durable consumer of a webhook: "webhook-" and 32 hex
// characters of an HMAC of its id under the name key. The id alone is in
// the log; the name cannot be derived from it without the key.
func ConsumerName(nameKey []byte, webhookID string) string {
	mac := hmac.New(sha256.New, nameKey)
	mac.Write([]byte(webhookID))
	return "webhook-" + hex.EncodeToString(mac.Sum(nil)[:16])
}

// legacyConsumerName is a webhook's consumer as earlier versions named it,
// after its id alone; consumer moves what such a consumer left to its
// keyed name.
func legacyConsumerName(webhookID string) string { return "webhook-" + webhookID }

func (d *Dispatcher) name(webhookID string) string { return ConsumerName(d.opts.NameKey, webhookID) }

// worker is a running delivery loop of one webhook version.
type worker struct {
	updated time.Time
	cancel  context.CancelFunc
	done    chan struct{}
}

// Run delivers until ctx ends, following the webhooks as they are created,
// changed, disabled and deleted.
func (d *Dispatcher) Run(ctx context.Context) error {
	workers := map[string]*worker{}
	var wg sync.WaitGroup
	defer func() {
		for _, w := range workers {
			w.cancel()
		}
		wg.Wait()
	}()
	t := time.NewTicker(d.opts.Poll)
	defer t.Stop()
	known := map[string]bool{}
	for {
		hooks, err := d.opts.Store.Webhooks()
		if err != nil {
			d.opts.Logger.Error("listing webhooks", "err", err)
		}
		live := map[string]bool{}
		for _, h := range hooks {
			live[h.ID] = true
			known[h.ID] = true
			cur := workers[h.ID]
			if cur != nil && (!h.Enabled || !cur.updated.Equal(h.UpdatedAt)) {
				cur.cancel()
				<-cur.done
				delete(workers, h.ID)
				cur = nil
			}
			if cur == nil && h.Enabled && err == nil {
				wctx, cancel := context.WithCancel(ctx)
				w := &worker{updated: h.UpdatedAt, cancel: cancel, done: make(chan struct{})}
				workers[h.ID] = w
				wg.Add(1)
				go func(h posture.Webhook) {
					defer wg.Done()
					defer close(w.done)
					d.deliver(wctx, h)
				}(h)
			}
		}
		if err == nil {
			for id, w := range workers {
				if !live[id] {
					w.cancel()
					<-w.done
					delete(workers, id)
				}
			}
			// A deleted webhook's consumer goes with it.
			for id := range known {
				if !live[id] {
					delete(known, id)
					for _, name := range []string{d.name(id), legacyConsumerName(id)} {
						if err := d.opts.Stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
							d.opts.Logger.Warn("deleting a webhook's consumer", "webhookId", id, "err", err)
						}
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// consumer creates or updates the webhook's durable consumer: from the
// webhook's creation on, its kinds only, one message outstanding. An
// existing consumer keeps where it is and gets the webhook's kinds again
// (whatever changed them). A consumer under the legacy name of a webhook
// created before this dispatcher started is moved: the new one starts
// after the last message the old one had acknowledged (the one
// outstanding, if any, is delivered again), and the old one is deleted. A
// webhook created since never had one: a consumer under its legacy name
// (which a reader of the log can make) is not looked at. A consumer lost
// while this node delivered (deleted on the server) is made again from
// resume, the stream sequence where it stood: after the last message done
// with, or at the one whose retry was pending (0: from the webhook's
// creation).
func (d *Dispatcher) consumer(ctx context.Context, h posture.Webhook, resume uint64) (jetstream.Consumer, error) {
	name := d.name(h.ID)
	cfg := jetstream.ConsumerConfig{
		Durable:       name,
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &h.CreatedAt,
	}
	if resume > 0 {
		cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, resume
	}
	existing, err := d.opts.Stream.Consumer(ctx, name)
	switch {
	case err == nil:
		cfg = existing.CachedInfo().Config
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return nil, err
	}
	var legacy jetstream.Consumer
	if existing == nil && resume == 0 && h.CreatedAt.Before(d.started) {
		if legacy, err = d.opts.Stream.Consumer(ctx, legacyConsumerName(h.ID)); err == nil {
			if floor := legacy.CachedInfo().AckFloor.Stream; floor > 0 {
				cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, nil, floor+1
			}
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return nil, err
		}
	}
	cfg.Description = "deliveries of a webhook"
	cfg.AckPolicy = jetstream.AckExplicitPolicy
	cfg.AckWait = 2*d.opts.Timeout + 5*time.Second
	cfg.MaxAckPending = 1
	cfg.MaxDeliver = -1
	cfg.FilterSubject, cfg.FilterSubjects = "", nil
	if len(h.Kinds) == 0 {
		cfg.FilterSubject = d.opts.Subjects + ">"
	} else {
		for _, k := range h.Kinds {
			cfg.FilterSubjects = append(cfg.FilterSubjects, d.opts.Subjects+"*."+k)
		}
		if len(cfg.FilterSubjects) == 1 {
			cfg.FilterSubject, cfg.FilterSubjects = cfg.FilterSubjects[0], nil
		}
	}
	var cons jetstream.Consumer
	if existing != nil {
		cons, err = d.opts.Stream.UpdateConsumer(ctx, cfg)
	} else {
		cons, err = d.opts.Stream.CreateConsumer(ctx, cfg)
	}
	if err != nil {
		return nil, err
	}
	if legacy != nil {
		if err := d.opts.Stream.DeleteConsumer(ctx, legacyConsumerName(h.ID)); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			d.opts.Logger.Warn("deleting a webhook's consumer under its legacy name", "webhookId", h.ID, "err", err)
		}
	}
	return cons, nil
}

// deliver runs the delivery loop of one webhook until ctx ends.
func (d *Dispatcher) deliver(ctx context.Context, h posture.Webhook) {
	log := d.opts.Logger.With("webhookId", h.ID)
	var cons jetstream.Consumer
	var secret string
	var resume uint64 // the stream sequence the consumer stands at, as this loop saw it
	client, err := newClient(h, d.opts.Timeout, d.opts.Deny)
	for ctx.Err() == nil {
		if err == nil && secret == "" {
			secret, err = d.opts.Secrets.OpenString(ctx, h.ID, posture.FieldWebhookSecret, h.SecretSealed)
		}
		if err == nil && cons == nil {
			cons, err = d.consumer(ctx, h, resume)
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("webhook delivery cannot start", "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(d.opts.Poll * 5):
			}
			err = nil
			if client == nil {
				client, err = newClient(h, d.opts.Timeout, d.opts.Deny)
			}
			continue
		}
		batch, ferr := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if ferr != nil {
			if ctx.Err() == nil {
				log.Warn("fetching a transition", "err", ferr)
				cons = nil
			}
			continue
		}
		for msg := range batch.Messages() {
			meta, err := msg.Metadata()
			if err != nil {
				d.opts.Logger.Error("a transition without metadata", "webhookId", h.ID, "err", err)
				continue
			}
			if d.handle(ctx, h, client, secret, msg, meta) {
				resume = max(resume, meta.Sequence.Stream+1)
			} else {
				resume = meta.Sequence.Stream
			}
		}
		if berr := batch.Error(); berr != nil && !errors.Is(berr, jetstream.ErrNoMessages) && ctx.Err() == nil {
			log.Debug("fetching a transition", "err", berr)
			// A consumer deleted on the server answers fetches with
			// nothing: make it again where it was.
			if _, err := cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) {
				log.Warn("the webhook's consumer is gone from the server; making it again where it stood", "seq", resume)
				cons = nil
			}
		}
	}
}

// handle makes one attempt at a message and acknowledges it, schedules
// its retry or gives it up, and records the attempt. It reports whether
// the message is done with (delivered, given up or dropped), not to be
// delivered again.
func (d *Dispatcher) handle(ctx context.Context, h posture.Webhook, client *http.Client, secret string, msg jetstream.Msg, meta *jetstream.MsgMetadata) bool {
	var t posture.Transition
	if err := json.Unmarshal(msg.Data(), &t); err != nil || t.ID == "" {
		d.opts.Logger.Error("a transition that does not decode: dropped", "webhookId", h.ID, "seq", meta.Sequence.Stream, "err", err)
		_ = msg.Term()
		return true
	}
	payload, err := body(t)
	if err != nil {
		_ = msg.Term()
		return true
	}
	now := d.opts.Now()
	r := post(ctx, client, h, secret, t.ID, now, payload)
	if ctx.Err() != nil {
		return false // stopping: the message is delivered again later
	}
	rec := posture.WebhookAttempted{WebhookID: h.ID, DeliveryID: t.ID, Kind: t.Kind, IdentityID: t.IdentityID,
		Attempt: int(meta.NumDelivered), Status: r.status, LatencyMS: r.latency.Milliseconds(), Error: r.errText()}
	switch {
	case r.ok():
		rec.Outcome = posture.DeliveryDelivered
		err = msg.Ack()
	case now.Sub(meta.Timestamp) > d.opts.GiveUpAfter:
		rec.Outcome = posture.DeliveryFailed
		err = msg.Term()
	default:
		delay := d.backoff(rec.Attempt)
		at := now.Add(delay).UTC()
		rec.Outcome, rec.RetryAt = posture.DeliveryRetrying, &at
		err = msg.NakWithDelay(delay)
	}
	if err != nil {
		d.opts.Logger.Warn("acknowledging a delivery", "webhookId", h.ID, "err", err)
	}
	d.record(ctx, rec, now)
	return rec.Outcome != posture.DeliveryRetrying
}

// backoff is the delay before retry n (n >= 1): MinBackoff*2^(n-1) capped
// at MaxBackoff, half of it fixed and half random.
func (d *Dispatcher) backoff(n int) time.Duration {
	delay := d.opts.MaxBackoff
	if n <= 40 {
		if x := d.opts.MinBackoff << (max(n, 1) - 1); x > 0 && x < delay {
			delay = x
		}
	}
	half := delay / 2
	return half + rand.N(half+1)
}

// record appends the attempt, timed at its start, with an ID derived from
// the webhook, the delivery and the attempt number.
func (d *Dispatcher) record(ctx context.Context, rec posture.WebhookAttempted, at time.Time) {
	e := posture.MustEvent(rec, at)
	e.ID = posture.DerivedID(posture.TypeWebhookAttempted, rec.WebhookID, rec.DeliveryID, strconv.Itoa(rec.Attempt))
	e.Actor = "postured"
	if _, err := d.opts.Log.Append(ctx, e); err != nil && ctx.Err() == nil {
		d.opts.Logger.Warn("recording a webhook attempt", "webhookId", rec.WebhookID, "err", err)
	}
}

// Test sends a test event to a webhook at once, records the attempt and
// returns it. It does not go through the stream and is not retried.
// Reachable says whether the webhook's URL, when its host is an address,
// is outside --webhook-deny.
func (d *Dispatcher) Reachable(rawURL string) error { return Reachable(rawURL, d.opts.Deny) }

func (d *Dispatcher) Test(ctx context.Context, h posture.Webhook) (posture.WebhookAttempted, error) {
	secret, err := d.opts.Secrets.OpenString(ctx, h.ID, posture.FieldWebhookSecret, h.SecretSealed)
	if err != nil {
		return posture.WebhookAttempted{}, fmt.Errorf("webhooks: open the secret: %w", err)
	}
	client, err := newClient(h, d.opts.Timeout, d.opts.Deny)
	if err != nil {
		return posture.WebhookAttempted{}, err
	}
	now := d.opts.Now()
	id := posture.NewID()
	payload, err := json.Marshal(CloudEvent{SpecVersion: "1.0", ID: id, Source: source, Type: TypeTest, Time: now.UTC(),
		DataContentType: "application/json", Data: map[string]string{"webhookId": h.ID, "message": "a test event from postured"}})
	if err != nil {
		return posture.WebhookAttempted{}, err
	}
	r := post(ctx, client, h, secret, id, now, payload)
	rec := posture.WebhookAttempted{WebhookID: h.ID, DeliveryID: id, Kind: "test", Attempt: 1, Status: r.status,
		LatencyMS: r.latency.Milliseconds(), Error: r.errText(), Outcome: posture.DeliveryDelivered}
	if !r.ok() {
		rec.Outcome = posture.DeliveryFailed
	}
	d.record(ctx, rec, now)
	return rec, nil
}
