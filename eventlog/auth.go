package eventlog

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// ClientAuth is how a connection to a NATS server authenticates and secures
// itself. At most one of CredsFile, User and NkeyFile is set; with none the
// client connects without credentials. The zero value connects anonymously
// and uses TLS only when a URL has the tls:// scheme or the server requires
// it (verified against the system roots).
type ClientAuth struct {
	// CredsFile is a NATS credentials file (a user JWT and its nkey seed,
	// as nsc writes them), for servers in operator mode.
	CredsFile string
	// User and Password authenticate with a user name and a password.
	User, Password string
	// NkeyFile is a file holding an nkey user seed ("SU..."), the kind
	// the embedded server generates for its users.
	NkeyFile string
	// TLSCA is a PEM file of the CAs that verify the server's certificate
	// (for example postured's <pki-dir>/ca.pem).
	TLSCA string
	// TLSCert and TLSKey are a client certificate and its key, for servers
	// that require mutual TLS. Both or neither.
	TLSCert, TLSKey string
}

// natsOptions turns a into connection options. Files are checked here, so
// that a missing or unreadable one is reported by name before connecting.
func (a ClientAuth) natsOptions() ([]nats.Option, error) {
	n := 0
	for _, set := range []bool{a.CredsFile != "", a.User != "", a.NkeyFile != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return nil, errors.New("eventlog: use one of a credentials file, a user and password, or an nkey seed file")
	}
	if a.Password != "" && a.User == "" {
		return nil, errors.New("eventlog: a NATS password needs a user")
	}
	if (a.TLSCert == "") != (a.TLSKey == "") {
		return nil, errors.New("eventlog: a NATS client certificate needs its key, and a key its certificate")
	}
	for _, f := range []struct{ path, what string }{
		{a.CredsFile, "NATS credentials file"}, {a.NkeyFile, "NATS nkey seed file"},
		{a.TLSCA, "NATS servers' CA file"}, {a.TLSCert, "NATS client certificate"}, {a.TLSKey, "NATS client key"},
	} {
		if f.path == "" {
			continue
		}
		fh, err := os.Open(f.path)
		if err != nil {
			return nil, fmt.Errorf("eventlog: the %s: %w", f.what, err)
		}
		fh.Close()
	}
	var opts []nats.Option
	switch {
	case a.CredsFile != "":
		opts = append(opts, nats.UserCredentials(a.CredsFile))
	case a.User != "":
		opts = append(opts, nats.UserInfo(a.User, a.Password))
	case a.NkeyFile != "":
		o, err := nats.NkeyOptionFromSeed(a.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("eventlog: nkey seed %s: %w", a.NkeyFile, err)
		}
		opts = append(opts, o)
	}
	if a.TLSCA != "" {
		opts = append(opts, nats.RootCAs(a.TLSCA))
	}
	if a.TLSCert != "" {
		opts = append(opts, nats.ClientCert(a.TLSCert, a.TLSKey))
	}
	if a.TLSCA != "" || a.TLSCert != "" {
		opts = append(opts, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}

// The roles of NATS users. Deployments give them these permissions (deploy/
// nats/accounts.conf spells the same lists in the server's configuration
// syntax; a test keeps the two equal).
const (
	// RolePostured is a postured node: it appends to the stream, consumes
	// it, creates it, the node registry bucket and the data key bucket
	// (whose keys it destroys). It may not update or delete a stream, nor
	// purge the event stream or delete one of its messages: nobody
	// rewrites or shortens history through a node's credentials.
	RolePostured = "postured"
	// RoleAuditor reads the stream and follows it (stream info, direct
	// and stored message gets, consumers created, pulled and deleted). It
	// may not publish to the stream's subjects nor change or delete a
	// stream or a message. It may also read and follow the transitions
	// stream, with consumers of its own that it acknowledges. Consumers
	// are named by subject: it reaches those whose names it knows, its
	// own; postured's are named at random or with a key (webhooks), and
	// it may not list them.
	RoleAuditor = "auditor"
)

// Reply subjects. A connection receives replies (JetStream's answers, the
// messages its consumers deliver, with their acknowledgement subjects,
// which name the consumer) on subjects under its inbox prefix: a node's
// under InboxNode, a reader's under InboxReader. The auditor may subscribe
// to readers' only, so that it cannot read a node's replies, which would
// name the node's consumers (and with a name, its permissions on
// consumers reach them).
const (
	InboxNode   = "_INBOX_postured"
	InboxReader = "_INBOX_auditor"
)

// Permissions returns the NATS permissions of a role for the stream (for
// example "POSTURED", whose subjects are "postured.>").
func Permissions(role, stream string) (*server.Permissions, error) {
	subjects := strings.ToLower(stream) + ".>"
	transitions := TransitionsStream(stream)
	// postured's credentials also serve readers (audit, replay, events
	// tail with the postured role), which use InboxReader.
	nodeInbox := &server.SubjectPermission{Allow: []string{InboxNode + ".>", InboxReader + ".>"}}
	readerInbox := &server.SubjectPermission{Allow: []string{InboxReader + ".>"}}
	switch role {
	case RolePostured:
		return &server.Permissions{
			Publish: &server.SubjectPermission{
				Allow: []string{subjects, TransitionsSubjects(stream) + ">", "$JS.API.>", "$KV." + nodesBucket + ".>", "$KV." + keysBucket + ".>", "$JS.ACK.>", "$JS.FC.>",
					// Backups: the acknowledgements of a snapshot's
					// chunks, and a restore's chunks, of the event stream
					// and the data key bucket (a snapshot is delivered to
					// any subject its request names, so no lesser role
					// could be trusted with it).
					"$JS.SNAPSHOT.ACK." + stream + ".>", "$JS.SNAPSHOT.ACK.KV_" + keysBucket + ".>",
					"$JS.SNAPSHOT.RESTORE." + stream + ".>", "$JS.SNAPSHOT.RESTORE.KV_" + keysBucket + ".>"},
				// Messages of the data key bucket may be deleted (a
				// deleted identity's key is destroyed); those of the
				// event stream and the transitions stream may not. No
				// stream is deleted or updated: a changed limit or
				// retention could drop history, so a stream's
				// configuration, once created, is an administrator's.
				// Nor is the data key bucket purged whole: that would
				// destroy every sealed secret at once.
				Deny: []string{"$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.PURGE." + stream, "$JS.API.STREAM.MSG.DELETE." + stream,
					"$JS.API.STREAM.PURGE." + transitions, "$JS.API.STREAM.MSG.DELETE." + transitions, "$JS.API.STREAM.PURGE.KV_" + keysBucket},
			},
			Subscribe: nodeInbox,
		}, nil
	case RoleAuditor:
		return &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{
				"$JS.API.INFO",
				"$JS.API.STREAM.INFO." + stream,
				"$JS.API.STREAM.MSG.GET." + stream,
				"$JS.API.DIRECT.GET." + stream,
				"$JS.API.DIRECT.GET." + stream + ".>",
				"$JS.API.CONSUMER.CREATE." + stream,
				"$JS.API.CONSUMER.CREATE." + stream + ".>",
				"$JS.API.CONSUMER.INFO." + stream + ".>",
				"$JS.API.CONSUMER.MSG.NEXT." + stream + ".>",
				"$JS.API.CONSUMER.DELETE." + stream + ".>",
				"$JS.API.STREAM.INFO." + transitions,
				"$JS.API.STREAM.MSG.GET." + transitions,
				"$JS.API.DIRECT.GET." + transitions,
				"$JS.API.DIRECT.GET." + transitions + ".>",
				"$JS.API.CONSUMER.CREATE." + transitions,
				"$JS.API.CONSUMER.CREATE." + transitions + ".>",
				"$JS.API.CONSUMER.DURABLE.CREATE." + transitions + ".>",
				"$JS.API.CONSUMER.INFO." + transitions + ".>",
				"$JS.API.CONSUMER.MSG.NEXT." + transitions + ".>",
				"$JS.API.CONSUMER.DELETE." + transitions + ".>",
				"$JS.ACK." + transitions + ".>",
			}},
			Subscribe: readerInbox,
		}, nil
	}
	return nil, fmt.Errorf("eventlog: unknown NATS role %q", role)
}

// Credential is where the seed of an embedded server's user is kept.
type Credential struct {
	Role     string // RolePostured or RoleAuditor
	SeedFile string // an nkey seed file, mode 0600 (ClientAuth.NkeyFile)
	Public   string // the user's public nkey ("U...")
}

// seedFileName is the seed file of a role in the credentials directory.
func seedFileName(dir, role string) string { return filepath.Join(dir, role+".nk") }

// LoadOrCreateCredentials reads the nkey seeds of the postured and the
// auditor users from dir (postured.nk, auditor.nk), creating what is missing
// (dir 0700, each seed file 0600, written exclusively so that a concurrent
// start keeps one). The embedded server with Listen keeps its users this
// way; `postured nats init` makes them for an external cluster.
func LoadOrCreateCredentials(dir string) ([]Credential, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("eventlog: credentials directory: %w", err)
	}
	var creds []Credential
	for _, role := range []string{RolePostured, RoleAuditor} {
		path := seedFileName(dir, role)
		kp, err := loadOrCreateSeed(path)
		if err != nil {
			return nil, err
		}
		pub, err := kp.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("eventlog: %s: %w", path, err)
		}
		creds = append(creds, Credential{Role: role, SeedFile: path, Public: pub})
	}
	return creds, nil
}

func loadOrCreateSeed(path string) (nkeys.KeyPair, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("eventlog: nkey: %w", err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return nil, fmt.Errorf("eventlog: nkey: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return loadOrCreateSeed(path)
		}
		if err != nil {
			return nil, fmt.Errorf("eventlog: %w", err)
		}
		_, err = f.Write(append(seed, '\n'))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(path)
			return nil, fmt.Errorf("eventlog: %w", err)
		}
		return kp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: %w", err)
	}
	kp, err := nkeys.ParseDecoratedNKey(data)
	if err != nil {
		return nil, fmt.Errorf("eventlog: nkey seed %s: %w", path, err)
	}
	if _, err := kp.Seed(); err != nil {
		return nil, fmt.Errorf("eventlog: %s holds no nkey seed: %w", path, err)
	}
	return kp, nil
}
