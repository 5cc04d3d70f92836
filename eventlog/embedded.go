package eventlog

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Limits of the embedded JetStream: no cap of its own on the store (the
// disk is the cap, see space.go), and the memory it may use for memory
// streams (the node registry, a few bytes per node).
const (
	maxStore  = 1 << 60
	maxMemory = 256 << 20
)

// startEmbedded runs a JetStream-enabled nats-server in this process with its
// store under dir. With listen empty it opens no port and is reached through
// an in-process connection only. The server's errors and warnings go to log,
// and each error line to onError too.
func startEmbedded(dir, listen string, syncAlways bool, log *slog.Logger, onError func(string)) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "postured",
		JetStream:  true,
		StoreDir:   dir,
		DontListen: listen == "",
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: syncAlways,
		// Explicit limits: by default the server caps its store at 75% of
		// the space free when it starts, a cap that a nearly full disk
		// at start makes small and that freeing space does not raise
		// until a restart ("insufficient resources"). The disk reserve
		// decides instead.
		JetStreamMaxStore:  maxStore,
		JetStreamMaxMemory: maxMemory,
	}
	if listen != "" {
		host, port, err := splitHostPort(listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	ns.SetLogger(serverLogger{log: log, onError: onError}, false, false)
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 30s")
	}
	return ns, nil
}

// serverLogger passes the embedded server's errors and warnings to slog;
// its notices (start-up lines) are debug; debug and trace are off.
type serverLogger struct {
	log     *slog.Logger
	onError func(string)
}

func (l serverLogger) Noticef(format string, v ...any) {
	l.log.Debug("nats-server: " + fmt.Sprintf(format, v...))
}

func (l serverLogger) Warnf(format string, v ...any) {
	l.log.Warn("nats-server: " + fmt.Sprintf(format, v...))
}

func (l serverLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error("nats-server: " + msg)
	if l.onError != nil {
		l.onError(msg)
	}
}

func (l serverLogger) Fatalf(format string, v ...any) { l.Errorf(format, v...) }
func (l serverLogger) Debugf(string, ...any)          {}
func (l serverLogger) Tracef(string, ...any)          {}
