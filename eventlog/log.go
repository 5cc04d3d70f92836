package eventlog

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gojson "github.com/goccy/go-json"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
)

// Options configures Open.
type Options struct {
	// URLs of an external NATS server or cluster. Empty runs an embedded
	// server with its store in Dir.
	URLs []string
	// Dir is the embedded server's store directory.
	Dir string
	// Listen, when set, makes the embedded server accept NATS clients on
	// this host:port (for example so that `postured events tail` can follow
	// a running node). Empty opens no port. A listening server requires TLS
	// (ListenTLS) and authenticates every client as one of the users whose
	// seeds it keeps in CredsDir (see Credentials).
	Listen string
	// ListenTLS holds the certificate the embedded server presents on
	// Listen. Required with Listen.
	ListenTLS *tls.Config
	// CredsDir is where the embedded server with Listen keeps the nkey
	// seeds of its users, one file per role (default Dir/creds). They are
	// created on the first start.
	CredsDir string
	// Auth authenticates and secures the connection to the external
	// server (URLs).
	Auth ClientAuth
	// ConnectTimeout bounds the first connection to an external server
	// (default 6s): an unreachable server, refused credentials or an
	// untrusted certificate fail Open with the URL and the cause.
	ConnectTimeout time.Duration
	// Existing opens the stream only if it exists, without creating or
	// updating it: what readers (audit, replay, events tail) do, so that
	// they need no permission to change the stream.
	Existing bool
	// Stream is the stream name (default "POSTURED"); its subjects are
	// "<lowercase stream>.>".
	Stream string
	// Replicas of the stream (default 1).
	Replicas int
	// SyncAlways makes the embedded server fsync before acknowledging each
	// write. Ignored for external servers, whose configuration decides.
	SyncAlways bool
	// Duplicates is the deduplication window (default 2 minutes).
	Duplicates time.Duration
	// DiskReserve is the free space the embedded store's file system must
	// keep: appends are refused (503, out of disk space) below it, and
	// resume by themselves once it is free again (see Space). 0 refuses
	// nothing before the disk is full. Ignored for external servers.
	DiskReserve int64
	// Logger receives connection events and the embedded server's log
	// (default: discard).
	Logger *slog.Logger
	// GroupCommit lets concurrent appends of the high-rate facts
	// (posture responses, sessions created or denied, API session
	// activity) share one message of the stream (see batch.go): one
	// publish, one acknowledgement and one delivery for many events.
	// Other events, and every conditional append, keep a message each.
	GroupCommit bool
}

// Log is a handle on the event stream. It is safe for concurrent use.
type Log struct {
	ns     *server.Server // nil when external
	nc     *nats.Conn
	js     jetstream.JetStream
	stream jetstream.Stream
	name   string
	prefix string
	log    *slog.Logger
	creds  []Credential // the embedded server's users, with Listen

	kvMu sync.Mutex
	kv   jetstream.KeyValue // the node registry, opened on first use (nodes.go)

	stopping sync.WaitGroup // stops of stalled consumers (consume.go)

	group *committer // nil without Options.GroupCommit (batch.go)
	// sessions is the group commit of session decisions (see lane).
	sessions *committer

	guard     *guard        // the embedded store's disk (space.go)
	stopGuard chan struct{} // closed by Close
	guarding  sync.WaitGroup
}

// Open connects to (or starts) the NATS server and creates the stream if it
// does not exist yet.
func Open(ctx context.Context, opts Options) (*Log, error) {
	if opts.Stream == "" {
		opts.Stream = "POSTURED"
	}
	if opts.Replicas <= 0 {
		opts.Replicas = 1
	}
	if opts.Duplicates <= 0 {
		opts.Duplicates = 2 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{name: opts.Stream, prefix: strings.ToLower(opts.Stream) + ".", log: opts.Logger}

	var err error
	inbox := InboxNode
	if opts.Existing {
		inbox = InboxReader
	}
	natsOpts := []nats.Option{
		nats.Name("postured"),
		nats.CustomInboxPrefix(inbox),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				opts.Logger.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) { opts.Logger.Info("nats reconnected", "url", redactURL(c.ConnectedUrl())) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			// Permission violations and slow consumers arrive here,
			// not as the result of the call that caused them.
			opts.Logger.Warn("nats error", "err", err)
		}),
	}
	if len(opts.URLs) == 0 {
		if opts.Dir == "" {
			return nil, errors.New("eventlog: Dir is required for the embedded server")
		}
		l.guard = &guard{dir: opts.Dir, reserve: opts.DiskReserve, log: opts.Logger,
			jsCfg: server.JetStreamConfig{StoreDir: opts.Dir, SyncAlways: opts.SyncAlways, MaxStore: maxStore, MaxMemory: maxMemory, Strict: true}}
		emb := embedded{dir: opts.Dir, listen: opts.Listen, tls: opts.ListenTLS, stream: opts.Stream,
			syncAlways: opts.SyncAlways, log: opts.Logger, onError: l.guard.serverError}
		if opts.Listen != "" {
			if opts.CredsDir == "" {
				opts.CredsDir = filepath.Join(opts.Dir, "creds")
			}
			if l.creds, err = LoadOrCreateCredentials(opts.CredsDir); err != nil {
				return nil, err
			}
			emb.users = l.creds
			// The node itself connects in process, as a postured user.
			o, err := nats.NkeyOptionFromSeed(seedFileName(opts.CredsDir, RolePostured))
			if err != nil {
				return nil, fmt.Errorf("eventlog: %w", err)
			}
			natsOpts = append(natsOpts, o)
		}
		if l.ns, err = startEmbedded(emb); err != nil {
			return nil, err
		}
		l.guard.ns = l.ns
		l.stopGuard = make(chan struct{})
		l.guarding.Go(func() { l.guard.watch(l.stopGuard) })
		natsOpts = append(natsOpts, nats.InProcessServer(l.ns))
		if l.nc, err = nats.Connect("", natsOpts...); err != nil {
			l.Close()
			return nil, fmt.Errorf("eventlog: connect to the embedded server: %w", err)
		}
	} else {
		auth, err := opts.Auth.natsOptions()
		if err != nil {
			return nil, err
		}
		if opts.ConnectTimeout <= 0 {
			opts.ConnectTimeout = 6 * time.Second
		}
		if l.nc, err = connect(ctx, opts.URLs, opts.ConnectTimeout, append(natsOpts, auth...)); err != nil {
			return nil, err
		}
	}
	if l.js, err = jetstream.New(l.nc); err != nil {
		l.Close()
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	cfg := jetstream.StreamConfig{
		Name:        opts.Stream,
		Description: "postured event log",
		Subjects:    []string{l.prefix + ">"},
		Storage:     jetstream.FileStorage,
		Replicas:    opts.Replicas,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		Duplicates:  opts.Duplicates,
		AllowDirect: true,
	}
	noJetStreamNoted := false
	err = retry(ctx, func(ctx context.Context) error {
		var err error
		if opts.Existing {
			l.stream, err = l.js.Stream(ctx, opts.Stream)
		} else {
			l.stream, err = l.ensureStream(ctx, cfg)
		}
		if err != nil {
			// A user who may not change the stream gets no answer, only
			// an asynchronous permissions violation: not worth a retry.
			if denied := l.denied("$JS.API.STREAM.INFO." + opts.Stream); opts.Existing && denied != nil {
				return fmt.Errorf("these NATS credentials may not read the stream; reading needs the auditor's or postured's credentials: %w", denied)
			}
			if denied := l.streamDenied(opts.Stream); denied != nil {
				return denied
			}
			if denied := l.inboxDenied(inbox); denied != nil {
				return denied
			}
			// No responders: nothing serves the JetStream API for this
			// account, yet. A server still starting answers soon; one
			// without JetStream never does, so say so while waiting.
			if errors.Is(err, nats.ErrNoResponders) && !noJetStreamNoted {
				noJetStreamNoted = true
				opts.Logger.Warn("eventlog: no JetStream answers; waiting for it ("+askJetStream+")", "url", l.serverURL())
			}
		}
		return err
	})
	if err != nil {
		where := l.serverURL()
		l.Close()
		if errors.Is(err, nats.ErrNoResponders) {
			where += " (no JetStream answered: " + askJetStream + ")"
		}
		return nil, fmt.Errorf("eventlog: stream %s on %s: %w", opts.Stream, where, err)
	}
	if opts.GroupCommit {
		l.group, l.sessions = newCommitter(l), newCommitter(l)
	}
	return l, nil
}

// Close disconnects and stops the embedded server, if any.
func (l *Log) Close() error {
	if l.stopGuard != nil {
		close(l.stopGuard)
		l.guarding.Wait()
		l.stopGuard = nil
	}
	if l.nc != nil {
		l.nc.Close()
	}
	l.stopping.Wait() // their requests fail once the connection is closed
	if l.ns != nil {
		l.ns.Shutdown()
		l.ns.WaitForShutdown()
	}
	return nil
}

// Credentials are the users of the embedded server with Listen and where
// their seeds are (nil otherwise).
func (l *Log) Credentials() []Credential { return append([]Credential(nil), l.creds...) }

// ListenURL is the URL NATS clients reach the embedded server at
// ("tls://host:port"), or "" when it opens no port.
func (l *Log) ListenURL() string {
	if l.ns == nil || len(l.creds) == 0 {
		return ""
	}
	addr, ok := l.ns.Addr().(*net.TCPAddr)
	if !ok {
		return ""
	}
	return "tls://" + addr.String()
}

// Conn is the underlying NATS connection (for key-value buckets and the like).
func (l *Log) Conn() *nats.Conn { return l.nc }

// JetStream is the JetStream context of the connection.
func (l *Log) JetStream() jetstream.JetStream { return l.js }

// Append writes e and returns its sequence once the stream has acknowledged
// it. A retry of the same event ID within the deduplication window returns
// the original sequence. Transient failures (no quorum, reconnects) are
// retried with the same ID until ctx ends.
func (l *Log) Append(ctx context.Context, e posture.Event) (uint64, error) {
	return l.append(ctx, e)
}

// AppendIfLast is Append with optimistic concurrency: it fails with a
// CONFLICT error unless the last event on the event's subject has sequence
// last (0: no event on the subject yet).
func (l *Log) AppendIfLast(ctx context.Context, e posture.Event, last uint64) (uint64, error) {
	return l.append(ctx, e, jetstream.WithExpectLastSequencePerSubject(last))
}

func (l *Log) append(ctx context.Context, e posture.Event, opts ...jetstream.PublishOpt) (uint64, error) {
	if e.ID == "" || e.Type == "" || e.Subject == "" {
		return 0, errors.New("eventlog: event needs an ID, a Type and a Subject")
	}
	body, err := encode(e)
	if err != nil {
		return 0, fmt.Errorf("eventlog: encode: %w", err)
	}
	if err := l.fits(e, body); err != nil {
		return 0, err
	}
	if l.group != nil && len(opts) == 0 && batchable[e.Type] {
		return l.lane(e.Type).append(ctx, e, body)
	}
	msg := &nats.Msg{Subject: l.prefix + e.Subject, Data: body}
	return l.publish(ctx, msg, e.ID, e, opts...)
}

// publish writes msg with the message id id and returns its sequence once
// the stream has acknowledged it. e names what is written in errors.
func (l *Log) publish(ctx context.Context, msg *nats.Msg, id string, e posture.Event, opts ...jetstream.PublishOpt) (uint64, error) {
	pub := append([]jetstream.PublishOpt{jetstream.WithMsgID(id), jetstream.WithExpectStream(l.name)}, opts...)
	// However long ctx is, an append gives up after maxAppendWait: a
	// handler never waits on the log without a deadline.
	ctx, cancel := context.WithTimeout(ctx, maxAppendWait)
	defer cancel()
	var seq uint64
	var fullSince, refusedSince time.Time
	// Each attempt waits for its acknowledgement at most appendAttempt,
	// so that an acknowledgement lost with a server that died is soon
	// asked again. The retry carries the same message id.
	err := retryWithin(ctx, appendAttempt, func(ctx context.Context) error {
		if err := l.checkSpace(); err != nil {
			return err // not transient: answered at once
		}
		ack, err := l.js.PublishMsg(ctx, msg, pub...)
		if isOutOfSpace(err) {
			// The embedded server is out of space for good (until the
			// watcher sees space again); a cluster may elect a leader
			// that has some: retried for outOfSpaceGrace.
			if fullSince.IsZero() {
				fullSince = time.Now()
			}
			if l.guard != nil || time.Since(fullSince) >= outOfSpaceGrace {
				return outOfSpace("the event log is out of disk space: "+err.Error(), err)
			}
		}
		if apiErr := refusal(err); apiErr != nil {
			// A refusal another try will not change (a stream limit, a
			// store failure): retried for refusalGrace on a cluster, whose
			// next leader may think otherwise, then answered.
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if l.guard != nil || time.Since(refusedSince) >= refusalGrace {
				return refused(apiErr)
			}
		}
		if err != nil {
			if denied := l.denied(msg.Subject); denied != nil {
				return fmt.Errorf("%s: %w", readOnly, denied) // not worth another try
			}
			return err
		}
		seq = ack.Sequence
		return nil
	})
	if err != nil {
		if isWrongLastSeq(err) {
			return 0, &posture.Error{Code: posture.CodeConflict, Err: err}
		}
		if errors.Is(err, nats.ErrMaxPayload) {
			return 0, tooLarge(e, len(msg.Data), l.nc.MaxPayload(), err)
		}
		if errors.Is(err, posture.ErrOutOfSpace) {
			return 0, err
		}
		if errors.Is(err, ErrRefused) {
			var apiErr *jetstream.APIError
			errors.As(err, &apiErr)
			l.log.Error("eventlog: the event log refuses writes", "stream", l.name, "type", e.Type,
				"status", apiErr.Code, "code", int(apiErr.ErrorCode), "reason", apiErr.Description)
			return 0, err
		}
		return 0, fmt.Errorf("eventlog: append %s: %w", e.Type, err)
	}
	return seq, nil
}

// maxAppendWait bounds an append, retries included.
const maxAppendWait = 30 * time.Second

// outOfSpaceGrace is how long an external server's out-of-space answers are
// retried before an append fails with them.
const outOfSpaceGrace = 3 * time.Second

// refusalGrace is how long an external server's refusals (see refusal) are
// retried before an append fails with them.
const refusalGrace = 3 * time.Second

// ErrRefused marks an append the stream refused for a reason retrying will
// not change: a stream limit reached (maximum messages or bytes with the
// discard-new policy), a store that failed, JetStream not enabled for the
// account. The error is a SERVICE_UNAVAILABLE posture.Error.
var ErrRefused = errors.New("eventlog: the stream refused the write")

// refusal returns err's JetStream answer if it is a 503 that another try
// will not change. Out of space is not one of them (see isOutOfSpace); nor
// are a cluster without quorum or a leader election, which pass.
func refusal(err error) *jetstream.APIError {
	if err == nil {
		return nil // without a target for errors.As, which would escape
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 || isOutOfSpace(err) {
		return nil
	}
	switch apiErr.ErrorCode {
	case jsErrClusterNotAvailable, jsErrClusterIncomplete, jsErrLastSeqPerSubjectNotReady:
		return nil
	}
	return apiErr
}

// refused is the error of an append refused by the stream.
func refused(apiErr *jetstream.APIError) error {
	return &posture.Error{Code: posture.CodeUnavailable, Err: fmt.Errorf("%w: %w", ErrRefused, apiErr),
		Message: fmt.Sprintf("the event log refused the write (%s, JetStream error %d): it was not stored; retrying will not help until an operator acts (see the log)",
			apiErr.Description, apiErr.ErrorCode)}
}

// Error codes of nats-server for the refusals that pass.
const (
	jsErrClusterNotAvailable       = jetstream.ErrorCode(server.JSClusterNotAvailErr)
	jsErrClusterIncomplete         = jetstream.ErrorCode(server.JSClusterIncompleteErr)
	jsErrLastSeqPerSubjectNotReady = jetstream.ErrorCode(server.JSStreamExpectedLastSeqPerSubjectNotReady)
)

// headerRoom is what the headers of an append (message id, expected stream
// and last sequence) take of the server's payload limit, with a margin.
const headerRoom = 512

// Fits fails as Append would, with REQUEST_ENTITY_TOO_LARGE, when e is
// larger than the log takes (the server's max_payload).
func (l *Log) Fits(e posture.Event) error {
	body, err := encode(e)
	if err != nil {
		return fmt.Errorf("eventlog: encode: %w", err)
	}
	return l.fits(e, body)
}

// fits fails with REQUEST_ENTITY_TOO_LARGE when the encoded event would
// exceed the largest message the server accepts (max_payload, 1 MiB by
// default), which the client would otherwise refuse with a bare
// ErrMaxPayload.
func (l *Log) fits(e posture.Event, body []byte) error {
	limit := l.nc.MaxPayload() - headerRoom
	if limit > 0 && int64(len(body)) > limit {
		return tooLarge(e, len(body), limit, nats.ErrMaxPayload)
	}
	return nil
}

// readOnly says what a permissions violation on a write means: the
// credentials are a reader's.
const readOnly = "these NATS credentials may not write to the event log (read-only credentials, such as the auditor's?): " +
	"serving and every command that writes to it (events skip, admin recover) need postured's credentials, the postured role"

// denied is the connection's last error if it is the server refusing a
// publish to subject: a user without the permission gets no reply, only that
// asynchronous error, so the publish itself times out.
func (l *Log) denied(subject string) error {
	err := l.nc.LastError()
	if err != nil && errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `"`+subject+`"`) {
		return err
	}
	return nil
}

// inboxDenied is the error of credentials that may not subscribe to the
// connection's replies: a reader's where a node's are needed, or a
// server whose permissions predate the inboxes of their own that nodes
// and readers use. Not worth a retry.
func (l *Log) inboxDenied(prefix string) error {
	err := l.nc.LastError()
	if err == nil || !errors.Is(err, nats.ErrPermissionViolation) || !strings.Contains(err.Error(), `Subscription to "`+prefix+`.`) {
		return nil
	}
	old := fmt.Sprintf("the server's permissions predate the reply subjects of their own that nodes (%s.>) and readers (%s.>) use, "+
		"so that readers cannot read a node's replies: give the postured user both and the auditor %s.> (deploy/nats/accounts.conf)",
		InboxNode, InboxReader, InboxReader)
	if prefix == InboxNode {
		return fmt.Errorf("%s; or %s: %w", readOnly, old, err)
	}
	return fmt.Errorf("these NATS credentials may not subscribe to %s.>, where a reader takes its replies: %s: %w", prefix, old, err)
}

func tooLarge(e posture.Event, size int, limit int64, err error) error {
	return &posture.Error{
		Code: posture.CodeRequestEntityTooLarge,
		Message: fmt.Sprintf("the %s event of this request would take %d bytes as JSON, more than the %d bytes the event log accepts: send less in one request",
			e.Type, size, limit),
		Err: err,
	}
}

// appendAttempt bounds one attempt of an append (shorter than
// requestTimeout: a write waits on no election of its own).
const appendAttempt = 2 * time.Second

// LastSeq is the sequence of the newest event in the log (0 when empty).
func (l *Log) LastSeq(ctx context.Context) (uint64, error) {
	st, err := l.State(ctx)
	return st.LastSeq, err
}

// LastSubjectSeq is the sequence of the newest event on subject (0 if none).
func (l *Log) LastSubjectSeq(ctx context.Context, subject string) (uint64, error) {
	var last uint64
	err := retry(ctx, func(ctx context.Context) error {
		m, err := l.stream.GetLastMsgForSubject(ctx, l.prefix+subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			last = 0
			return nil
		}
		if err != nil {
			return err
		}
		last = m.Sequence
		return nil
	})
	return last, err
}

// Get reads the event at seq. A message that is not an event is a
// *BadEventError; a batch of events (batch.go) is an error too: Read reads
// its events.
func (l *Log) Get(ctx context.Context, seq uint64) (posture.Event, error) {
	m, err := l.stream.GetMsg(ctx, seq)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return posture.Event{}, posture.ErrNotFound
		}
		return posture.Event{}, err
	}
	events, err := decodeMessage(l.prefix, m.Subject, m.Data, m.Sequence, m.Time)
	if err != nil {
		return posture.Event{}, err
	}
	if len(events) > 1 {
		return posture.Event{}, fmt.Errorf("eventlog: the message at %d is a batch of %d events", seq, len(events))
	}
	return events[0], nil
}

// encode is json.Marshal of the event, without re-validating its payload:
// payloads come from json.Marshal, so validating and compacting them a
// second time (as marshalling a json.RawMessage does) is wasted work. The
// envelope's fields are written directly, as json.Marshal writes them.
func encode(e posture.Event) ([]byte, error) {
	data := []byte(e.Data)
	if len(data) == 0 {
		data = []byte("null")
	}
	out := make([]byte, 0, 128+len(e.ID)+len(e.Type)+len(e.Subject)+len(e.Actor)+len(e.RequestID)+len(data))
	out = append(out, `{"id":`...)
	out = appendJSONString(out, e.ID)
	out = append(out, `,"type":`...)
	out = appendJSONString(out, e.Type)
	out = append(out, `,"schema":`...)
	out = strconv.AppendInt(out, int64(e.Schema), 10)
	out = append(out, `,"subject":`...)
	out = appendJSONString(out, e.Subject)
	out = append(out, `,"at":"`...)
	out, err := e.At.AppendText(out) // what MarshalJSON writes, and refuses
	if err != nil {
		return nil, fmt.Errorf("the event's time: %w", err)
	}
	out = append(out, '"')
	if e.Actor != "" {
		out = append(out, `,"actor":`...)
		out = appendJSONString(out, e.Actor)
	}
	if e.RequestID != "" {
		out = append(out, `,"requestId":`...)
		out = appendJSONString(out, e.RequestID)
	}
	out = append(out, `,"data":`...)
	out = append(out, data...)
	return append(out, '}'), nil
}

// appendJSONString appends s as json.Marshal writes a string: as it is when
// it needs no escape (ids, types and subjects), through json.Marshal
// otherwise.
func appendJSONString(out []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f || b == '"' || b == '\\' || b == '<' || b == '>' || b == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(out, q...)
		}
	}
	out = append(out, '"')
	out = append(out, s...)
	return append(out, '"')
}

// decode reads an event's JSON; decodeStored checks that it is one.
func decode(data []byte, seq uint64) (posture.Event, error) {
	var e posture.Event
	if err := unmarshal(data, &e); err != nil {
		return e, err
	}
	e.Seq = seq
	return e.DecodedWith(unmarshal), nil
}

// unmarshal reads what encoding/json wrote as encoding/json does, with
// go-json, which decodes our events about twice as fast.
func unmarshal(data []byte, v any) error { return gojson.Unmarshal(data, v) }

// requestTimeout bounds one attempt of a request to JetStream. The client
// applies its own 5s default only to a ctx without a deadline; with one, a
// reply lost with a server that died (or a request dropped while the
// cluster elects a leader) would hold the attempt until ctx ends.
const requestTimeout = 5 * time.Second

// retry runs f until it succeeds, fails with a permanent error, or ctx ends;
// each attempt gets a ctx bounded by requestTimeout. Timeouts and missing
// responders (a stream without quorum, a reconnecting client) are transient.
func retry(ctx context.Context, f func(ctx context.Context) error) error {
	return retryWithin(ctx, requestTimeout, f)
}

// retryWithin is retry with each attempt bounded by attempt.
func retryWithin(ctx context.Context, attempt time.Duration, f func(ctx context.Context) error) error {
	backoff := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		// A per-call deadline that passed while ctx is still alive (the
		// client's default request timeout) is transient too.
		callTimeout := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		if !callTimeout && !transient(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

func transient(err error) bool {
	if errors.Is(err, posture.ErrOutOfSpace) || errors.Is(err, ErrRefused) {
		return false // decided: the server's answer was retried long enough
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 503 (no quorum, leader election) and 408 are worth another try.
		return apiErr.Code == 503 || apiErr.Code == 408
	}
	return errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, nats.ErrConnectionReconnecting)
}

func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// connect makes the first connection to an external server or cluster. It
// tries again while the servers cannot be reached, for at most budget (and
// within ctx), and gives up at once on a refusal that another try would not
// change: bad credentials, an untrusted certificate, TLS required on one side
// only. Its error names the URLs (passwords redacted) and the cause.
func connect(ctx context.Context, urls []string, budget time.Duration, opts []nats.Option) (*nats.Conn, error) {
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = redactURL(u)
	}
	where := strings.Join(shown, ",")
	start := time.Now()
	backoff := 100 * time.Millisecond
	// One attempt dials every server in turn: bound each dial so that an
	// attempt over servers that drop packets fits the budget.
	opts = append(opts, nats.Timeout(min(max(budget/time.Duration(2*len(urls)), 500*time.Millisecond), 2*time.Second)))
	for {
		tried := time.Now()
		nc, err := nats.Connect(strings.Join(urls, ","), opts...)
		if err == nil {
			return nc, nil
		}
		took := time.Since(tried)
		if permanentConnectError(err) || time.Since(start)+took+backoff > budget {
			if errors.Is(err, nats.ErrNoServers) {
				// The client keeps no reason: find one.
				if cause := dialError(urls); cause != nil {
					err = fmt.Errorf("%w (%v)", err, cause)
				}
			}
			return nil, fmt.Errorf("eventlog: connect to %s: %w", where, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("eventlog: connect to %s: %w (last error: %v)", where, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// permanentConnectError: a refusal that does not go away by trying again.
func permanentConnectError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
	)
	return errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) ||
		errors.Is(err, nats.ErrAuthRevoked) || errors.Is(err, nats.ErrAccountAuthExpired) ||
		errors.Is(err, nats.ErrSecureConnRequired) || errors.Is(err, nats.ErrSecureConnWanted) ||
		errors.Is(err, nats.ErrClientCertOrRootCAsRequired) ||
		errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation") ||
		strings.Contains(err.Error(), "certificate")
}

// dialError is the error of a TCP connection to the first URL that cannot
// be reached (nil if all can).
func dialError(urls []string) error {
	for _, u := range urls {
		hostport := u
		if p, err := url.Parse(u); err == nil && p.Host != "" {
			hostport = p.Host
		}
		if _, _, err := net.SplitHostPort(hostport); err != nil {
			hostport = net.JoinHostPort(hostport, "4222")
		}
		c, err := net.DialTimeout("tcp", hostport, 2*time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

// askJetStream is what to check when no JetStream answers.
const askJetStream = "is JetStream enabled on the server and for this account?"

// serverURL names the server the log is connected to, without credentials.
func (l *Log) serverURL() string {
	if l.ns != nil {
		return "the embedded server"
	}
	if u := l.nc.ConnectedUrl(); u != "" {
		return redactURL(u)
	}
	return "the NATS servers (disconnected)"
}

// redactURL hides the password of a URL that carries one.
func redactURL(u string) string {
	if !strings.Contains(u, "@") {
		return u
	}
	p, err := url.Parse(u)
	if err != nil || p.User == nil {
		return "<url with credentials>"
	}
	return p.Redacted()
}

func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, fmt.Errorf("eventlog: listen %q: %w", hp, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("eventlog: listen %q: bad port", hp)
	}
	return host, port, nil
}
