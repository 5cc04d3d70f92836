// Package natstest runs real NATS JetStream clusters in-process for tests:
// servers with cluster routes on loopback, each with its own store.
package natstest

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is an in-process NATS JetStream cluster on loopback.
type Cluster struct {
	Servers []*server.Server
	URLs    []string // client URLs, one per server
}

// Start starts size servers that route to each other on loopback ports
// picked for them. It returns once JetStream has a meta leader that sees
// every server; the servers are shut down when the test ends.
func Start(t testing.TB, size int) *Cluster {
	t.Helper()
	c := &Cluster{}
	var routes []string
	for range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, "nats://"+ln.Addr().String())
		ln.Close()
	}
	// The stores are made before the shutdown is registered, so that
	// cleanup shuts the servers down before it removes their stores.
	stores := make([]string, size)
	for i := range stores {
		stores[i] = t.TempDir()
	}
	t.Cleanup(func() {
		for _, ns := range c.Servers {
			ns.Shutdown()
			ns.WaitForShutdown()
		}
	})
	for i := range size {
		port, err := strconv.Atoi(routes[i][strings.LastIndex(routes[i], ":")+1:])
		if err != nil {
			t.Fatal(err)
		}
		ns, err := server.NewServer(&server.Options{
			ServerName: fmt.Sprintf("nats-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   stores[i],
			NoLog:      true,
			NoSigs:     true,
			Cluster:    server.ClusterOpts{Name: "postured-test", Host: "127.0.0.1", Port: port},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		})
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		c.Servers = append(c.Servers, ns)
	}
	deadline := time.Now().Add(30 * time.Second)
	for i, ns := range c.Servers {
		if !ns.ReadyForConnections(time.Until(deadline)) {
			t.Fatalf("nats-%d not ready", i+1)
		}
		c.URLs = append(c.URLs, ns.ClientURL())
	}
	for !c.formed() {
		if time.Now().After(deadline) {
			t.Fatal("the JetStream cluster did not form within 30s")
		}
		time.Sleep(50 * time.Millisecond) // server state has no barrier to wait on
	}
	return c
}

func (c *Cluster) formed() bool {
	leader := false
	for _, ns := range c.Servers {
		if !ns.JetStreamIsCurrent() {
			return false
		}
		// Only the meta leader lists the peers.
		if ns.JetStreamIsLeader() && len(ns.JetStreamClusterPeers()) == len(c.Servers) {
			leader = true
		}
	}
	return leader
}

// StreamLeader is the running server leading the stream (nil while none
// is).
func (c *Cluster) StreamLeader(stream string) *server.Server {
	for _, ns := range c.Servers {
		if ns.Running() && ns.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return ns
		}
	}
	return nil
}

// Server is the running server of that name (nil if none).
func (c *Cluster) Server(name string) *server.Server {
	for _, ns := range c.Servers {
		if ns.Running() && ns.Name() == name {
			return ns
		}
	}
	return nil
}
