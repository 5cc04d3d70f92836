package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

const (
	serverValidity = 365 * 24 * time.Hour
	// serverRenewBefore: a stored server certificate that expires sooner than
	// this is re-issued.
	serverRenewBefore = 30 * 24 * time.Hour
)

// ServerCertificate returns the API server's TLS certificate for the given
// subject alternative names: DNS names ("localhost", "example.com",
// "*.example.com") and IP addresses ("127.0.0.1", "::1" or "[::1]"). At least
// one is required; the first becomes the common name.
//
// It loads server.pem and server.key from the CA directory and uses them if
// the certificate matches the key, was issued by this CA, is valid now,
// expires in more than 30 days and covers every requested name (exact,
// case-insensitive match; extra names in the certificate are fine).
// Otherwise it issues a new certificate (ECDSA P-256 key, ServerAuth, valid
// for one year but not beyond the CA) for exactly the requested names and
// replaces the files. A re-issue keeps a readable existing key, so that
// enrollment JWTs signed with it still verify; it only makes a new key when
// there is none or the file does not parse. Calls are serialised within a
// CA; two processes sharing the directory may both re-issue, and the last
// write wins on disk.
//
// The result carries the chain (leaf, then CA) and has Leaf set. A Signer
// built from it (see NewSigner) gets a new key id whenever the certificate is
// re-issued.
func (ca *CA) ServerCertificate(sans []string) (tls.Certificate, error) {
	dnsNames, ips, cn, err := splitSANs(sans)
	if err != nil {
		return tls.Certificate{}, err
	}
	ca.mu.Lock()
	defer ca.mu.Unlock()

	keyPath := filepath.Join(ca.dir, serverKeyFile)
	certPath := filepath.Join(ca.dir, serverCertFile)
	now := ca.opts.Now()

	key, err := readKey(keyPath)
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case errors.As(err, &pathErr):
		return tls.Certificate{}, fmt.Errorf("pki: %w", err) // I/O trouble: leave the file alone
	case err != nil:
		key = nil // unparsable: the file is ours, so start over
	}
	if key != nil {
		if leaf, err := readCert(certPath); err == nil && ca.serverCertUsable(leaf, key, dnsNames, ips, now) {
			return ca.tlsCertificate(leaf, key), nil
		}
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), ca.opts.Rand)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("pki: server key: %w", err)
		}
		data, err := encodeKey(k)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("pki: server key: %w", err)
		}
		if err := writeReplace(keyPath, data, keyPerm); err != nil {
			return tls.Certificate{}, fmt.Errorf("pki: %w", err)
		}
		key = k
	}

	leaf, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(serverValidity),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}, key.Public())
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := writeReplace(certPath, EncodePEM(leaf), certPerm); err != nil {
		return tls.Certificate{}, fmt.Errorf("pki: %w", err)
	}
	return ca.tlsCertificate(leaf, key), nil
}

func (ca *CA) tlsCertificate(leaf *x509.Certificate, key crypto.Signer) tls.Certificate {
	return tls.Certificate{
		Certificate: [][]byte{leaf.Raw, ca.cert.Raw},
		PrivateKey:  key,
		Leaf:        leaf,
	}
}

func (ca *CA) serverCertUsable(leaf *x509.Certificate, key crypto.Signer, dnsNames []string, ips []net.IP, now time.Time) bool {
	if !keyMatches(leaf, key) || !ca.IssuedBy(leaf) {
		return false
	}
	if now.Before(leaf.NotBefore) || !now.Add(serverRenewBefore).Before(leaf.NotAfter) {
		return false
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		return false
	}
	for _, n := range dnsNames {
		if !slices.ContainsFunc(leaf.DNSNames, func(have string) bool { return strings.EqualFold(have, n) }) {
			return false
		}
	}
	for _, ip := range ips {
		if !slices.ContainsFunc(leaf.IPAddresses, ip.Equal) {
			return false
		}
	}
	return true
}

// splitSANs sorts names into DNS names (lower-cased) and IP addresses,
// dropping blanks and duplicates and keeping order. first is the first name
// in normal form, for the common name.
func splitSANs(sans []string) (dnsNames []string, ips []net.IP, first string, err error) {
	for _, s := range sans {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if ip := net.ParseIP(strings.Trim(s, "[]")); ip != nil {
			if first == "" {
				first = ip.String()
			}
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		name := strings.ToLower(strings.TrimSuffix(s, "."))
		if !validDNSName(name) {
			return nil, nil, "", fmt.Errorf("pki: %q is neither a DNS name nor an IP address", s)
		}
		if first == "" {
			first = name
		}
		if !slices.Contains(dnsNames, name) {
			dnsNames = append(dnsNames, name)
		}
	}
	if first == "" {
		return nil, nil, "", errors.New("pki: server certificate needs at least one DNS name or IP address")
	}
	return dnsNames, ips, first, nil
}

// validDNSName accepts letters, digits, '-', '_' and dots between non-empty
// labels of at most 63 bytes, with an optional leading "*." wildcard.
func validDNSName(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			default:
				return false
			}
		}
	}
	return true
}
