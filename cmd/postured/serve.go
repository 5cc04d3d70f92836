package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/api/client"
	"github.com/seed-0809debe/posture/api/management"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
	"github.com/seed-0809debe/posture/projections"
)

type serveCmd struct {
	DataDir           string        `default:"./data" help:"Directory for the embedded NATS store, the projections and the PKI."`
	Listen            string        `default:":1280" help:"Address the HTTPS APIs listen on."`
	Advertise         string        `help:"host:port clients reach this node at (default: from --listen, localhost for a wildcard host)."`
	NatsURL           []string      `name:"nats-url" sep:"," help:"External NATS JetStream server or cluster URLs (comma-separated). Default: an embedded server."`
	NatsListen        string        `name:"nats-listen" help:"Let the embedded NATS server accept clients on this host:port (for postured events tail or replay against a running node)."`
	StreamReplicas    int           `default:"1" help:"Replicas of the event stream (on a cluster)."`
	Sync              string        `default:"interval" enum:"interval,always" help:"Embedded JetStream fsync policy: interval (default) or always (fsync before every acknowledgement)."`
	APISessionTimeout time.Duration `name:"api-session-timeout" default:"30m" help:"Idle timeout of API sessions."`
	MFAGrace          time.Duration `name:"mfa-grace" default:"5m" help:"Grace period after a wake or unlock before an MFA check that prompts on it fails."`
	LogFormat         string        `default:"text" enum:"text,json" help:"Log format: text or json."`
	LogLevel          string        `default:"info" enum:"debug,info,warn,error" help:"Log level."`
	AdminUsername     string        `default:"admin" help:"Username of the default admin created on first start."`
	AdminPassword     string        `hidden:"" help:"Password of the default admin created on first start (POSTURED_ADMIN_PASSWORD); generated and printed once when unset."`
}

func (s *serveCmd) logger() *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(s.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if s.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
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

func (s *serveCmd) Run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := s.logger()
	if s.APISessionTimeout < time.Second {
		return fmt.Errorf("--api-session-timeout must be at least 1s")
	}
	if s.MFAGrace < time.Second {
		return fmt.Errorf("--mfa-grace must be at least 1s")
	}
	if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
		return err
	}

	// The listener comes first so that --listen :0 knows its port before
	// the server certificate is issued for it.
	ln, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return err
	}
	defer ln.Close()
	advertise := s.advertise(ln.Addr())

	openCtx, cancelOpen := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelOpen()
	elog, err := eventlog.Open(openCtx, eventlog.Options{
		URLs:       s.NatsURL,
		Dir:        filepath.Join(s.DataDir, "nats"),
		Listen:     s.NatsListen,
		Replicas:   s.StreamReplicas,
		SyncAlways: s.Sync == "always",
		Logger:     log,
	})
	if err != nil {
		return err
	}
	defer elog.Close()
	store, err := projections.Open(projections.Options{Dir: filepath.Join(s.DataDir, "projections"), Logger: log})
	if err != nil {
		return err
	}
	defer store.Close()

	ca, err := pki.Open(filepath.Join(s.DataDir, "pki"), pki.Options{})
	if err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(advertise)
	serverCert, err := ca.ServerCertificate(uniq(host, "localhost", "127.0.0.1"))
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return store.Run(gctx, elog) })

	// Catch up with the log before answering anything: reads come from the
	// projection, and the bootstrap decides on its state.
	last, err := elog.LastSeq(openCtx)
	if err != nil {
		return err
	}
	log.Info("projection catching up with the log", "cursor", store.Cursor(), "last", last)
	if err := store.WaitFor(openCtx, last); err != nil {
		return err
	}
	w := &api.Writer{Log: elog, Barrier: store, Now: time.Now}
	if err := bootstrap(openCtx, w, store, s, log); err != nil {
		return err
	}

	auth := &api.Auth{Sessions: store, Log: elog, Now: time.Now, Timeout: s.APISessionTimeout, Logger: log}
	info := &api.Info{
		Version: version, Revision: revision, BuildDate: buildDate, Advertise: advertise,
		Specs: []api.Spec{
			{ID: "edge-client", Name: "edge-client", Document: client.Spec},
			{ID: "edge-management", Name: "edge-management", Document: management.Spec},
		},
	}
	login := &api.Login{Store: store, Writer: w, Auth: auth}
	e := api.New(api.Options{Logger: log, InstanceID: posture.NewID(), Version: version})
	(&client.API{Info: info, Login: login, Auth: auth}).Register(e)
	(&management.API{Info: info, Login: login, Auth: auth}).Register(e)

	srv := &http.Server{
		Handler:           e,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	g.Go(func() error {
		err := srv.ServeTLS(ln, "", "")
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error { return auth.SweepIdle(gctx, store, min(s.APISessionTimeout/4, 30*time.Second)) })
	fmt.Fprintf(os.Stderr, "postured listening on https://%s (advertised as https://%s)\n", ln.Addr(), advertise)

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
