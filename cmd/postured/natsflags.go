package main

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/seed-0809debe/posture/eventlog"
)

// natsFlags are the credentials and the TLS settings of the connection to
// NATS, shared by every command that takes --nats-url.
type natsFlags struct {
	NatsCreds    string `name:"nats-creds" placeholder:"FILE" help:"NATS credentials file (user JWT and seed) for --nats-url."`
	NatsUser     string `name:"nats-user" help:"NATS user for --nats-url; the password comes from POSTURED_NATS_PASSWORD."`
	NatsPassword string `name:"nats-password" hidden:"" help:"NATS password (POSTURED_NATS_PASSWORD)."`
	NatsNkey     string `name:"nats-nkey" placeholder:"FILE" help:"File with a NATS nkey user seed for --nats-url (a node with --nats-listen writes <data-dir>/nats/creds/postured.nk and auditor.nk)."`
	NatsTLSCA    string `name:"nats-tls-ca" placeholder:"FILE" help:"CA certificates (PEM) that verify the NATS servers (a node with --nats-listen: its <pki-dir>/ca.pem)."`
	NatsTLSCert  string `name:"nats-tls-cert" placeholder:"FILE" help:"Client certificate (PEM) for NATS servers that require mutual TLS."`
	NatsTLSKey   string `name:"nats-tls-key" placeholder:"FILE" help:"Key of --nats-tls-cert (PEM)."`
}

func (f natsFlags) clientAuth() eventlog.ClientAuth {
	return eventlog.ClientAuth{
		CredsFile: f.NatsCreds,
		User:      f.NatsUser,
		Password:  f.NatsPassword,
		NkeyFile:  f.NatsNkey,
		TLSCA:     f.NatsTLSCA,
		TLSCert:   f.NatsTLSCert,
		TLSKey:    f.NatsTLSKey,
	}
}

// connectHint adds to the error of a connection to --nats-url the flag it
// lacks: a server certificate from an unknown CA wants --nats-tls-ca, an
// authorization violation the auditor's seed (--nats-nkey).
func (f natsFlags) connectHint(err error) error {
	var unknownAuthority x509.UnknownAuthorityError
	switch {
	case errors.As(err, &unknownAuthority) || strings.Contains(err.Error(), "certificate signed by unknown authority"):
		if f.NatsTLSCA == "" {
			return fmt.Errorf("%w; the server's certificate is from a CA this command does not know: give it with --nats-tls-ca "+
				"(a node with --nats-listen: <data-dir>/pki/ca.pem, or ca.pem in its --pki-dir)", err)
		}
		return fmt.Errorf("%w; --nats-tls-ca %s is not the CA of the server's certificate", err, f.NatsTLSCA)
	case errors.Is(err, nats.ErrAuthorization) || strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		if f.NatsCreds == "" && f.NatsUser == "" && f.NatsNkey == "" {
			return fmt.Errorf("%w; the server wants credentials: give --nats-nkey with the auditor's seed "+
				"(a node with --nats-listen: <data-dir>/nats/creds/auditor.nk), or --nats-creds or --nats-user", err)
		}
		return fmt.Errorf("%w; the server refused these credentials (a node with --nats-listen takes the seeds in its "+
			"<data-dir>/nats/creds: auditor.nk reads)", err)
	}
	return err
}

// nodeFlags are what a running node's command line and environment say of
// its NATS port.
type nodeFlags struct {
	known      bool   // the command line of a node (serve) was read
	natsListen string // its --nats-listen ("": none, or not known)
	pkiDir     string // its --pki-dir ("": the default, <data-dir>/pki)
}

// readNodeFlags reads the flags of the node with process id pid from
// /proc (Linux; zero when they cannot be read or pid is not a node).
func readNodeFlags(pid int) nodeFlags {
	if pid <= 0 {
		return nodeFlags{}
	}
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(proc, "cmdline"))
	if err != nil {
		return nodeFlags{}
	}
	environ, _ := os.ReadFile(filepath.Join(proc, "environ"))
	cwd, _ := os.Readlink(filepath.Join(proc, "cwd"))
	return parseNodeFlags(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"),
		strings.Split(string(environ), "\x00"), cwd)
}

// parseNodeFlags reads a node's flags from its arguments (args[0] the
// program), its environment (POSTURED_<FLAG>, which a flag overrides) and
// its working directory (that of a relative --pki-dir).
func parseNodeFlags(args, env []string, cwd string) nodeFlags {
	if !slices.Contains(args, "serve") {
		return nodeFlags{}
	}
	n := nodeFlags{known: true}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "POSTURED_NATS_LISTEN="); ok {
			n.natsListen = v
		} else if v, ok := strings.CutPrefix(kv, "POSTURED_PKI_DIR="); ok {
			n.pkiDir = v
		}
	}
	for i := 1; i < len(args); i++ {
		for _, f := range []struct {
			name string
			to   *string
		}{{"--nats-listen", &n.natsListen}, {"--pki-dir", &n.pkiDir}} {
			if v, ok := strings.CutPrefix(args[i], f.name+"="); ok {
				*f.to = v
			} else if args[i] == f.name && i+1 < len(args) {
				*f.to = args[i+1]
			}
		}
	}
	if n.pkiDir != "" && !filepath.IsAbs(n.pkiDir) && cwd != "" {
		n.pkiDir = filepath.Join(cwd, n.pkiDir)
	}
	return n
}

// askNode says how to run an offline command against the running node
// that owns dataDir: over its --nats-listen port, with its CA and the
// auditor's seed, both in the data directory.
func askNode(dataDir string, n nodeFlags) string {
	seed := filepath.Join(dataDir, "nats", "creds", eventlog.RoleAuditor+".nk")
	_, noSeed := os.Stat(seed)
	if (n.known && n.natsListen == "") || (!n.known && noSeed != nil) {
		return "it was started without --nats-listen: ask its management API instead, or restart it with " +
			"--nats-listen <host:port> and run this command with --nats-url"
	}
	ca := filepath.Join(dataDir, "pki", "ca.pem")
	if n.pkiDir != "" {
		ca = filepath.Join(n.pkiDir, "ca.pem")
	}
	addr := "<host:port of its --nats-listen>"
	if n.natsListen != "" {
		addr = dialable(n.natsListen)
	}
	return fmt.Sprintf("ask the node instead: run the command again with --nats-url tls://%s --nats-tls-ca %s --nats-nkey %s "+
		"in place of --data-dir", addr, ca, seed)
}

// dialable is a listen address as a client dials it: a wildcard or empty
// host is the loopback address (which the node's certificate names).
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
