package pki

import "crypto/tls"

// MinTLSVersion is the oldest TLS version postured's servers accept: the
// HTTPS API and the NATS ports (embedded and deploy/nats).
const MinTLSVersion = tls.VersionTLS12

// CipherSuites returns the TLS 1.2 cipher suites postured's servers offer:
// ECDHE key exchange (forward secrecy) with an AEAD cipher only; no CBC, no
// SHA-1 MAC, no RSA key exchange. TLS 1.3 suites are not configurable in Go
// (all AEAD). The same list, by name, is in deploy/nats/*.conf
// (cipher_suites); CipherSuiteNames gives it.
func CipherSuites() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// CipherSuiteNames returns CipherSuites by their IANA names, as NATS
// server configurations spell them.
func CipherSuiteNames() []string {
	var names []string
	for _, id := range CipherSuites() {
		names = append(names, tls.CipherSuiteName(id))
	}
	return names
}
