package main

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/pki"
)

type natsCmd struct {
	Init natsInitCmd `cmd:"" help:"Create what an external NATS cluster needs to authenticate postured: a server certificate from the CA, the postured and auditor users' nkey seeds, a route password, and nats.env for deploy/nats/*.conf."`
}

// natsInitCmd prepares the credentials of an external NATS cluster
// configured as deploy/nats/*.conf. It is idempotent: what exists is kept
// (a certificate that expires within 30 days is re-issued) and nats.env is
// written again from it.
type natsInitCmd struct {
	Dir    string   `required:"" help:"Directory for server.pem, server.key, postured.nk, auditor.nk, route-password and nats.env (created 0700; secrets 0600)."`
	PKIDir string   `name:"pki-dir" required:"" help:"The CA that issues the NATS servers' certificate (created if missing); give the postured nodes the same --pki-dir so that one ca.pem verifies both."`
	Host   []string `default:"127.0.0.1,localhost" help:"Names and addresses the NATS servers are reached at (their certificate's names)."`
	Route  []string `help:"host:port of each server's cluster listener, in order: NATS_ROUTE_1, NATS_ROUTE_2, ... in nats.env carry the route password."`
}

const (
	natsCertFile  = "server.pem"
	natsKeyFile   = "server.key"
	routePassFile = "route-password"
	natsEnvFile   = "nats.env"
)

func (c *natsInitCmd) Run(s streams) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	_, statErr := os.Stat(filepath.Join(c.PKIDir, "ca.pem"))
	ca, err := pki.Open(c.PKIDir, pki.Options{})
	if err != nil {
		return err
	}
	if errors.Is(statErr, fs.ErrNotExist) {
		// Said, so that a mistyped --pki-dir is not taken for the nodes'.
		fmt.Fprintf(s.out, "a new CA was made in %s: give the postured nodes this --pki-dir\n", c.PKIDir)
	}
	if err := c.serverCertificate(ca); err != nil {
		return err
	}
	creds, err := eventlog.LoadOrCreateCredentials(c.Dir)
	if err != nil {
		return err
	}
	password, err := c.routePassword()
	if err != nil {
		return err
	}
	var env strings.Builder
	env.WriteString("# Written by postured nats init: the users' public nkeys and the cluster routes for deploy/nats/*.conf.\n")
	for _, cr := range creds {
		fmt.Fprintf(&env, "NATS_%s_NKEY=%s\n", strings.ToUpper(cr.Role), cr.Public)
	}
	fmt.Fprintf(&env, "NATS_ROUTE_PASSWORD=%s\n", password)
	for i, r := range c.Route {
		fmt.Fprintf(&env, "NATS_ROUTE_%d=nats-route://route:%s@%s\n", i+1, password, r)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, natsEnvFile), []byte(env.String()), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(s.out, "NATS server certificate: %s, %s (CA %s)\n", filepath.Join(c.Dir, natsCertFile),
		filepath.Join(c.Dir, natsKeyFile), filepath.Join(c.PKIDir, "ca.pem"))
	for _, cr := range creds {
		fmt.Fprintf(s.out, "%s nkey seed: %s (--nats-nkey)\n", cr.Role, cr.SeedFile)
	}
	fmt.Fprintf(s.out, "environment for nats-server: %s\n", filepath.Join(c.Dir, natsEnvFile))
	return nil
}

// serverCertificate keeps a usable server.pem, or issues one.
func (c *natsInitCmd) serverCertificate(ca *pki.CA) error {
	certPath, keyPath := filepath.Join(c.Dir, natsCertFile), filepath.Join(c.Dir, natsKeyFile)
	if kp, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && kp.Leaf != nil &&
		ca.IssuedBy(kp.Leaf) && time.Now().Add(30*24*time.Hour).Before(kp.Leaf.NotAfter) && coversAll(kp, c.Host) {
		return nil
	}
	cert, err := ca.ServiceCertificate(c.Host)
	if err != nil {
		return err
	}
	key, err := pki.EncodeKeyPEM(cert.PrivateKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(keyPath, key, 0o600); err != nil {
		return err
	}
	return os.WriteFile(certPath, pki.EncodePEM(cert.Leaf, ca.Certificate()), 0o644)
}

func coversAll(kp tls.Certificate, hosts []string) bool {
	for _, h := range hosts {
		if kp.Leaf.VerifyHostname(strings.Trim(h, "[]")) != nil {
			return false
		}
	}
	return true
}

// routePassword reads the route password, creating it on the first run.
func (c *natsInitCmd) routePassword() (string, error) {
	path := filepath.Join(c.Dir, routePassFile)
	data, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(data))) >= 32 {
		return strings.TrimSpace(string(data)), nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	password := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(password+"\n"), 0o600); err != nil {
		return "", err
	}
	return password, nil
}
