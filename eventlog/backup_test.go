package eventlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/eventlog/natstest"
)

// TestBackupAndRestore takes a backup of the event stream and the data key
// bucket with postured's credentials, as `nats backup stream
// --inbox-prefix _INBOX_postured` does (JetStream's snapshot protocol, each
// chunk acknowledged), on a cluster configured as deploy/nats, and restores
// both into a fresh cluster: the auditor reads there the events appended to
// the first, and a data key is there. A restore into the cluster whose
// streams exist is refused and leaves the log as it was.
func TestBackupAndRestore(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	c1, sec1 := natstest.StartSecure(t, 3, natstest.SecureOptions{})
	w, err := eventlog.Open(ctx, eventlog.Options{URLs: c1.URLs, Replicas: 1,
		Auth: eventlog.ClientAuth{NkeyFile: sec1.PosturedSeed, TLSCA: sec1.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var appended []posture.Event
	for i := range 200 {
		e := posture.MustEvent(posture.MFAPassed{IdentityID: fmt.Sprint("identity-", i), APISessionID: "session"},
			time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC))
		seq, err := w.Append(ctx, e)
		if err != nil {
			t.Fatal(err)
		}
		e.Seq = seq
		appended = append(appended, e)
	}
	keys, err := w.OpenKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("a sealed data key")
	if err := keys.Create(ctx, "identity-0", key); err != nil {
		t.Fatal(err)
	}

	nc1 := connectAs(t, c1.URLs, sec1.CAFile, sec1.PosturedSeed)
	type backup struct {
		stream        string
		config, state json.RawMessage
		archive       []byte
	}
	var backups []backup
	for _, stream := range []string{"POSTURED", "KV_postured_keys"} {
		config, state, archive := snapshot(t, nc1, stream)
		backups = append(backups, backup{stream, config, state, archive})
	}

	// Into the cluster it came from: the stream exists, the restore is
	// refused and the log is as it was.
	if err := restore(t, nc1, "POSTURED", backups[0].config, backups[0].state, backups[0].archive); err == nil {
		t.Error("a restore replaced the running stream")
	}
	if last, err := w.LastSeq(ctx); err != nil || last != 200 {
		t.Errorf("after the refused restore: last sequence %d %v, want 200", last, err)
	}

	c2, sec2 := natstest.StartSecure(t, 3, natstest.SecureOptions{})
	nc2 := connectAs(t, c2.URLs, sec2.CAFile, sec2.PosturedSeed)
	for _, b := range backups {
		if err := restore(t, nc2, b.stream, b.config, b.state, b.archive); err != nil {
			t.Fatalf("restore of %s into a fresh cluster: %v", b.stream, err)
		}
	}
	auditor, err := openAs(t, c2.URLs, eventlog.ClientAuth{TLSCA: sec2.CAFile, NkeyFile: sec2.AuditorSeed}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range appended {
		got, err := auditor.Get(ctx, want.Seq)
		if err != nil {
			t.Fatalf("restored message %d: %v", want.Seq, err)
		}
		if got.ID != want.ID || got.Type != want.Type || !got.At.Equal(want.At) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("restored message %d: %+v, want %+v", want.Seq, got, want)
		}
	}
	w2, err := eventlog.Open(ctx, eventlog.Options{URLs: c2.URLs, Replicas: 1,
		Auth: eventlog.ClientAuth{NkeyFile: sec2.PosturedSeed, TLSCA: sec2.CAFile}})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	keys2, err := w2.OpenKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := keys2.Get(ctx, "identity-0"); err != nil || !bytes.Equal(got, key) {
		t.Errorf("restored data key: %x %v, want %x", got, err, key)
	}
}

// connectAs connects with a role's seed, its replies under postured's
// inbox prefix.
func connectAs(t *testing.T, urls []string, ca, seed string) *nats.Conn {
	t.Helper()
	key, err := nats.NkeyOptionFromSeed(seed)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(urls[0], key, nats.RootCAs(ca), nats.CustomInboxPrefix(eventlog.InboxNode))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// snapshot takes a snapshot of a stream: its configuration and state, and
// the archive, chunk by chunk, each acknowledged before the next is sent.
func snapshot(t *testing.T, nc *nats.Conn, stream string) (config, state json.RawMessage, archive []byte) {
	t.Helper()
	inbox := nc.NewInbox() // under the connection's prefix
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	// Chunks of 1 KiB, one in flight: each is acknowledged before the next.
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "no_consumers": true, "chunk_size": 1024, "window_size": 1024})
	msg, err := nc.Request("$JS.API.STREAM.SNAPSHOT."+stream, req, 5*time.Second)
	if err != nil {
		t.Fatalf("snapshot of %s: %v", stream, err)
	}
	var resp struct {
		Error  *apiError       `json:"error"`
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil || resp.Error != nil {
		t.Fatalf("snapshot of %s: %s %v", stream, msg.Data, err)
	}
	acks := 0
	for {
		chunk, err := sub.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("snapshot of %s: %v", stream, err)
		}
		if len(chunk.Data) == 0 {
			if status := chunk.Header.Get("Status"); status != "" && status != "204" {
				t.Fatalf("snapshot of %s ended with status %s %s", stream, status, chunk.Header.Get("Description"))
			}
			if stream == "POSTURED" && acks == 0 {
				t.Fatalf("snapshot of %s in one chunk: no acknowledgement was needed", stream)
			}
			return resp.Config, resp.State, archive
		}
		archive = append(archive, chunk.Data...)
		if chunk.Reply != "" {
			if err := nc.Publish(chunk.Reply, nil); err != nil {
				t.Fatal(err)
			}
			acks++
		}
	}
}

// restore restores a stream from a snapshot: the request with its
// configuration and state, then the archive in chunks, each answered, and
// an empty chunk that ends it.
func restore(t *testing.T, nc *nats.Conn, stream string, config, state json.RawMessage, archive []byte) error {
	t.Helper()
	req, _ := json.Marshal(map[string]json.RawMessage{"config": config, "state": state})
	msg, err := nc.Request("$JS.API.STREAM.RESTORE."+stream, req, 5*time.Second)
	if err != nil {
		return err
	}
	var resp struct {
		Error          *apiError `json:"error"`
		DeliverSubject string    `json:"deliver_subject"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	for len(archive) > 0 {
		n := min(len(archive), 1024)
		if _, err := nc.Request(resp.DeliverSubject, archive[:n], 5*time.Second); err != nil {
			return err
		}
		archive = archive[n:]
	}
	msg, err = nc.Request(resp.DeliverSubject, nil, 30*time.Second)
	if err != nil {
		return err
	}
	var done struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &done); err != nil {
		return err
	}
	if done.Error != nil {
		return done.Error
	}
	return nil
}

type apiError struct {
	Code        int    `json:"code"`
	Description string `json:"description"`
}

func (e *apiError) Error() string { return e.Description }
