package eventlog

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// startEmbedded runs a JetStream-enabled nats-server in this process with its
// store under dir. With listen empty it opens no port and is reached through
// an in-process connection only.
func startEmbedded(dir, listen string, syncAlways bool) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "postured",
		JetStream:  true,
		StoreDir:   dir,
		DontListen: listen == "",
		NoSigs:     true,
		NoLog:      true,
		SyncAlways: syncAlways,
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
	ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 30s")
	}
	return ns, nil
}
