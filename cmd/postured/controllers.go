package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
)

// A node in a cluster: its entry in the node registry (GET /controllers),
// its metrics and its probes.

// pkiDir is --pki-dir, by default <data-dir>/pki.
func (s *serveCmd) pkiDir() string {
	if s.PKIDir != "" {
		return s.PKIDir
	}
	return filepath.Join(s.DataDir, "pki")
}

// nodeIDFile keeps a node's id across restarts, in its data directory.
const nodeIDFile = "node-id"

// nodeID reads the node's id from the data directory, creating it on the
// first start.
func nodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	data, err := os.ReadFile(path)
	if id := strings.TrimSpace(string(data)); err == nil && validNodeID(id) {
		return id, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	id := posture.NewID()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("node id: %w", err)
	}
	return id, nil
}

// validNodeID: a registry key, as NewID makes them.
func validNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// newMetrics builds the node's metrics on its projection and log.
func (n *node) newMetrics() *api.Metrics {
	return api.NewMetrics(api.MetricsOptions{Progress: n.store, State: n.logState, Deadlines: n.store, Halt: n.halt, Disk: n.disk})
}

// disk is the state of the disks of the log and the projection.
func (n *node) disk() []api.DiskState {
	l, p := n.elog.Space(), n.store.Space()
	return []api.DiskState{
		{Part: "log", Free: l.Free, Reserve: l.Reserve, Full: l.Full, Reason: l.Reason},
		{Part: "projection", Free: p.Free, Reserve: p.Reserve, Full: p.Full, Reason: p.Reason},
	}
}

func (n *node) logState(ctx context.Context) (api.LogState, error) {
	st, err := n.elog.State(ctx)
	return api.LogState{LastSeq: st.LastSeq, FirstTime: st.FirstTime, LastTime: st.LastTime, Missing: st.Missing}, err
}

// openCluster gives the APIs GET /controllers and announces the node in
// the registry. It runs before the APIs are registered.
func (n *node) openCluster(ctx context.Context, s *serveCmd) error {
	id, err := nodeID(s.DataDir)
	if err != nil {
		return err
	}
	name := s.Name
	if name == "" {
		name = n.advertise
	}
	n.self = eventlog.Node{ID: id, Name: name, APIAddress: "https://" + n.advertise, JoinedAt: time.Now().UTC()}
	if leaf := n.serverCert.Leaf; leaf != nil {
		n.self.CertPEM, n.self.Fingerprint = string(pki.EncodePEM(leaf)), pki.Fingerprint(leaf)
	}
	controllers := &api.Controllers{List: n.listControllers}
	n.client.Controllers, n.management.Controllers = controllers, controllers
	return n.elog.Announce(ctx, n.self)
}

func (n *node) listControllers(ctx context.Context) ([]api.Controller, error) {
	nodes, err := n.elog.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]api.Controller, len(nodes))
	for i, x := range nodes {
		out[i] = api.Controller{ID: x.ID, Name: x.Name, APIAddress: x.APIAddress, CertPEM: x.CertPEM,
			Fingerprint: x.Fingerprint, JoinedAt: x.JoinedAt}
	}
	return out, nil
}

// announce refreshes the node's entry in the registry until ctx ends, then
// withdraws it. A refresh that fails (the cluster lost its quorum) is
// logged and tried again at the next tick.
func (n *node) announce(ctx context.Context) error {
	t := time.NewTicker(eventlog.NodeRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := n.elog.Withdraw(wctx, n.self.ID); err != nil {
				n.log.Warn("withdrawing the node from the registry", "err", err)
			}
			return nil
		case <-t.C:
		}
		actx, cancel := context.WithTimeout(ctx, eventlog.NodeRefresh)
		err := n.elog.Announce(actx, n.self)
		cancel()
		if err != nil && ctx.Err() == nil {
			n.log.Warn("announcing the node", "err", err)
		}
	}
}
