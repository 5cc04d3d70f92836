package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
	"github.com/seed-0809debe/posture/pki"
)

// checkpointedNode runs a node that checkpoints every 10 events (and every
// 100ms), makes some history through the APIs and waits until a checkpoint
// covers all of it. It returns the sequence of a posture response well
// inside a checkpoint.
func checkpointedNode(t *testing.T, cfg serveCmd) (n *testNode, postureSeq uint64) {
	t.Helper()
	cfg.CheckpointEvery, cfg.CheckpointInterval = 10, 100*time.Millisecond
	n = startTestNode(t, cfg)
	st := newStory(t, n)
	st.play(t)
	for v := range 15 {
		body := map[string]any{"id": st.check, "typeId": "OS", "type": "Windows", "version": "10.0." + strconv.Itoa(19045+v)}
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", st.ep.token, body); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var seqs []uint64
	last := lastEvent(ctx, t, n.elog, func(e posture.Event) {
		if e.Type == posture.TypePostureRecorded {
			seqs = append(seqs, e.Seq)
		}
	})
	if err := n.checkpointer.WaitFor(ctx, last); err != nil {
		t.Fatalf("no checkpoint covers %d: %v", last, err)
	}
	if len(seqs) < 10 {
		t.Fatalf("%d posture responses in the log", len(seqs))
	}
	return n, seqs[len(seqs)/2]
}

// lastEvent reads the log up to its end and returns the sequence of its
// last event that is not itself a checkpoint, calling visit with each
// event: the one to wait for a checkpoint over (a checkpoint that landed
// last is covered by none until another event comes).
func lastEvent(ctx context.Context, t *testing.T, l *eventlog.Log, visit func(posture.Event)) uint64 {
	t.Helper()
	end, err := l.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := uint64(0)
	if err := l.Read(ctx, 1, end, func(b []posture.Event) error {
		for _, e := range b {
			visit(e)
			if e.Type != posture.TypeLogCheckpointed {
				last = e.Seq
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return last
}

// `audit verify` passes on an untouched log (a running node's, over its
// --nats-listen port with the auditor's credentials), and on its stopped
// data directory names the sequence of a message deleted through the
// JetStream API and the checkpoint that proves it.
func TestAuditVerifyDeleted(t *testing.T) {
	dir := t.TempDir()
	var seq uint64
	t.Run("history", func(t *testing.T) {
		cfg := defaultTestConfig(dir)
		cfg.NatsListen = freeAddr(t)
		_, seq = checkpointedNode(t, cfg)
		// The auditor's credentials are enough: verification only reads.
		ca := filepath.Join(dir, "pki", "ca.pem")
		out, err := command(t, "audit", "verify", "--nats-url", "tls://"+cfg.NatsListen, "--nats-tls-ca", ca,
			"--nats-nkey", filepath.Join(dir, "nats", "creds", "auditor.nk"), "--ca", ca)
		if err != nil || !strings.HasPrefix(out, "OK: verified messages 1..") {
			t.Fatalf("untouched log, as the auditor: %v\n%s", err, out)
		}
		t.Log(strings.TrimSpace(out))
		remote := []string{"audit", "verify", "--nats-url", "tls://" + cfg.NatsListen, "--nats-tls-ca", ca,
			"--nats-nkey", filepath.Join(dir, "nats", "creds", "auditor.nk")}
		// Another CA's certificate: every checkpoint fails, and the
		// command says --ca is more likely wrong than the log forged.
		other := t.TempDir()
		if _, err := pki.Open(other, pki.Options{}); err != nil {
			t.Fatal(err)
		}
		code, out, errOut := runMain(t, append(remote, "--ca", filepath.Join(other, "ca.pem"))...)
		if code != exitFailed || !strings.Contains(out, "not valid: signature does not verify with the CA certificate: another key signed it") ||
			strings.Contains(out, "x509") || !strings.Contains(errOut, "note: no checkpoint's signature verifies with the CA certificate "+filepath.Join(other, "ca.pem")) {
			t.Fatalf("another CA: exit %d\n%s\n%s", code, out, errOut)
		}
		// --projection compares a stopped node's projection, whether the
		// log is read over NATS or from the data directory.
		for _, args := range [][]string{append(remote, "--ca", ca, "--data-dir", dir, "--projection"), {"audit", "verify", "--data-dir", dir, "--projection"}} {
			if _, err := command(t, args...); err == nil ||
				!strings.Contains(err.Error(), "--projection compares a stopped node's projection with the log: data directory ") {
				t.Fatalf("%v on a running node: %v", args, err)
			}
		}
	})

	l, err := eventlog.Open(t.Context(), eventlog.Options{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := l.JetStream().Stream(t.Context(), "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(t.Context(), seq); err != nil {
		t.Fatal(err)
	}
	l.Close()
	out, err := command(t, "audit", "verify", "--data-dir", dir)
	t.Log(strings.TrimSpace(out))
	want := "FAIL: sequence " + strconv.FormatUint(seq, 10) + " deleted or damaged (checkpoint at seq "
	if !errors.Is(err, errVerifyFailed) || !strings.HasPrefix(out, want) {
		t.Fatalf("after deleting %d: %v\n%s\nwant a line starting %q", seq, err, out, want)
	}
}

// `audit verify` on a stopped node's data directory whose store was
// damaged (a message altered in its block file, the index removed): the
// embedded server, opening it, drops what it cannot read, checkpoints and
// all. Verification works on a copy, so the store is left as it was, and
// the node's projection shows what the log lost.
func TestAuditVerifyDamagedStore(t *testing.T) {
	dir := t.TempDir()
	t.Run("history", func(t *testing.T) {
		checkpointedNode(t, defaultTestConfig(dir))
	})
	blocks, _ := filepath.Glob(filepath.Join(dir, "nats", "jetstream", "*", "streams", "POSTURED", "msgs", "1.blk"))
	if len(blocks) != 1 {
		t.Fatalf("block files: %v", blocks)
	}
	data, err := os.ReadFile(blocks[0])
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(`"isAdmin":false`))
	if i < 0 {
		t.Fatal("no identity in the first block")
	}
	copy(data[i:], `"isAdmin":true `)
	if err := os.WriteFile(blocks[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(filepath.Dir(blocks[0]), "index.db")); err != nil {
		t.Fatal(err)
	}
	// A copy a killed verification left behind goes too.
	if err := os.MkdirAll(filepath.Join(dir, ".verify-123", "nats"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := command(t, "audit", "verify", "--data-dir", dir)
	t.Log(strings.TrimSpace(out))
	if !errors.Is(err, errVerifyFailed) || !strings.HasPrefix(out, "FAIL: ") || !strings.Contains(out, "but this node applied up to") {
		t.Fatalf("a damaged store: %v\n%s", err, out)
	}
	after, err := os.ReadFile(blocks[0])
	if err != nil || !bytes.Equal(after, data) {
		t.Fatalf("verification changed the store: %d bytes before, %d after (%v)", len(data), len(after), err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".verify-*")); len(leftovers) != 0 {
		t.Fatalf("the copy is left: %v", leftovers)
	}
}

// Interrupting `audit verify --data-dir` while it copies the store stops the
// copy: the command fails with the interruption and leaves no copy behind.
func TestAuditVerifyCopyInterrupted(t *testing.T) {
	dir := t.TempDir()
	t.Run("history", func(t *testing.T) { checkpointedNode(t, defaultTestConfig(dir)) })
	f := logFlags{DataDir: dir, StreamReplicas: 1}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	// The copy itself stops (not only the opening of the log after it).
	if l, err := f.openStore(ctx, true, false); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "copy the event log") {
		if err == nil {
			l.Close()
		}
		t.Fatalf("an interrupted copy: %v, want context.Canceled", err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".verify-*")); len(leftovers) != 0 {
		t.Fatalf("the copy is left: %v", leftovers)
	}
	l, err := f.openStore(t.Context(), true, false)
	if err != nil {
		t.Fatalf("the same copy, not interrupted: %v", err)
	}
	l.Close()
}

// `audit verify` on a stopped node's data directory passes, and names the
// sequence of a message deleted and published again with altered data.
func TestAuditVerifyRepublished(t *testing.T) {
	dir := t.TempDir()
	var seq uint64
	t.Run("history", func(t *testing.T) { _, seq = checkpointedNode(t, defaultTestConfig(dir)) }) // stopped when it returns

	out, err := command(t, "audit", "verify", "--data-dir", dir)
	if err != nil || !strings.HasPrefix(out, "OK: verified messages 1..") {
		t.Fatalf("untouched log: %v\n%s", err, out)
	}

	ctx := t.Context()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := l.JetStream().Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetMsg(ctx, seq)
	if err != nil {
		t.Fatal(err)
	}
	altered := strings.Replace(string(m.Data), `"version":"10.0.`, `"version":"11.0.`, 1)
	if altered == string(m.Data) {
		t.Fatalf("no version to alter in %s", m.Data)
	}
	if err := stream.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	if _, err := l.JetStream().PublishMsg(ctx, &nats.Msg{Subject: m.Subject, Data: []byte(altered)}); err != nil {
		t.Fatal(err)
	}
	l.Close()

	out, err = command(t, "audit", "verify", "--data-dir", dir)
	t.Log(strings.TrimSpace(out))
	want := "FAIL: sequence " + strconv.FormatUint(seq, 10) + " deleted or damaged (checkpoint at seq "
	if !errors.Is(err, errVerifyFailed) || !strings.HasPrefix(out, want) {
		t.Fatalf("after republishing %d altered: %v\n%s\nwant a line starting %q", seq, err, out, want)
	}
}

// rebuiltReady starts a node on dir without its projection and snapshots,
// waits until its log says what it found of the log it rebuilt from (a
// line holding finding) and returns its readiness. The node is stopped at
// the end of t.
func rebuiltReady(t *testing.T, dir, finding string) api.ReadyView {
	t.Helper()
	for _, d := range []string{"projections", "snapshots"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	var logs lockedBuffer
	n := startTestNodeLog(t, defaultTestConfig(dir), slog.New(slog.NewTextHandler(&logs, nil)))
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), finding) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", finding, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, v := n.readyz(t)
	return v
}

// Two nodes on a NATS cluster both checkpoint the log they share: one
// checkpoint lands per range, and the log verifies until an administrator
// deletes a message through the JetStream API while the nodes run.
func TestClusterCheckpoints(t *testing.T) {
	nc := natstest.Start(t, 3)
	pkiDir := t.TempDir()
	often := func(cfg *serveCmd) { cfg.CheckpointEvery, cfg.CheckpointInterval = 10, 100*time.Millisecond }
	a := startClusterNode(t, nc, pkiDir, "node-a", often)
	b := startClusterNode(t, nc, pkiDir, "node-b", often)
	admin := a.adminToken(t)
	check := a.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os",
		"operatingSystems": []any{map[string]any{"type": "Windows", "versions": []string{">=10.0.0"}}}})
	ep := a.endpoint(t, admin, "laptop")
	for i := range 40 {
		n := a.testNode
		if i%2 == 1 {
			n = b.testNode
		}
		body := map[string]any{"id": check, "typeId": "OS", "type": "Windows", "version": "10.0." + strconv.Itoa(i)}
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, body); r.Status != http.StatusCreated {
			t.Fatalf("posture on %s: %d %s", n.cfg.Name, r.Status, r.Body)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	last := lastEvent(ctx, t, a.elog, func(posture.Event) {})
	for _, n := range []*clusterNode{a, b} {
		if err := n.checkpointer.WaitFor(ctx, last); err != nil {
			t.Fatalf("%s: no checkpoint covers %d: %v", n.cfg.Name, last, err)
		}
	}
	out, err := command(t, "audit", "verify", "--nats-url", strings.Join(nc.URLs, ","), "--ca", filepath.Join(pkiDir, "ca.pem"), "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v eventlog.Verification
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	var checkpoints int
	var postureSeq uint64
	if err := a.elog.Read(ctx, 1, v.Last, func(batch []posture.Event) error {
		for _, e := range batch {
			switch {
			case e.Type == posture.TypeLogCheckpointed:
				checkpoints++
			case e.Type == posture.TypePostureRecorded && postureSeq == 0 && e.Seq > 20:
				postureSeq = e.Seq
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d checkpoints, covered %d of %d", v.Checkpoints, v.Covered, v.Last)
	if !v.OK() || v.Covered < last || checkpoints != v.Checkpoints {
		t.Fatalf("%d checkpoint events in the log, %d in the chain: %+v", checkpoints, v.Checkpoints, v)
	}

	// An administrator of the cluster deletes a posture response through
	// the JetStream API while the nodes run.
	seq := postureSeq
	conn, err := nats.Connect(nc.URLs[2])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	js, err := jetstream.New(conn)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "POSTURED")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, seq); err != nil {
		t.Fatal(err)
	}
	// A replica that has not yet applied the delete may answer a read of
	// the stream (direct gets): the delete shows once every server has it.
	want := "FAIL: sequence " + strconv.FormatUint(seq, 10) + " deleted or damaged (checkpoint at seq "
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err = command(t, "audit", "verify", "--nats-url", strings.Join(nc.URLs, ","), "--ca", filepath.Join(pkiDir, "ca.pem"))
		if errors.Is(err, errVerifyFailed) || time.Now().After(deadline) {
			break
		}
	}
	t.Log(strings.TrimSpace(out))
	if !errors.Is(err, errVerifyFailed) || !strings.HasPrefix(out, want) {
		t.Fatalf("after deleting %d: %v\n%s\nwant a line starting %q", seq, err, out, want)
	}
}

// A node refuses to serve a log that ends before its projection's cursor
// (the log's store restored from an older copy), saying which sequences are
// lost, and one whose newest snapshot is beyond the log's end; with its
// projection and snapshots removed it rebuilds from the log as it is and
// serves it.
func TestServeRefusesLogBehindProjection(t *testing.T) {
	dir := t.TempDir()
	cfg := defaultTestConfig(dir)
	t.Run("first", func(t *testing.T) {
		n := startTestNode(t, cfg)
		n.create(t, n.adminToken(t), "services", map[string]any{"name": "kept"})
	})
	older := filepath.Join(t.TempDir(), "nats")
	if err := os.CopyFS(older, os.DirFS(filepath.Join(dir, "nats"))); err != nil {
		t.Fatal(err)
	}
	t.Run("second", func(t *testing.T) {
		n := startTestNode(t, cfg)
		n.create(t, n.adminToken(t), "services", map[string]any{"name": "lost"})
		if _, _, err := n.snapshots.Take(t.Context(), n.store, n.elog); err != nil {
			t.Fatal(err)
		}
	})
	if err := os.RemoveAll(filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(older, filepath.Join(dir, "nats")); err != nil {
		t.Fatal(err)
	}
	n, err := openNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler))
	if err == nil {
		n.Close()
		t.Fatal("a node opened a log that ends before its projection")
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "are lost from the log") || !strings.Contains(err.Error(), filepath.Join(dir, "projections")) {
		t.Fatalf("the refusal: %v", err)
	}
	// The projection alone removed, the newest snapshot is still of the
	// lost history: past moments would answer from it.
	if err := os.RemoveAll(filepath.Join(dir, "projections")); err != nil {
		t.Fatal(err)
	}
	if n, err = openNode(t.Context(), &cfg, "127.0.0.1:1280", slog.New(slog.DiscardHandler)); err == nil {
		n.Close()
		t.Fatal("a node opened a log that ends before its newest snapshot")
	}
	if !strings.Contains(err.Error(), "newest snapshot is at") || strings.Contains(err.Error(), filepath.Join(dir, "projections")) {
		t.Fatalf("the refusal for a snapshot: %v", err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "snapshots")); err != nil {
		t.Fatal(err)
	}
	rebuilt := startTestNode(t, cfg)
	r := rebuilt.do(t, http.MethodGet, mgmt+"/services", rebuilt.adminToken(t), nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"kept"`) || strings.Contains(string(r.Body), `"lost"`) {
		t.Fatalf("rebuilt from the older log: %d %s", r.Status, r.Body)
	}
}

// `audit verify --projection` rebuilds a stopped node's projection from its
// log and compares it and its snapshots: untouched, they pass; edited while
// the node was stopped (an identity made admin, a key added, a transition
// queued, a key added to a snapshot), they fail, naming the keys.
func TestAuditVerifyProjection(t *testing.T) {
	dir := t.TempDir()
	var identity string
	t.Run("history", func(t *testing.T) {
		cfg := defaultTestConfig(dir)
		cfg.SnapshotEvery = 10
		n, _ := checkpointedNode(t, cfg)
		identity = n.endpoint(t, n.adminToken(t), "verify-user").id
	})
	out, err := command(t, "audit", "verify", "--data-dir", dir, "--projection")
	if err != nil || !strings.Contains(out, "OK: the projection is the log's, rebuilt to sequence ") || strings.Contains(out, "and so are its 0 snapshots") {
		t.Fatalf("untouched projection and snapshots: %v\n%s", err, out)
	}
	snaps, err := filepath.Glob(filepath.Join(dir, "snapshots", "snap-*", "db"))
	if err != nil || len(snaps) == 0 {
		t.Fatalf("no snapshot taken: %v", err)
	}
	snap, err := pebble.Open(snaps[0], &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Set([]byte("e/identities/planted-in-snapshot"), []byte(`{}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	seqOf := func(db string) string {
		return strings.TrimLeft(strings.TrimPrefix(filepath.Base(filepath.Dir(db)), "snap-"), "0")
	}
	snapSeq := seqOf(snaps[0])
	// The times that decide which snapshot serves a past moment, moved
	// back; and another snapshot made unloadable (a layout no build
	// wrote), which opening the snapshots would remove.
	if len(snaps) < 2 {
		t.Fatalf("%d snapshots, want two at least", len(snaps))
	}
	editMeta := func(db string, edit func(map[string]any)) {
		t.Helper()
		path := filepath.Join(filepath.Dir(db), "meta.json")
		var meta map[string]any
		data, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(data, &meta)
		}
		if err != nil {
			t.Fatal(err)
		}
		edit(meta)
		if data, err = json.Marshal(meta); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	editMeta(snaps[0], func(m map[string]any) { m["maxEventAt"] = "2000-01-01T00:00:00Z" })
	secondSeq := seqOf(snaps[1])
	editMeta(snaps[1], func(m map[string]any) { m["layout"] = 99 })

	db, err := pebble.Open(filepath.Join(dir, "projections"), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("e/identities/" + identity)
	value, closer, err := db.Get(key)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	admin := bytes.Replace(value, []byte(`"isAdmin":false`), []byte(`"isAdmin":true`), 1)
	closer.Close()
	if bytes.Equal(admin, value) {
		t.Fatalf("%s holds no isAdmin false: %s", key, value)
	}
	if err := db.Set(key, admin, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("e/identities/planted"), value, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	// A transition queued for the relay to publish (and webhooks to
	// deliver, signed) that no event caused.
	forged := []byte("t/00000000000000000001/000000099")
	if err := db.Set(forged, []byte(`{"id":"forged","kind":"session-removed"}`), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out, err = command(t, "audit", "verify", "--data-dir", dir, "--projection")
	t.Log(strings.TrimSpace(out))
	for _, want := range []string{
		"FAIL: the projection and its ",
		"snapshot " + snapSeq + `: "e/identities/planted-in-snapshot": not derived from the log`,
		strconv.Quote(string(key)) + ": another value than the log's",
		`"e/identities/planted": not derived from the log`,
		strconv.Quote(string(forged)) + ": not derived from the log",
		"snapshot " + snapSeq + ": maxEventAt 2000-01-01T00:00:00Z, but the latest event up to " + snapSeq + " is of ",
		"snapshot " + secondSeq + ": does not load: layout 99, want ",
	} {
		if !errors.Is(err, errProjectionDiffers) || !strings.Contains(out, want) {
			t.Fatalf("edited projection: %v\n%s\nwant a line with %q", err, out, want)
		}
	}
	if _, err := os.Stat(snaps[1]); err != nil {
		t.Fatalf("verifying removed the snapshot it could not load: %v", err)
	}
	// A snapshot of an earlier layout (an earlier build's, which the node
	// removes when it next starts) is noted, not a finding.
	editMeta(snaps[1], func(m map[string]any) { m["layout"] = 7 })
	out, _ = command(t, "audit", "verify", "--data-dir", dir, "--projection")
	if !strings.Contains(out, "note: snapshot "+secondSeq+": of layout 7, not compared") || strings.Contains(out, "does not load") {
		t.Fatalf("a snapshot of an earlier layout:\n%s", out)
	}
}

// quietPebble drops Pebble's logging.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any)           {}
func (quietPebble) Errorf(string, ...any)          {}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// A node that stops gracefully covers its log with a last checkpoint, so
// that no tail of it is left unsigned while it is down (where an edit of
// the files would be signed as it is on the next start). Here no
// checkpoint is due while it runs (every 10,000 events or each minute).
func TestGracefulStopCoversTheLog(t *testing.T) {
	dir := t.TempDir()
	t.Run("history", func(t *testing.T) {
		n := startTestNode(t, defaultTestConfig(dir))
		newStory(t, n).play(t)
		if c := n.checkpointer.Covered(); c != 0 {
			t.Fatalf("a checkpoint covers %d while the node runs: the test proves nothing", c)
		}
	}) // stopped when it returns
	out, err := command(t, "audit", "verify", "--data-dir", dir, "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var v struct{ Covered, Uncovered, Checkpoints uint64 }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The last checkpoint's own message is after it.
	if v.Covered == 0 || v.Checkpoints != 1 || v.Uncovered != 1 {
		t.Fatalf("after a graceful stop: %s", out)
	}
	// A node that rebuilds its projection from it finds it untouched.
	t.Run("untouched", func(t *testing.T) {
		if r := rebuiltReady(t, dir, "matches its signed checkpoints"); r.LogAltered != "" || !r.Ready {
			t.Fatalf("readyz after a rebuild from an untouched log: %+v", r)
		}
	})

	// Someone who may append to the log adds an event and a checkpoint of
	// it that the CA did not sign: a node that rebuilds from that log says
	// so, and stays ready.
	ctx := t.Context()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: filepath.Join(dir, "nats")})
	if err != nil {
		t.Fatal(err)
	}
	seq, err := l.Append(ctx, posture.MustEvent(posture.APISessionTouched{ID: "nosuchsess", IdentityID: "nosuchid00", At: time.Now()}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	forger, err := eventlog.NewCheckpointer(l, eventlog.CheckpointOptions{Every: 1, Sign: func([]byte) ([]byte, error) { return []byte("forged"), nil }})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- forger.Run(fctx) }()
	if err := forger.WaitFor(ctx, seq); err != nil {
		t.Fatal(err)
	}
	stop()
	<-done
	l.Close()
	if r := rebuiltReady(t, dir, "does not match its signed checkpoints"); !strings.HasPrefix(r.LogAltered, "FAIL: checkpoint at seq") || !r.Ready {
		t.Fatalf("readyz after a rebuild from a log with a forged checkpoint: %+v", r)
	}
}

// TestOfflineCommandsWithoutALog: a mistyped --data-dir is said as a
// directory without an event log by every offline command, audit verify
// too (which also reads the CA beside the log).
func TestOfflineCommandsWithoutALog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mistyped")
	data := "--data-dir=" + dir
	for _, args := range [][]string{
		{"audit", "verify", data},
		{"audit", "identity", "someone", data},
		{"explain", "--identity", "someone", "--service", "something", data},
		{"events", "tail", "--no-follow", data},
	} {
		_, err := command(t, args...)
		if want := "no event log at " + filepath.Join(dir, "nats"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", strings.Join(args[:2], " "), err, want)
		}
	}
}
