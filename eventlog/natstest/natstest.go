// Package natstest runs real NATS JetStream clusters in-process for tests:
// servers with cluster routes on loopback, each with its own store.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is an in-process NATS JetStream cluster on loopback.
type Cluster struct {
	Servers []*server.Server
	URLs    []string // client URLs, one per server
	// Account is the account of the stream ($G unless StartSecure set
	// up accounts).
	Account string
}

// Start starts size servers that route to each other on loopback ports
// picked for them. It returns once JetStream has a meta leader that sees
// every server; the servers are shut down when the test ends.
func Start(t testing.TB, size int) *Cluster {
	t.Helper()
	return start(t, size, nil)
}

// start starts the cluster; conf, when set, gives each server's
// configuration file text (server i, the cluster listen address, every
// route URL) instead of the plain options.
//
// The route ports are picked free and then released before the servers
// bind them, so another process may take one meanwhile (the tests of other
// packages, a load generator): the server on it then never gets ready. A
// cluster that is not ready is shut down and started again on other ports,
// up to three times, and the test fails with what every attempt said.
func start(t testing.TB, size int, conf func(i int, listen string, routes []string) string) *Cluster {
	t.Helper()
	var errs []string
	for attempt := 1; attempt <= 3; attempt++ {
		c, err := startOnce(t, size, conf)
		if err == nil {
			return c
		}
		c.shutdown()
		errs = append(errs, fmt.Sprintf("attempt %d: %v", attempt, err))
		t.Logf("natstest: %v; starting the cluster again on other ports", err)
	}
	t.Fatalf("natstest: the cluster did not start:\n%s", strings.Join(errs, "\n"))
	return nil
}

func (c *Cluster) shutdown() {
	for _, ns := range c.Servers {
		ns.Shutdown()
		ns.WaitForShutdown()
	}
}

func startOnce(t testing.TB, size int, conf func(i int, listen string, routes []string) string) (*Cluster, error) {
	t.Helper()
	c := &Cluster{Account: server.DEFAULT_GLOBAL_ACCOUNT}
	var routes []string
	for range size {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return c, err
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
	t.Cleanup(c.shutdown)
	for i := range size {
		port, err := strconv.Atoi(routes[i][strings.LastIndex(routes[i], ":")+1:])
		if err != nil {
			return c, err
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("nats-%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   stores[i],
			Cluster:    server.ClusterOpts{Name: "postured-test", Host: "127.0.0.1", Port: port},
			Routes:     server.RoutesFromStr(strings.Join(routes, ",")),
		}
		if conf != nil {
			file := filepath.Join(t.TempDir(), fmt.Sprintf("nats-%d.conf", i+1))
			text := conf(i, fmt.Sprintf("127.0.0.1:%d", port), routes)
			if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
				return c, err
			}
			if opts, err = server.ProcessConfigFile(file); err != nil {
				t.Fatalf("nats-%d: %v", i+1, err) // a wrong configuration: no retry helps
			}
		}
		opts.NoLog, opts.NoSigs = true, true
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		ns.Start()
		c.Servers = append(c.Servers, ns)
	}
	deadline := time.Now().Add(15 * time.Second)
	for i, ns := range c.Servers {
		if !ns.ReadyForConnections(time.Until(deadline)) {
			return c, fmt.Errorf("nats-%d not ready within 15s (its route port %s may have been taken)", i+1, routes[i])
		}
		c.URLs = append(c.URLs, ns.ClientURL())
	}
	deadline = time.Now().Add(30 * time.Second)
	for !c.formed() {
		if time.Now().After(deadline) {
			return c, errors.New("the JetStream cluster did not form within 30s")
		}
		time.Sleep(50 * time.Millisecond) // server state has no barrier to wait on
	}
	return c, nil
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
		if ns.Running() && ns.JetStreamIsStreamLeader(c.Account, stream) {
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

// ClosedAddr answers a loopback address that refuses connections for the
// whole test: a socket bound to it but not listening holds the port, so no
// server that another test starts meanwhile can take it (a port merely found
// free and closed again can be).
func ClosedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
}
