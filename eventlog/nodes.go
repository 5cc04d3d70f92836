package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Node is a running postured node as it announces itself to the others.
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// APIAddress is the base URL clients reach the node at
	// ("https://host:port").
	APIAddress string `json:"apiAddress"`
	// CertPEM and Fingerprint describe the node's server certificate.
	CertPEM     string    `json:"certPem,omitempty"`
	Fingerprint string    `json:"fingerprint,omitempty"`
	JoinedAt    time.Time `json:"joinedAt"`
}

// Node registry timing: an announcement lives NodeTTL unless it is
// refreshed; nodes refresh every NodeRefresh, so a node that stops
// refreshing (it died, or lost the cluster) drops out within NodeTTL.
const (
	NodeTTL     = 15 * time.Second
	NodeRefresh = 5 * time.Second
)

// nodesBucket is the JetStream key-value bucket of the node registry. It is
// kept in memory: liveness need not survive a restart of the cluster.
const nodesBucket = "postured_nodes"

// registry opens (creating on first use) the node registry bucket, with as
// many replicas as the event stream.
func (l *Log) registry(ctx context.Context) (jetstream.KeyValue, error) {
	l.kvMu.Lock()
	defer l.kvMu.Unlock()
	if l.kv != nil {
		return l.kv, nil
	}
	replicas := 1
	if info := l.stream.CachedInfo(); info != nil && info.Config.Replicas > 0 {
		replicas = info.Config.Replicas
	}
	var kv jetstream.KeyValue
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		// Opened, or created when missing, but never updated: the
		// postured role may not change a stream (ensureStream).
		kv, err = l.js.KeyValue(ctx, nodesBucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = l.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
				Bucket:      nodesBucket,
				Description: "live postured nodes",
				History:     1,
				TTL:         NodeTTL,
				Storage:     jetstream.MemoryStorage,
				Replicas:    replicas,
			})
		}
		if err != nil {
			if denied := l.streamDenied("KV_" + nodesBucket); denied != nil {
				return denied
			}
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: node registry: %w", err)
	}
	l.kv = kv
	return kv, nil
}

// Announce records n in the node registry (or refreshes it) for NodeTTL.
func (l *Log) Announce(ctx context.Context, n Node) error {
	if n.ID == "" {
		return errors.New("eventlog: a node needs an ID")
	}
	kv, err := l.registry(ctx)
	if err != nil {
		return err
	}
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	err = retry(ctx, func(ctx context.Context) error {
		_, err := kv.Put(ctx, n.ID, data)
		return err
	})
	if err != nil {
		// The bucket may be gone (it lives in memory: a restart of
		// JetStream, see space.go, loses it): the next announcement
		// creates it again.
		l.kvMu.Lock()
		if l.kv == kv {
			l.kv = nil
		}
		l.kvMu.Unlock()
	}
	return err
}

// Withdraw removes a node from the registry (a clean shutdown).
func (l *Log) Withdraw(ctx context.Context, id string) error {
	kv, err := l.registry(ctx)
	if err != nil {
		return err
	}
	return retry(ctx, func(ctx context.Context) error { return kv.Delete(ctx, id) })
}

// Nodes lists the nodes announced within NodeTTL, by name then ID.
func (l *Log) Nodes(ctx context.Context) ([]Node, error) {
	kv, err := l.registry(ctx)
	if err != nil {
		return nil, err
	}
	var nodes []Node
	err = retry(ctx, func(ctx context.Context) error {
		nodes = nodes[:0]
		w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
		if err != nil {
			return err
		}
		defer w.Stop()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return errors.New("eventlog: node registry watcher closed")
				}
				if e == nil { // every current entry was delivered
					return nil
				}
				var n Node
				if err := json.Unmarshal(e.Value(), &n); err != nil {
					continue // not ours: skip rather than fail the list
				}
				nodes = append(nodes, n)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: list nodes: %w", err)
	}
	sort.Slice(nodes, func(i, j int) bool {
		if nodes[i].Name != nodes[j].Name {
			return nodes[i].Name < nodes[j].Name
		}
		return nodes[i].ID < nodes[j].ID
	})
	return nodes, nil
}

// State is the position of the stream.
type State struct {
	// LastSeq is the sequence of the newest event (0 when empty).
	LastSeq uint64
	// FirstTime and LastTime are when the oldest and the newest events were
	// stored (the server's clock).
	FirstTime, LastTime time.Time
	// Replicas and Leader describe the stream's placement; Current counts
	// the replicas (the leader included) that are up to date.
	Replicas int
	Leader   string
	Current  int
	// Missing counts the messages missing from the log (Log.Gaps).
	Missing int
}

// State reads the stream's position and placement.
func (l *Log) State(ctx context.Context) (State, error) {
	var st State
	err := retry(ctx, func(ctx context.Context) error {
		info, err := l.stream.Info(ctx)
		if err != nil {
			return err
		}
		st = State{
			LastSeq: info.State.LastSeq, FirstTime: info.State.FirstTime, LastTime: info.State.LastTime,
			Replicas: info.Config.Replicas, Current: 1, Missing: info.State.NumDeleted + int(lostStart(info.State)),
		}
		if info.Cluster != nil {
			st.Leader = info.Cluster.Leader
			if st.Leader == "" {
				st.Current = 0
			}
			for _, p := range info.Cluster.Replicas {
				if p.Current && !p.Offline {
					st.Current++
				}
			}
		}
		return nil
	})
	return st, err
}

// Gaps are what is missing from the log. postured never deletes a
// message of its stream, nor purges it, and sets it no limits: JetStream
// leaves a gap where someone deleted a message, or where its server
// dropped one whose stored bytes no longer matched their checksum (a
// damaged disk, or an edit); and a log whose first sequence is past 1 lost
// its start.
type Gaps struct {
	// Head: the sequences 1..Head are gone from the start of the log.
	Head uint64
	// Deleted are the sequences missing inside the log, in order.
	Deleted []uint64
}

// Count is how many messages are missing.
func (m Gaps) Count() int { return int(m.Head) + len(m.Deleted) }

// Through is how many messages at or before seq are missing, and the first.
func (m Gaps) Through(seq uint64) (n int, first uint64) {
	if m.Head > 0 {
		n, first = int(min(m.Head, seq)), 1
	}
	for _, d := range m.Deleted {
		if d > seq {
			break
		}
		if n == 0 {
			first = d
		}
		n++
	}
	return n, first
}

// lostStart is how many messages the log lost at its start: those before
// its first sequence.
func lostStart(st jetstream.StreamState) uint64 {
	if st.FirstSeq > 1 {
		return st.FirstSeq - 1
	}
	return 0
}

// Gaps reads what is missing from the log.
func (l *Log) Gaps(ctx context.Context) (Gaps, error) {
	var m Gaps
	err := retry(ctx, func(ctx context.Context) error {
		info, err := l.stream.Info(ctx, jetstream.WithDeletedDetails(true))
		if err != nil {
			return err
		}
		m = Gaps{Head: lostStart(info.State), Deleted: info.State.Deleted}
		return nil
	})
	if err != nil {
		return Gaps{}, fmt.Errorf("eventlog: read what is missing from the log: %w", err)
	}
	slices.Sort(m.Deleted)
	return m, nil
}
