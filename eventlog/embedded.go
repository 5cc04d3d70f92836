package eventlog

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

// embeddedReady bounds how long the embedded server may take to start.
const embeddedReady = 10 * time.Second

// embedded configures startEmbedded.
type embedded struct {
	dir        string
	listen     string      // host:port, or "" for no port
	tls        *tls.Config // required with listen
	users      []Credential
	stream     string
	syncAlways bool
	log        *slog.Logger
	onError    func(string) // hears the server's error lines (space.go)
}

// startEmbedded runs a JetStream-enabled nats-server in this process with its
// store under dir and its log in slog. With listen empty it opens no port and
// is reached through an in-process connection only, without credentials.
// With listen set it requires TLS on that port and authenticates every
// client, in-process ones included, as one of users (nkeys, with the
// permissions of their role); nobody connects anonymously.
func startEmbedded(o embedded) (*server.Server, error) {
	if err := checkStoreDir(o.dir); err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "postured",
		JetStream:  true,
		StoreDir:   o.dir,
		DontListen: o.listen == "",
		NoSigs:     true,
		SyncAlways: o.syncAlways,
		// Explicit limits: by default the server caps its store at 75% of
		// the space free when it starts, a cap that a nearly full disk
		// at start makes small and that freeing space does not raise
		// until a restart ("insufficient resources"). The disk reserve
		// decides instead.
		JetStreamMaxStore:  maxStore,
		JetStreamMaxMemory: maxMemory,
	}
	if o.listen != "" {
		if o.tls == nil {
			return nil, errors.New("eventlog: the embedded server needs a TLS certificate to listen on " + o.listen)
		}
		if len(o.users) == 0 {
			return nil, errors.New("eventlog: the embedded server needs users to listen on " + o.listen)
		}
		host, port, err := splitHostPort(o.listen)
		if err != nil {
			return nil, err
		}
		if port == 0 {
			port = server.RANDOM_PORT
		}
		opts.Host, opts.Port = host, port
		opts.TLSConfig = o.tls
		opts.TLSTimeout = 5
		for _, u := range o.users {
			perms, err := Permissions(u.Role, o.stream)
			if err != nil {
				return nil, err
			}
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.Public, Permissions: perms})
		}
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("eventlog: embedded NATS: %w", err)
	}
	logger := newServerLog(o.log)
	logger.onError = o.onError
	ns.SetLoggerV2(logger, logger.debugEnabled(), false, false)
	ns.Start() // returns early after a fatal error
	if msg := logger.fatalError(); msg != "" {
		ns.Shutdown()
		return nil, fmt.Errorf("eventlog: embedded NATS with store %s: %s", o.dir, msg)
	}
	if !ns.ReadyForConnections(embeddedReady) {
		ns.Shutdown()
		if msg := logger.fatalError(); msg != "" {
			return nil, fmt.Errorf("eventlog: embedded NATS with store %s: %s", o.dir, msg)
		}
		return nil, fmt.Errorf("eventlog: embedded NATS with store %s: not ready after %s", o.dir, embeddedReady)
	}
	logger.started.Store(true)
	return ns, nil
}

// checkStoreDir creates dir if needed and proves that files can be created
// in it, so that a store on a path that cannot be written fails at once, with
// the path and the reason ("permission denied", "not a directory",
// "read-only file system").
func checkStoreDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("eventlog: embedded NATS store: %w", err)
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("eventlog: embedded NATS store %s is not writable: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}
