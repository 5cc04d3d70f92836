package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/jonboulle/clockwork"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/client"
	"github.com/seed-0809debe/posture/api/connlimit"
	"github.com/seed-0809debe/posture/api/management"
	"github.com/seed-0809debe/posture/cmd/postured/datadir"
	"github.com/seed-0809debe/posture/console"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/expiry"
	"github.com/seed-0809debe/posture/pki"
	"github.com/seed-0809debe/posture/projections"
	"github.com/seed-0809debe/posture/projections/backtest"
	"github.com/seed-0809debe/posture/secrets"
	"github.com/seed-0809debe/posture/webhooks"
)

type serveCmd struct {
	DataDir           string        `default:"./data" help:"Directory for the embedded NATS store, the projections and the PKI."`
	PKIDir            string        `name:"pki-dir" help:"Directory of the CA and the server certificate (default: <data-dir>/pki). Nodes of a cluster share one."`
	SecretsKeyFile    string        `name:"secrets-key-file" help:"Key that seals secrets (TOTP secrets, enrollment and session tokens) in the log (default: <pki-dir>/secrets.key, created on first start). Nodes of a cluster share one."`
	Name              string        `help:"Name of this node in GET /controllers (default: the advertised host:port)."`
	Listen            string        `default:":1280" help:"Address the HTTPS APIs listen on."`
	Advertise         string        `help:"host:port clients reach this node at (default: from --listen, localhost for a wildcard host)."`
	NatsURL           []string      `name:"nats-url" sep:"," help:"External NATS JetStream server or cluster URLs (comma-separated). Default: an embedded server."`
	ReadTimeout       time.Duration `default:"30s" help:"Time a client has to send a whole request, body included (a slow body is cut)."`
	WriteTimeout      time.Duration `default:"2m" help:"Time from the end of a request's headers to the end of its answer."`
	IdleTimeout       time.Duration `default:"2m" help:"Time a keep-alive connection may stay idle between requests."`
	MaxConnections    int           `default:"4096" help:"Connections open at once, in all (0: no cap); further ones wait to be accepted."`
	MaxConnsPerSource int           `name:"max-connections-per-source" default:"128" help:"Connections open at once from one client address (IPv6: one /64); further ones are closed. Also the requests in progress from it (HTTP/2 carries many on one connection); further ones are answered 429. Trusted proxies are exempt (0: no cap)."`
	TrustedProxies    []string      `name:"trusted-proxies" sep:"," help:"Networks (CIDR, comma-separated) of reverse proxies whose X-Forwarded-For header is believed for the client's address (rate limits, audit). Default: none; the peer address is the client's."`
	NatsListen        string        `name:"nats-listen" help:"Let the embedded NATS server accept clients on this host:port (for postured events tail or replay against a running node), over TLS with a certificate from the CA and the credentials written to <data-dir>/nats/creds."`
	StreamReplicas    int           `default:"1" help:"Replicas of the event stream (on a cluster)."`
	Sync              string        `default:"interval" enum:"interval,always" help:"Embedded JetStream fsync policy: interval (default) or always (fsync before every acknowledgement)."`
	GroupCommit       bool          `default:"true" negatable:"" env:"POSTURED_GROUP_COMMIT" help:"Let concurrent posture responses and session requests share one message of the log: one write and one acknowledgement for many (--no-group-commit: a message each)."`
	DiskReserveMiB    int64         `name:"disk-reserve-mib" default:"64" help:"Disk space (MiB) kept free under the data directory: the embedded log refuses writes (503) below it, the projection stops applying below half of it; both resume by themselves once space is freed. 0: only a full disk stops them."`
	APISessionTimeout time.Duration `name:"api-session-timeout" default:"30m" help:"Idle timeout of API sessions."`
	MFAGrace          time.Duration `name:"mfa-grace" default:"5m" help:"Grace period after a wake or unlock before an MFA check that prompts on it fails."`
	WriteBudgetKiB    int           `name:"write-budget-kib" aliases:"posture-budget-kib" default:"16" env:"POSTURED_WRITE_BUDGET_KIB,POSTURED_POSTURE_BUDGET_KIB" help:"KiB a second that each identity's own requests (posture responses, logins, session requests granted or refused, session certificates, MFA and authenticator changes, certificate extensions) may have this node keep, in bursts of up to 2 MiB; more is answered 429 with Retry-After. All of it is kept in the log for good: the budget keeps one identity from filling the disk. 0: no limit. (Formerly --posture-budget-kib.)"`
	WebhookTimeout    time.Duration `name:"webhook-timeout" default:"10s" help:"Time a webhook receiver has to answer one delivery attempt."`
	WebhookBackoff    time.Duration `name:"webhook-backoff" default:"5s" help:"Delay before the first retry of a failed webhook delivery; it doubles with each retry (with jitter) up to --webhook-max-backoff."`
	WebhookMaxBackoff time.Duration `name:"webhook-max-backoff" default:"1h" help:"Longest delay between two attempts of a webhook delivery."`
	WebhookGiveUp     time.Duration `name:"webhook-give-up" default:"24h" help:"Age of a transition after which its webhook delivery is given up."`
	WebhookDeny       []string      `name:"webhook-deny" sep:"," default:"127.0.0.0/8,::1/128,169.254.0.0/16,fe80::/10,0.0.0.0/8,::/128,fd00:ec2::/64,100.100.100.200/32" help:"Networks (CIDR, comma-separated) webhook deliveries and the key sets of external JWT signers may not be fetched from, checked on every address of a receiver: by default the loopback, link-local and unspecified networks and the cloud metadata addresses. A value replaces the whole list (repeat the defaults to add to them); an empty one allows every address."`
	MetricsListen     string        `name:"metrics-listen" help:"Also serve GET /metrics over plain HTTP on this host:port (for a scraper on the host; /metrics on the HTTPS port stays)."`
	Pprof             bool          `help:"Also serve Go's profiles (/debug/pprof/) on --metrics-listen, for profiling a node under load."`
	LogFormat         string        `default:"text" enum:"text,json" help:"Log format: text or json."`
	LogLevel          string        `default:"info" enum:"debug,info,warn,error" help:"Log level."`
	AdminUsername     string        `default:"admin" help:"Username of the default admin created on first start."`
	AdminPassword     string        `hidden:"" help:"Password of the default admin created on first start (POSTURED_ADMIN_PASSWORD); generated and printed once when unset."`
	natsFlags

	CheckpointEvery    int           `default:"10000" help:"Append a signed checkpoint of the log every this many events (at most 50000)."`
	CheckpointInterval time.Duration `default:"1m" help:"Longest an event waits to be covered by a signed checkpoint."`
	NoCheckpoints      bool          `name:"no-checkpoints" help:"Do not append signed checkpoints of the log (another node may)."`

	SnapshotEvery    uint64        `name:"snapshot-every" default:"10000" help:"Take a snapshot of the projection (a Pebble checkpoint under <data-dir>/snapshots) every this many events; past moments are rebuilt from the nearest one."`
	SnapshotInterval time.Duration `name:"snapshot-interval" default:"10m" help:"Longest new events wait for a snapshot."`
	SnapshotsKeep    int           `name:"snapshots-keep" default:"48" help:"Snapshots kept, spread over the whole history (the newest always)."`
	PastMoments      int           `name:"past-moments" default:"2" help:"Past moments (explain or policy advice at a time) rebuilt at once; further requests are answered 429 with Retry-After."`
	BacktestTimeout  time.Duration `name:"backtest-timeout" default:"1h" help:"Longest a backtest job (POST /backtests) runs before it is stopped and fails."`

	// clock is the node's one clock: event times, TOTP checks, session
	// expiry and the timer loops' tickers (default: the real clock; tests
	// set a fake one).
	clock clockwork.Clock
	// jwksRoots verify the servers of external JWT signers' key sets
	// (default: the system's roots; tests set their own).
	jwksRoots *x509.CertPool

	stderr io.Writer // where the log goes: the command's stderr (os.Stderr when unset)
}

// maxWriteBudgetKiB is the largest --write-budget-kib: 1 GiB a second.
const maxWriteBudgetKiB = 1 << 20

// writeBudget is --write-budget-kib's budget, with bursts of twice the
// largest body (nil: no limit).
func (s *serveCmd) writeBudget(now api.Clock) *api.Budget {
	if s.WriteBudgetKiB == 0 {
		return nil
	}
	return api.NewBudget(s.WriteBudgetKiB<<10, 2*api.MaxBody, now)
}

func (s *serveCmd) logger() *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		// Durations as the text format and the flags write them ("5m0s"),
		// not in nanoseconds.
		opts.ReplaceAttr = func(_ []string, a slog.Attr) slog.Attr {
			if a.Value.Kind() == slog.KindDuration {
				a.Value = slog.StringValue(a.Value.Duration().String())
			}
			return a
		}
		return slog.New(slog.NewJSONHandler(s.errWriter(), opts))
	}
	return slog.New(slog.NewTextHandler(s.errWriter(), opts))
}

func (s *serveCmd) errWriter() io.Writer {
	if s.stderr == nil {
		return os.Stderr
	}
	return s.stderr
}

// announce tells the person who started postured something: the text as it
// is with --log-format text, a log record (msg and attributes) with json,
// so that every line of a JSON log is JSON.
func (s *serveCmd) announce(log *slog.Logger, text, msg string, args ...any) {
	if s.LogFormat == "json" {
		log.Info(msg, args...)
		return
	}
	fmt.Fprintln(s.errWriter(), text)
}

// reported is an error serve has already logged: main exits 1 without
// printing it again (in plain text, into a JSON log).
type reported struct{ error }

func (r reported) Unwrap() error { return r.error }

func (s *serveCmd) Run(ctx context.Context, st streams) error {
	if err := s.validate(); err != nil {
		return usageError{err}
	}
	s.stderr = st.err
	log := s.logger()
	err := s.serve(ctx, log)
	if err != nil && s.LogFormat == "json" {
		log.Error("postured stopped", "err", err)
		return reported{err}
	}
	return err
}

// advertise is the host:port clients reach this node at.
func (s *serveCmd) advertise(ln net.Addr) string {
	if s.Advertise != "" {
		return s.Advertise
	}
	_, port, _ := net.SplitHostPort(ln.String())
	host, _, _ := net.SplitHostPort(s.Listen)
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// serveGC lets a node's heap grow to five times what it keeps live
// (GOGC=400) as long as that stays under serveHeap, and beyond to twice the
// live heap, Go's default. Under ingest the collector then runs less often:
// in the same runs of postured-load ingest, 5-13 % less CPU per posture
// response (docs/performance.md). A model whose live heap is over
// serveHeap/2 (1M identities) uses no more memory than by default; a
// smaller one at most serveHeap. Settings given in GOGC or GOMEMLIMIT are
// left as they are. It returns the function that restores the settings.
func serveGC() (restore func()) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	return heapAhead(servePercent, serveHeap, 2)
}

const (
	servePercent = 400
	serveHeap    = 512 << 20
)

// validate checks the values of the command line before anything is
// opened: a value out of range is named, never replaced by a default.
func (s *serveCmd) validate() error {
	switch {
	case s.Pprof && s.MetricsListen == "":
		return errors.New("--pprof serves the profiles on --metrics-listen: set it too")
	case len(s.NatsURL) > 0 && s.NatsListen != "":
		return errors.New("--nats-listen opens the embedded NATS server, which --nats-url replaces: use one of them")
	case s.APISessionTimeout < time.Second:
		return errors.New("--api-session-timeout must be at least 1s")
	case s.MFAGrace < time.Second:
		return errors.New("--mfa-grace must be at least 1s")
	case s.ReadTimeout < time.Second || s.WriteTimeout < time.Second || s.IdleTimeout < time.Second:
		// 0 would be no limit at all: slow clients could hold connections.
		return errors.New("--read-timeout, --write-timeout and --idle-timeout must be at least 1s")
	case s.MaxConnections < 0 || s.MaxConnsPerSource < 0:
		return errors.New("--max-connections and --max-connections-per-source may not be negative (0: no cap)")
	case utf8.RuneCountInString(s.AdminUsername) < api.MinUsername || utf8.RuneCountInString(s.AdminUsername) > api.MaxUsername:
		return fmt.Errorf("--admin-username must be %d to %d characters, as every username (it would not log in)", api.MinUsername, api.MaxUsername)
	case s.AdminPassword != "" && (utf8.RuneCountInString(s.AdminPassword) < api.MinPassword || utf8.RuneCountInString(s.AdminPassword) > api.MaxPassword):
		return fmt.Errorf("POSTURED_ADMIN_PASSWORD must be %d to %d characters, as every password (it would not log in)", api.MinPassword, api.MaxPassword)
	case s.WebhookTimeout <= 0 || s.WebhookBackoff <= 0 || s.WebhookGiveUp <= 0:
		return errors.New("--webhook-timeout, --webhook-backoff and --webhook-give-up must be positive")
	case s.WebhookMaxBackoff < s.WebhookBackoff:
		return errors.New("--webhook-max-backoff may not be under --webhook-backoff")
	case s.StreamReplicas < 1 || s.StreamReplicas > 5:
		return fmt.Errorf("--stream-replicas must be 1 to 5 (JetStream's most), not %d", s.StreamReplicas)
	case s.StreamReplicas > 1 && len(s.NatsURL) == 0:
		return fmt.Errorf("--stream-replicas %d needs a NATS cluster (--nats-url): the embedded server is a single server", s.StreamReplicas)
	case s.CheckpointEvery < 1 || s.CheckpointEvery > eventlog.MaxCheckpointEvents:
		return fmt.Errorf("--checkpoint-every must be 1 to %d events, not %d", eventlog.MaxCheckpointEvents, s.CheckpointEvery)
	case s.CheckpointInterval <= 0 || s.SnapshotInterval <= 0:
		return errors.New("--checkpoint-interval and --snapshot-interval must be positive")
	case s.BacktestTimeout <= 0:
		return errors.New("--backtest-timeout must be positive")
	case s.SnapshotEvery < 1 || s.SnapshotsKeep < 1 || s.PastMoments < 1:
		return errors.New("--snapshot-every, --snapshots-keep and --past-moments must be at least 1")
	case s.DiskReserveMiB < 0:
		return errors.New("--disk-reserve-mib may not be negative (0: only a full disk stops writes)")
	case s.WriteBudgetKiB < 0 || s.WriteBudgetKiB > maxWriteBudgetKiB:
		return fmt.Errorf("--write-budget-kib must be 0 (no limit) to %d, not %d", maxWriteBudgetKiB, s.WriteBudgetKiB)
	}
	if _, err := api.ParseCIDRs(s.TrustedProxies); err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if _, err := api.ParseCIDRs(s.WebhookDeny); err != nil {
		return fmt.Errorf("--webhook-deny: %w", err)
	}
	// A mistyped path leaves no half-made first start.
	if err := s.checkFiles(); err != nil {
		return err
	}
	for _, l := range []struct{ flag, addr string }{{"--listen", s.Listen}, {"--metrics-listen", s.MetricsListen}, {"--nats-listen", s.NatsListen}} {
		if l.addr == "" && l.flag != "--listen" {
			continue
		}
		if _, port, err := net.SplitHostPort(l.addr); err != nil || port == "" {
			return fmt.Errorf("%s %q: want host:port (or :port for every address)", l.flag, l.addr)
		} else if _, err := net.LookupPort("tcp", port); err != nil {
			return fmt.Errorf("%s %q: the port must be 0 to 65535 (0: any free port)", l.flag, l.addr)
		}
	}
	if s.Advertise != "" {
		host, port, err := net.SplitHostPort(s.Advertise)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--advertise %q: want host:port, as clients reach this node (postured.example.com:1280)", s.Advertise)
		}
	}
	return nil
}

// serve runs the node until ctx ends.
func (s *serveCmd) serve(ctx context.Context, log *slog.Logger) (err error) {
	defer serveGC()()
	// The listener comes first so that --listen :0 knows its port before
	// the server certificate is issued for it.
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		// The usual cause of a busy port is a node already running on
		// this data directory: say that, rather than only the port.
		if errors.Is(err, syscall.EADDRINUSE) {
			if lock, lerr := datadir.Acquire(s.DataDir); lerr == nil {
				lock.Release()
			} else if inUse := (*datadir.InUseError)(nil); errors.As(lerr, &inUse) {
				return fmt.Errorf("%w (and %w)", inUse, err)
			}
		}
		return fmt.Errorf("--listen: %w", err)
	}
	defer ln.Close()
	// The metrics' and the embedded NATS server's ports are tried now too,
	// before anything is made: a busy port leaves no half-made first start
	// behind. Both are opened once the node is (a scraper that connects
	// while a node catches up is refused, not kept waiting).
	for _, l := range []struct{ flag, addr string }{{"--metrics-listen", s.MetricsListen}, {"--nats-listen", s.NatsListen}} {
		if l.addr == "" {
			continue
		}
		tried, err := net.Listen("tcp", l.addr)
		if err != nil {
			return fmt.Errorf("%s: %w", l.flag, err)
		}
		tried.Close()
	}
	n, err := startNode(ctx, s, s.advertise(ln.Addr()), log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := n.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	ln = s.limitListener(ln, n.trusted, log)

	var msrv *http.Server
	var mln net.Listener
	if s.MetricsListen != "" {
		if msrv, mln, err = s.metricsServer(n, log); err != nil {
			return err
		}
		defer mln.Close()
	}

	g, gctx := errgroup.WithContext(ctx)
	srv := s.httpServer(n, n.tlsConfig(), log)
	g.Go(func() error {
		err := srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	if msrv != nil {
		g.Go(func() error {
			if err := msrv.Serve(mln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("--metrics-listen: %w", err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			return msrv.Close()
		})
	}
	s.announce(log, fmt.Sprintf("postured listening on https://%s (advertised as https://%s)", ln.Addr(), n.advertise),
		"listening", "url", "https://"+ln.Addr().String(), "advertise", "https://"+n.advertise)
	g.Go(func() error {
		// Until the projection has caught up, the probes and the metrics
		// answer and the APIs are 503.
		if err := n.ready(gctx, s); err != nil {
			return err
		}
		if m, err := n.elog.Gaps(gctx); err == nil && m.Count() > 0 {
			log.Error(api.MissingWarning(m.Count()), "lostStart", m.Head, "deleted", m.Deleted[:min(len(m.Deleted), 10)])
		}
		log.Info("ready")
		return n.Run(gctx)
	})

	<-gctx.Done()
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx)
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// metricsServer serves GET /metrics over plain HTTP on --metrics-listen,
// for a scraper on the host that should not need postured's CA. Its
// listener is open when metricsServer returns; the caller serves it.
func (s *serveCmd) metricsServer(n *node, log *slog.Logger) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", s.MetricsListen)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.metrics.Registry(), promhttp.HandlerOpts{}))
	if s.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: s.ReadTimeout,
		WriteTimeout: s.WriteTimeout, IdleTimeout: s.IdleTimeout, MaxHeaderBytes: maxHeaderBytes,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	log.Info("metrics listening", "url", "http://"+ln.Addr().String()+"/metrics")
	return srv, ln, nil
}

// webhookNames is the purpose of the key of the webhooks' consumer names
// (secrets.Keyring.DerivedKey): changing it renames every consumer.
const webhookNames = "webhook consumer names"

// Limits of the HTTP server that have no flag.
const (
	readHeaderTimeout = 10 * time.Second
	maxHeaderBytes    = 64 << 10
	// maxStreams caps the HTTP/2 streams of one connection (Go's default
	// is 250): with --max-connections-per-source connections, one address
	// could otherwise hold 128 × 250 requests. Requests in progress per
	// source are capped as well (api.InFlight).
	maxStreams = 16
)

// httpServer is the HTTPS server of a node, with the time limits that keep
// slow clients from holding connections: the request headers within 10 s
// (the TLS handshake too), the whole request within --read-timeout, the
// answer within --write-timeout, an idle keep-alive connection for
// --idle-timeout; headers of at most 64 KiB; at most 16 concurrent
// HTTP/2 streams per connection.
func (s *serveCmd) httpServer(h http.Handler, cfg *tls.Config, log *slog.Logger) *http.Server {
	return &http.Server{
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
		Handler:           h,
		TLSConfig:         cfg,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// checkCAKept refuses to create a CA, or the half of one that is missing,
// for a data directory that already holds a log or a projection: the CA
// was lost or --pki-dir is mistyped, and a new CA would sign checkpoints
// and certificates that nothing issued so far verifies against.
func checkCAKept(s *serveCmd) error {
	missing := pki.Missing(s.pkiDir())
	if len(missing) == 0 {
		return nil
	}
	// What an earlier start leaves (the directories alone may be mount
	// points made ready for a first start).
	for _, d := range []struct{ what, glob string }{
		{"event log", filepath.Join(s.DataDir, "nats", "jetstream")},
		{"projection", filepath.Join(s.DataDir, "projections", "MANIFEST-*")},
	} {
		if found, _ := filepath.Glob(d.glob); len(found) > 0 {
			return fmt.Errorf("no %s in %s, but %s holds this node's %s from an earlier start: restore the CA (ca.key and ca.pem) "+
				"there, or give its directory with --pki-dir; a new CA would sign nothing the existing checkpoints and "+
				"certificates verify against", strings.Join(missing, " nor "), s.pkiDir(), s.DataDir, d.what)
		}
	}
	return nil
}

// checkLogEnd refuses a log that ends before the projection's cursor or
// its newest snapshot: the log lost its end (a store restored from an
// older backup, or cut back). A node serving it would append new events at
// sequences its projection counts as applied, and so never apply them, or
// answer past moments from snapshots of a history the log no longer has.
func checkLogEnd(ctx context.Context, l *eventlog.Log, cursor uint64, snaps []projections.Snapshot, dataDir string) error {
	last, err := l.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("read the end of the event log: %w", err)
	}
	projectionDir, snapshotDir := filepath.Join(dataDir, "projections"), filepath.Join(dataDir, "snapshots")
	what, ahead, remove := "this node's projection applied it up to", cursor, projectionDir+" and "+snapshotDir
	if n := len(snaps); n > 0 && snaps[n-1].Seq > last && cursor <= last {
		what, ahead, remove = "this node's newest snapshot is at", snaps[n-1].Seq, snapshotDir
	}
	if ahead <= last {
		return nil
	}
	return fmt.Errorf("the event log ends at sequence %d, but %s %d: sequences %d..%d are lost from the log "+
		"(restored from an older backup, or cut back). Restore the newer copy of the log; or, to serve the log as it "+
		"is, remove %s: what was derived from the lost events is then rebuilt from the log", last, what, ahead, last+1, ahead, remove)
}

// limitListener caps the connections ln holds open: --max-connections in
// all, --max-connections-per-source from one address (trusted proxies
// exempt).
func (s *serveCmd) limitListener(ln net.Listener, trusted []*net.IPNet, log *slog.Logger) net.Listener {
	return connlimit.Wrap(ln, connlimit.Options{
		Max: s.MaxConnections, PerSource: s.MaxConnsPerSource, Exempt: trusted,
		OnReject: func(source string) {
			log.Debug("connection refused: too many open from its source", "source", source, "max", s.MaxConnsPerSource)
		},
	})
}

// node is one running controller: the log, the projection and the APIs,
// wired together. serve runs it behind an HTTPS server; tests run it behind
// httptest.
type node struct {
	log        *slog.Logger
	elog       *eventlog.Log
	trans      *eventlog.Transitions // the transitions stream
	hooks      *webhooks.Dispatcher  // webhook deliveries
	store      *projections.Store
	ca         *pki.CA
	secrets    *secrets.Keyring
	serverCert tls.Certificate
	advertise  string
	auth       *api.Auth
	writer     *api.Writer
	metrics    *api.Metrics
	self       eventlog.Node             // this node's entry in the node registry
	health     *api.Health               // the probes of both handlers
	halt       *api.Halt                 // where the projection stopped at a message that is not an event
	handler    *echo.Echo                // the APIs, once ready
	serving    atomic.Pointer[echo.Echo] // what ServeHTTP serves: the probes while starting, then handler
	instanceID string
	trusted    []*net.IPNet   // --trusted-proxies
	inFlight   *api.InFlight  // requests in progress per source (--max-connections-per-source)
	logLast    *api.Coalescer // the log's last sequence, for catchUp
	client     *client.API
	management *management.API
	backtests  *backtest.Jobs // backtest jobs (POST /backtests)
	console    http.Handler   // the web console under /console/, once ready (metered)
	timeout    time.Duration
	runCtx     context.Context // ends when Close is called
	cancelRun  context.CancelFunc
	runDone    chan struct{}  // closed when the projection consumer returns
	loops      sync.WaitGroup // Run's background loops, which Close waits for
	runErr     error
	closeOnce  sync.Once
	closeErr   error         // what Close returned
	lock       *datadir.Lock // the data directory's, held until Close
	clock      clockwork.Clock
	deadlines  *expiry.Deadlines
	idle       *expiry.Idle

	checkpointer    *eventlog.Checkpointer // signs checkpoints of the log; nil with --no-checkpoints
	snapshots       *projections.Snapshots // checkpoints of the projection that past moments start from
	checkpointsDone chan struct{}          // closed when the checkpointer returns
	// rebuilding: the projection is built from the start of the log at
	// this start; altered is what verifyRebuilt found wrong with that log.
	rebuilding bool
	altered    atomic.Pointer[string]
}

// startNode opens the log, the projection and the PKI and starts the
// projection consumer. Until ready, the node serves the probes and the
// metrics, and answers 503 to everything else.
func startNode(ctx context.Context, s *serveCmd, advertise string, log *slog.Logger) (_ *node, err error) {
	trusted, err := api.ParseCIDRs(s.TrustedProxies) // validate checked the command line's
	if err != nil {
		return nil, fmt.Errorf("--trusted-proxies: %w", err)
	}
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", s.DataDir, err)
	}
	// It holds the CA key and every identity's history: a directory made
	// by someone else with a wider mode (systemd's StateDirectory is 0755
	// unless told otherwise) is left as it is, and said.
	if fi, err := os.Stat(s.DataDir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the data directory is open to other users: chmod 700 it (under systemd: StateDirectoryMode=0700)",
			"dir", s.DataDir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()))
	}
	// One node per data directory: the lock comes before anything in it is
	// opened, and is released after everything is closed.
	lock, err := datadir.Acquire(s.DataDir)
	if err != nil {
		return nil, err
	}
	clock := s.clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	n := &node{log: log, advertise: advertise, timeout: s.APISessionTimeout, runDone: make(chan struct{}), trusted: trusted, lock: lock,
		inFlight: &api.InFlight{PerSource: s.MaxConnsPerSource, Exempt: trusted}, checkpointsDone: make(chan struct{}), clock: clock}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	// The CA comes first: the embedded NATS server's listener presents a
	// certificate from it.
	if err := checkCAKept(s); err != nil {
		return nil, err
	}
	if n.ca, err = pki.Open(s.pkiDir(), pki.Options{}); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(advertise)
	listenTLS, err := s.natsListenTLS(n.ca, host)
	if err != nil {
		return nil, err
	}
	openCtx, cancelOpen := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelOpen()
	n.elog, err = eventlog.Open(openCtx, eventlog.Options{
		URLs:        s.NatsURL,
		Dir:         filepath.Join(s.DataDir, "nats"),
		Listen:      s.NatsListen,
		ListenTLS:   listenTLS,
		Auth:        s.clientAuth(),
		Replicas:    s.StreamReplicas,
		SyncAlways:  s.Sync == "always",
		GroupCommit: s.GroupCommit,
		Logger:      log,

		// Appends are refused below it (see eventlog/space.go).
		DiskReserve: s.DiskReserveMiB << 20,
	})
	if err != nil {
		return nil, err
	}
	if n.trans, err = n.elog.OpenTransitions(openCtx, eventlog.TransitionsOptions{Replicas: s.StreamReplicas}); err != nil {
		return nil, err
	}
	if url := n.elog.ListenURL(); url != "" {
		ca, err := filepath.Abs(filepath.Join(s.pkiDir(), "ca.pem"))
		if err != nil {
			return nil, err
		}
		args := []any{"url", url, "ca", ca}
		notes := map[string]string{"nats-url": url, "nats-tls-ca": ca}
		for _, c := range n.elog.Credentials() {
			args = append(args, c.Role, c.SeedFile)
			note := map[string]string{eventlog.RoleAuditor: "nats-nkey", eventlog.RolePostured: "nats-nkey-writer"}[c.Role]
			if note != "" {
				if notes[note], err = filepath.Abs(c.SeedFile); err != nil {
					return nil, err
				}
			}
		}
		log.Info("embedded NATS server accepts TLS clients with the nkey seeds in these files (keep them private)", args...)
		// An offline command refused this data directory says how to ask
		// this node instead (askNode).
		if err := n.lock.Note(notes); err != nil {
			return nil, err
		}
	}
	// The projection keeps half the log's reserve: on a shared disk, it
	// still has room for what the log took before it stopped.
	n.store, err = projections.Open(projections.Options{Dir: filepath.Join(s.DataDir, "projections"), Logger: log,
		DiskReserve: (s.DiskReserveMiB << 20) / 2})
	if err != nil {
		return nil, err
	}
	if n.snapshots, err = projections.OpenSnapshots(projections.SnapshotOptions{Dir: filepath.Join(s.DataDir, "snapshots"),
		Keep: s.SnapshotsKeep, Every: s.SnapshotEvery, Interval: s.SnapshotInterval, MaxOpen: s.PastMoments,
		Clock: clock, Logger: log}); err != nil {
		return nil, err
	}
	if err := checkLogEnd(openCtx, n.elog, n.store.Cursor(), n.snapshots.List(), s.DataDir); err != nil {
		return nil, err
	}
	n.rebuilding = n.store.Cursor() == 0
	// The projection keeps its cursor, not the time of the event there,
	// which tells the past from the present (explain): the log has it.
	if c := n.store.Cursor(); c > 0 {
		_ = n.elog.Read(openCtx, c, c, func(events []posture.Event) error {
			n.store.Resumed(events[len(events)-1].At)
			return nil
		})
	}
	if n.secrets, err = openSecrets(openCtx, s, n.elog, log); err != nil {
		return nil, err
	}
	if n.serverCert, err = n.ca.ServerCertificate(uniq(host, "localhost", "127.0.0.1", "::1")); err != nil {
		return nil, err
	}

	n.logLast = &api.Coalescer{Read: n.elog.LastSeq}
	if n.checkpointer, err = n.newCheckpointer(s); err != nil {
		return nil, err
	}
	n.runCtx, n.cancelRun = context.WithCancel(context.Background())
	runCtx := n.runCtx
	n.halt = &api.Halt{}
	go func() {
		defer close(n.runDone)
		n.runErr = n.store.Run(runCtx, haltingSource{log: n.elog, via: n.projectionSource(), halt: n.halt, logger: log})
	}()
	go n.runCheckpoints(runCtx)

	n.metrics = n.newMetrics()
	n.checkpointMetrics()
	n.evictionMetrics()
	n.instanceID = posture.NewID()
	var starting *echo.Echo
	n.health = &api.Health{Progress: n.store, State: n.logState, Halt: n.halt, Disk: n.disk,
		Starting: func() bool { return n.serving.Load() == starting },
		Altered: func() string {
			if a := n.altered.Load(); a != nil {
				return *a
			}
			return ""
		}}
	starting = n.newEcho()
	starting.Any("/*", func(echo.Context) error {
		return &posture.Error{Code: posture.CodeUnavailable, Message: "postured is catching up with the event log; try again later"}
	})
	n.serving.Store(starting)
	return n, nil
}

// newEcho is an echo instance of the node with the probes and the metrics.
func (n *node) newEcho() *echo.Echo {
	e := api.New(api.Options{Logger: n.log, InstanceID: n.instanceID, Version: version,
		SystemPaths: api.SystemPaths, Metrics: n.metrics, TrustedProxies: n.trusted,
		InFlight: n.inFlight})
	api.RegisterSystem(e, n.metrics, n.health)
	return e
}

// ServeHTTP serves the APIs and the console (under /console/) once the
// node is ready and, until then, the
// probes and the metrics.
func (n *node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := n.serving.Load()
	if e == n.handler && n.console != nil && (r.URL.Path == "/console" || strings.HasPrefix(r.URL.Path, console.Base)) {
		n.console.ServeHTTP(w, r)
		return
	}
	e.ServeHTTP(w, r)
}

// ready catches the projection up with the log (for as long as that takes:
// a rebuild of a long log takes minutes), bootstraps an empty log and
// builds the APIs.
func (n *node) ready(ctx context.Context, s *serveCmd) error {
	// Reads come from the projection, and the bootstrap decides on its
	// state: catch up with the log first.
	last, err := n.elog.LastSeq(ctx)
	if err != nil {
		return err
	}
	n.log.Info("projection catching up with the log", "cursor", n.store.Cursor(), "last", last)
	if err := n.store.WaitFor(ctx, last); err != nil {
		return err
	}
	openCtx, cancelOpen := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelOpen()
	w := &api.Writer{Log: n.metrics.Log(n.elog), Barrier: n.halt.Barrier(n.store), Now: n.clock.Now}
	if err := bootstrap(openCtx, w, n.store, n.secrets, s, n.log); err != nil {
		return err
	}

	n.auth = &api.Auth{Sessions: n.store, Log: w.Log, Now: n.clock.Now, Timeout: s.APISessionTimeout, Logger: n.log, CatchUp: n.catchUp}
	info := &api.Info{
		Version: version, Revision: revision, BuildDate: buildDate, Advertise: n.advertise,
		Specs: []api.Spec{
			{ID: "edge-client", Name: "edge-client", Document: client.Spec},
			{ID: "edge-management", Name: "edge-management", Document: management.Spec},
		},
	}
	budget := s.writeBudget(n.clock.Now)       // one per node, shared by the client and management APIs' logins
	deny, err := api.ParseCIDRs(s.WebhookDeny) // validated
	if err != nil {
		return err
	}
	login := &api.Login{Store: n.store, Writer: w, Auth: n.auth, Limiter: api.NewLimiter(api.LimiterOptions{}), Budget: budget, Secrets: n.secrets,
		ExtJWT: client.NewExtJWT(client.ExtJWTOptions{Store: n.store, Logger: n.log, Client: func(endpoint string) (*http.Client, error) {
			return webhooks.NewClient(endpoint, s.jwksRoots, 5*time.Second, deny)
		}}),
		Cert: &client.CertAuth{CA: n.ca, Store: n.store}}
	n.handler = n.newEcho()
	signer, err := n.ca.NewSigner(n.serverCert)
	if err != nil {
		return err
	}
	n.writer = w
	n.deadlines = &expiry.Deadlines{Log: w.Log, Due: n.store, Enforce: n.store, Clock: n.clock, Logger: n.log}
	n.idle = &expiry.Idle{Log: w.Log, Sessions: n.store, Clock: n.clock, Timeout: s.APISessionTimeout,
		Interval: min(s.APISessionTimeout/4, 30*time.Second), Forget: n.auth.Forget, Logger: n.log}
	n.client = &client.API{Info: info, Login: login, Auth: n.auth, Writer: w, Store: n.store, Identities: n.store,
		Tokens: signer, MFAGrace: s.MFAGrace, Started: n.clock.Now(), PKI: n.ca, Signer: signer, Enroll: n.store,
		Secrets: n.secrets, Budget: budget}
	n.hooks = webhooks.New(webhooks.Options{Stream: n.trans.Stream(), Subjects: n.trans.Subjects(),
		Store: n.store, Secrets: n.secrets, Log: w.Log, Logger: n.log, Timeout: s.WebhookTimeout,
		MinBackoff: s.WebhookBackoff, MaxBackoff: s.WebhookMaxBackoff, GiveUpAfter: s.WebhookGiveUp, Deny: deny,
		NameKey: n.secrets.DerivedKey(webhookNames)})
	n.management = &management.API{Info: info, Login: login, Auth: n.auth, Store: n.store, Posture: n.store, Fleet: n.store, Report: n.store, Writer: w,
		Deliveries: n.store, Webhooks: n.hooks,
		Explainer: explainer{log: n.elog, store: n.store, snapshots: n.snapshots}, Signer: signer, Enrollments: n.store,
		Secrets: n.secrets}
	n.backtests = newBacktestJobs(n.elog, n.snapshots, n.clock.Now, n.log, s.BacktestTimeout)
	n.management.Backtests = n.backtests
	n.client.ServiceAdmin = n.management
	n.management.Shared = n.client.SharedRoutes()
	if err := n.openCluster(openCtx, s); err != nil {
		return err
	}
	n.client.Register(n.handler)
	n.management.Register(n.handler)
	con, err := console.New(console.Options{API: n.handler, ManagementBase: api.ManagementBase,
		ClientBase: api.ClientBase, Store: n.store, Explainer: n.management.Explainer, Impact: n.store, Now: n.clock.Now, Logger: n.log})
	if err != nil {
		return err
	}
	n.console = n.metrics.Wrap(console.Base, con)
	n.serving.Store(n.handler)
	return nil
}

func (n *node) tlsConfig() *tls.Config {
	// Client certificates are requested, not required, and verified by the
	// handlers (cert login, enrollment, extension) against postured's CA
	// and the verified CAs.
	return &tls.Config{Certificates: []tls.Certificate{n.serverCert}, MinVersion: pki.MinTLSVersion,
		CipherSuites: pki.CipherSuites(), ClientAuth: tls.RequestClientCert}
}

// Run runs the background loops until ctx ends, the projection stops or
// the node is closed. Close waits for them: they use the store it closes.
func (n *node) Run(ctx context.Context) error {
	n.loops.Add(1)
	defer n.loops.Done()
	if n.runCtx.Err() != nil {
		return errors.New("the node is closed")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(n.runCtx, cancel)()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		select {
		case <-n.runDone:
			if n.runCtx.Err() != nil {
				return nil // Close stopped it
			}
			if n.runErr == nil {
				return errors.New("projection consumer stopped")
			}
			return fmt.Errorf("projection: %w", n.runErr)
		case <-gctx.Done():
			return nil
		}
	})
	g.Go(func() error { return n.idle.Run(gctx) })
	g.Go(func() error { return n.auth.Run(gctx) })
	g.Go(func() error { return n.announce(gctx) })
	g.Go(func() error { return n.deadlines.Run(gctx) })
	relay := &api.TransitionRelay{Outbox: n.store, Stream: n.trans, Logger: n.log}
	g.Go(func() error { return relay.Run(gctx) })
	g.Go(func() error { return n.hooks.Run(gctx) })
	g.Go(func() error { return n.snapshots.Run(gctx, n.store, n.elog) })
	g.Go(func() error { n.verifyRebuilt(gctx); return nil })
	return g.Wait()
}

// catchUp waits until the projection applied every event the log held
// when it was called. Concurrent calls share their reads of the log's last
// sequence (see api.Coalescer).
func (n *node) catchUp(ctx context.Context) error {
	last, err := n.logLast.Last(ctx)
	if err != nil {
		return err
	}
	return n.store.WaitFor(ctx, last)
}

// Close stops the projection consumer and closes the store, the log and
// the data directory's lock, and returns what failed of it (joined). It may
// be called more than once; later calls return the first call's error.
func (n *node) Close() error {
	n.closeOnce.Do(func() {
		var errs []error
		stopped := true
		if n.cancelRun != nil {
			n.cancelRun()
			select {
			case <-n.runDone:
			case <-time.After(closeWait):
				// Its writes are held by a full disk (Pebble waits for
				// space): it is left as it is. What it applied is in its
				// write-ahead log, the rest in the event log.
				stopped = false
				n.log.Warn("closing without stopping the projection: it does not stop (its writes wait for disk space)", "waited", closeWait)
			}
			select { // the checkpointer's append ends with runCtx
			case <-n.checkpointsDone:
			case <-time.After(closeWait):
				n.log.Warn("closing without stopping the checkpointer", "waited", closeWait)
			}
			loops := make(chan struct{})
			go func() { n.loops.Wait(); close(loops) }()
			select { // Run's loops end with runCtx too
			case <-loops:
			case <-time.After(closeWait):
				stopped = false
				n.log.Warn("closing without stopping the background loops", "waited", closeWait)
			}
		}
		if n.backtests != nil {
			n.backtests.Close() // they read the log, closed below
		}
		if n.store != nil && stopped {
			if err := n.store.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close the projections: %w", err))
			}
		}
		if n.elog != nil {
			if err := n.elog.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close the event log: %w", err))
			}
		}
		if err := n.lock.Release(); err != nil {
			errs = append(errs, fmt.Errorf("release the data directory: %w", err))
		}
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// natsListenTLS is the TLS configuration of the embedded NATS server's
// listener (nil without --nats-listen): a certificate from the CA, issued at
// each start, for the listen host and the names the node is reached at.
func (s *serveCmd) natsListenTLS(ca *pki.CA, advertised string) (*tls.Config, error) {
	if s.NatsListen == "" {
		return nil, nil
	}
	host, _, err := net.SplitHostPort(s.NatsListen)
	if err != nil {
		return nil, fmt.Errorf("--nats-listen %q: %w", s.NatsListen, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = ""
	}
	cert, err := ca.ServiceCertificate(uniq(host, advertised, "localhost", "127.0.0.1", "::1"))
	if err != nil {
		return nil, fmt.Errorf("--nats-listen: %w", err)
	}
	// The same versions and suites as HTTPS: ECDHE with AEAD only.
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: pki.MinTLSVersion,
		CipherSuites: pki.CipherSuites()}, nil
}

// closeWait bounds how long Close waits for the projection consumer.
const closeWait = 10 * time.Second

func uniq(vals ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range vals {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// evictionMetrics registers the count of API sessions the projection
// ended because their identity had too many.
func (n *node) evictionMetrics() {
	n.metrics.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "postured_api_sessions_evicted_total",
		Help: fmt.Sprintf("API sessions this node's projection ended since it started because their identity had more than %d (the least recently used).", projections.MaxAPISessions),
	}, func() float64 { return float64(n.store.Evicted()) }))
}
