package eventlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/seed-0809debe/posture/eventlog"
)

// operatorServer runs a nats-server in operator (JWT) mode with one account
// that has JetStream, and returns its URL and the account's key pair, which
// signs users.
func operatorServer(t *testing.T) (string, nkeys.KeyPair) {
	t.Helper()
	op, _ := nkeys.CreateOperator()
	opPub, _ := op.PublicKey()
	opJWT, err := jwt.NewOperatorClaims(opPub).Encode(op)
	if err != nil {
		t.Fatal(err)
	}
	account := func(name string, js bool) (nkeys.KeyPair, string, string) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		c := jwt.NewAccountClaims(pub)
		c.Name = name
		if js {
			c.Limits.JetStreamLimits = jwt.JetStreamLimits{DiskStorage: -1, MemoryStorage: -1, Streams: -1, Consumer: -1}
		}
		enc, err := c.Encode(op)
		if err != nil {
			t.Fatal(err)
		}
		return kp, pub, enc
	}
	_, sysPub, sysJWT := account("SYS", false)
	acc, accPub, accJWT := account("POSTURED", true)
	conf := filepath.Join(t.TempDir(), "operator.conf")
	text := fmt.Sprintf(`listen: "127.0.0.1:-1"
operator: %q
system_account: %q
resolver: MEMORY
resolver_preload: { %s: %q, %s: %q }
jetstream { store_dir: %q }
`, opJWT, sysPub, sysPub, sysJWT, accPub, accJWT, t.TempDir())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	opts.NoLog, opts.NoSigs = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("operator-mode server not ready")
	}
	return ns.ClientURL(), acc
}

// credsFile writes a NATS credentials file for a new user signed by
// account.
func credsFile(t *testing.T, account nkeys.KeyPair) string {
	t.Helper()
	user, _ := nkeys.CreateUser()
	pub, _ := user.PublicKey()
	seed, _ := user.Seed()
	userJWT, err := jwt.NewUserClaims(pub).Encode(account)
	if err != nil {
		t.Fatal(err)
	}
	data, err := jwt.FormatUserConfig(userJWT, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCredentialsFile: a credentials file (user JWT and seed) authenticates
// against a server in operator mode; one signed by an account the server
// does not know is refused with the URL and the cause.
func TestCredentialsFile(t *testing.T) {
	url, account := operatorServer(t)
	l, err := openAs(t, []string{url}, eventlog.ClientAuth{CredsFile: credsFile(t, account)}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), event("creds", 1)); err != nil {
		t.Fatal(err)
	}
	stranger, _ := nkeys.CreateAccount()
	refused(t, "unknown account", []string{url}, eventlog.ClientAuth{CredsFile: credsFile(t, stranger)}, "authorization violation")
	refused(t, "anonymous", []string{url}, eventlog.ClientAuth{}, "authorization violation")
}
