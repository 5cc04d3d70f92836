package eventlog

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats-server/v2/server"
)

// serverLog routes the embedded nats-server's log to slog: notices at Info
// (those of its start, the banner and the store's recovery, until started
// is set, at Debug: postured says in its own lines what a user needs of
// them, and the banner buried the first start's admin password), warnings
// at Warn, errors and fatal errors at Error (but a client's
// permission violation or failed login at Warn), debug and trace lines at
// Debug. Every record carries component=nats-server.
//
// A fatal error does not exit the process (the server's own logger would):
// it is kept, so that startEmbedded can report it at once, since the server
// stops starting after it (for example when JetStream cannot use its store
// directory) and would otherwise only be noticed as a server that never
// becomes ready.
type serverLog struct {
	log     *slog.Logger
	onError func(string) // when set, hears every error line (the disk guard)

	started atomic.Bool // the server is ready for connections

	mu    sync.Mutex
	fatal string // the first fatal message
}

var _ server.Logger = (*serverLog)(nil)

func newServerLog(log *slog.Logger) *serverLog {
	return &serverLog{log: log.With("component", "nats-server")}
}

func (s *serverLog) emit(level slog.Level, format string, v []any) {
	ctx := context.Background()
	if !s.log.Enabled(ctx, level) {
		return
	}
	s.log.Log(ctx, level, fmt.Sprintf(format, v...))
}

func (s *serverLog) Noticef(format string, v ...any) {
	level := slog.LevelInfo
	if !s.started.Load() {
		level = slog.LevelDebug
	}
	s.emit(level, format, v)
}

func (s *serverLog) Warnf(format string, v ...any)  { s.emit(slog.LevelWarn, format, v) }
func (s *serverLog) Debugf(format string, v ...any) { s.emit(slog.LevelDebug, format, v) }
func (s *serverLog) Tracef(format string, v ...any) { s.emit(slog.LevelDebug, format, v) }

func (s *serverLog) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	level := slog.LevelError
	if clientFault(msg) {
		level = slog.LevelWarn
	}
	s.emit(level, "%s", []any{msg})
	if s.onError != nil {
		s.onError(msg)
	}
}

// clientFaults are what the server logs as errors when a client does what
// it may not: publish or subscribe without the permission, log in with
// wrong credentials, or fail the TLS handshake (a client that does not
// trust the nodes' CA, a scanner). They are the client's fault, not the
// server's, and anyone who can reach the port (an auditor probing, a
// scanner) could fill the error log with them: they are logged at Warn.
var clientFaults = []string{"Publish Violation - ", "Subscription Violation - ", "authentication error", "TLS handshake error"}

func clientFault(msg string) bool {
	for _, f := range clientFaults {
		if strings.Contains(msg, f) {
			return true
		}
	}
	return false
}

func (s *serverLog) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	s.mu.Lock()
	if s.fatal == "" {
		s.fatal = msg
	}
	s.mu.Unlock()
	s.log.Error(msg, "fatal", true)
}

// fatalError is the first fatal message, or "" if there was none.
func (s *serverLog) fatalError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fatal
}

// debugEnabled reports whether the logger wants debug records (the server
// then produces them; tracing, which logs every message with its payload, is
// never switched on: payloads may hold secrets).
func (s *serverLog) debugEnabled() bool { return s.log.Enabled(context.Background(), slog.LevelDebug) }
