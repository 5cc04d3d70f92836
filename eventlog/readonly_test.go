package eventlog_test

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// TestAuditorCredentialsSayWhy: the auditor's credentials where postured's
// are needed (serve opening the log, the data key bucket, an append such as
// events skip) fail with a message that says so, not only the server's
// "permissions violation"; and the embedded server logs the auditor's
// violations at WARN, not ERROR, so that probing cannot fill the error log.
func TestAuditorCredentialsSayWhy(t *testing.T) {
	var logs syncBuffer
	l, caFile := listeningLogTo(t, t.TempDir(), &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	urls := []string{l.ListenURL()}
	auth := eventlog.ClientAuth{TLSCA: caFile, NkeyFile: seedOf(t, l, eventlog.RoleAuditor)}

	say := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s with the auditor's credentials: no error", what)
		}
		for _, want := range []string{"may not write", "auditor's", "postured's credentials", "Permissions Violation"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s with the auditor's credentials: %q does not say %q", what, err, want)
			}
		}
	}
	// Serving with them is refused at once: a node's replies come on an
	// inbox the auditor may not read.
	start := time.Now()
	_, err := openAs(t, urls, auth, false)
	say("opening the log to serve", err)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refused after %s", took)
	}
	// Reading the stream is allowed; the data key bucket is not.
	auditor, err := openAs(t, urls, auth, true)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	_, err = auditor.OpenKeys(ctx)
	say("opening the data key bucket", err)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("refused after %s", took)
	}
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	_, err = auditor.Append(actx, event("audit", 1))
	say("an append", err)

	violations := 0
	for _, r := range logs.records(t) {
		msg, _ := r["msg"].(string)
		if r["component"] != "nats-server" || !strings.Contains(msg, "Violation") {
			continue
		}
		violations++
		if r["level"] != "WARN" {
			t.Errorf("a client's permission violation logged at %v: %s", r["level"], msg)
		}
	}
	if violations == 0 {
		t.Errorf("no permission violation in the server's log:\n%s", logs.String())
	}
}

// A client that fails the TLS handshake (it does not trust the nodes' CA)
// is logged at Warn, as other clients' faults are.
func TestFailedHandshakeIsAWarning(t *testing.T) {
	var logs syncBuffer
	l, _ := listeningLogTo(t, t.TempDir(), &logs)
	conn, err := tls.Dial("tcp", strings.TrimPrefix(l.ListenURL(), "tls://"), &tls.Config{MinVersion: tls.VersionTLS12})
	if err == nil {
		conn.Close()
		t.Fatal("a client that does not trust the CA completed the handshake")
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if logs.String() == "" {
			continue
		}
		for _, r := range logs.records(t) {
			if msg, _ := r["msg"].(string); r["component"] == "nats-server" && strings.Contains(msg, "TLS handshake error") {
				if r["level"] != "WARN" {
					t.Fatalf("a failed handshake logged at %v: %s", r["level"], msg)
				}
				return
			}
		}
	}
	t.Fatalf("no failed handshake in the server's log:\n%s", logs.String())
}

// A reader with the auditor's credentials deletes the consumer it read
// subjects with, as a node does: no consumer is left to fill the stream's
// limit, and the server logs no violation.
func TestAuditorDeletesItsConsumers(t *testing.T) {
	var logs syncBuffer
	l, caFile := listeningLogTo(t, t.TempDir(), &logs)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := l.Append(ctx, event("audit", 1)); err != nil {
		t.Fatal(err)
	}
	consumers := func() int {
		t.Helper()
		st, err := l.JetStream().Stream(ctx, "POSTURED")
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Consumers
	}
	before := consumers()
	auditor, err := openAs(t, []string{l.ListenURL()}, eventlog.ClientAuth{TLSCA: caFile, NkeyFile: seedOf(t, l, eventlog.RoleAuditor)}, true)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	if err := auditor.ReadSubjects(ctx, 1, 0, []string{"audit"}, func(es []posture.Event) error { read += len(es); return nil }); err != nil || read != 1 {
		t.Fatalf("read %d events: %v", read, err)
	}
	if n := consumers(); n != before {
		t.Fatalf("%d consumers after the auditor's read, %d before", n, before)
	}
	// An append, refused, is a violation the server logs after anything
	// the reader asked before it.
	actx, acancel := context.WithTimeout(ctx, 10*time.Second)
	defer acancel()
	if _, err := auditor.Append(actx, event("audit", 2)); err == nil {
		t.Fatal("the auditor appended")
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "Violation") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "Violation") {
		t.Fatalf("the refused append is not in the server's log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "CONSUMER.DELETE") {
		t.Fatalf("the auditor may not delete its consumer:\n%s", logs.String())
	}
}

// The auditor may not read a node's replies, which would name the node's
// consumers: a subscription to the node's inbox (or to every inbox) is
// refused, while one to readers' inbox is allowed, and the node's consumer
// works meanwhile.
func TestAuditorCannotReadANodesReplies(t *testing.T) {
	l, caFile := listeningLog(t, t.TempDir())
	o, err := nats.NkeyOptionFromSeed(seedOf(t, l, eventlog.RoleAuditor))
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 8)
	nc, err := nats.Connect(l.ListenURL(), o, nats.RootCAs(caFile),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	seen := make(chan string, 64)
	for _, subject := range []string{eventlog.InboxNode + ".>", "_INBOX.>", ">"} {
		if _, err := nc.Subscribe(subject, func(m *nats.Msg) { seen <- m.Subject }); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !strings.Contains(err.Error(), `Subscription to "`+subject+`"`) {
				t.Fatalf("subscribing to %s: %v", subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("the auditor's subscription to %s is not refused", subject)
		}
	}
	if _, err := nc.Subscribe(eventlog.InboxReader+".>", func(m *nats.Msg) { seen <- m.Subject }); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for i := range 3 {
		if _, err := l.Append(ctx, event("audit", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Read(ctx, 1, 3, func([]posture.Event) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case subject := <-seen:
		t.Fatalf("the auditor read %s", subject)
	case err := <-violations:
		t.Fatalf("a violation on the auditor's allowed inbox: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
}
