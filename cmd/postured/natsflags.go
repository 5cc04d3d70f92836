package main

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
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

// checkFiles fails, naming the flag, when a file the flags name cannot be
// opened: before anything is made or connected.
func (f natsFlags) checkFiles() error {
	for _, x := range []struct{ flag, path string }{{"--nats-creds", f.NatsCreds}, {"--nats-nkey", f.NatsNkey},
		{"--nats-tls-ca", f.NatsTLSCA}, {"--nats-tls-cert", f.NatsTLSCert}, {"--nats-tls-key", f.NatsTLSKey}} {
		if x.path == "" {
			continue
		}
		fh, err := os.Open(x.path)
		if err != nil {
			return fmt.Errorf("%s: %w", x.flag, err)
		}
		fh.Close()
	}
	return nil
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
		if data, rerr := os.ReadFile(f.NatsCreds); f.NatsCreds != "" && rerr == nil && !bytes.Contains(data, []byte("NATS USER JWT")) {
			return fmt.Errorf("%w; --nats-creds %s holds no user JWT: a file with an nkey seed alone (such as auditor.nk) goes to --nats-nkey", err, f.NatsCreds)
		}
		return fmt.Errorf("%w; the server refused these credentials (a node with --nats-listen takes the seeds in its "+
			"<data-dir>/nats/creds: auditor.nk reads)", err)
	}
	return err
}

// askNode says how to run an offline command against the running node
// that owns its data directory, from what the node noted in the
// directory's lock (serve with --nats-listen notes its NATS URL, its CA
// and the seeds of the auditor, which reads, and of the nodes, which
// write: a command that writes, such as events skip, needs the second).
func askNode(notes map[string]string, writes bool) string {
	url, ca, seed := notes["nats-url"], notes["nats-tls-ca"], notes["nats-nkey"]
	if writes {
		seed = notes["nats-nkey-writer"]
	}
	if url == "" || ca == "" || seed == "" {
		return "it was started without --nats-listen: ask its management API instead, or restart it with " +
			"--nats-listen <host:port> and run this command with --nats-url (on an external NATS cluster, give that cluster's)"
	}
	return fmt.Sprintf("ask the node instead: run the command again with --nats-url %s --nats-tls-ca %s --nats-nkey %s "+
		"in place of --data-dir", dialable(url), ca, seed)
}

// dialable is a NATS URL as a client dials it: a wildcard host is the
// loopback address (which the node's certificate names).
func dialable(url string) string {
	scheme, addr, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return url
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
