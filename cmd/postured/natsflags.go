package main

import (
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
