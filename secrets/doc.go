// Package secrets seals and opens secret fields (AES-256-GCM) under
// per-owner data keys, so that no secret reaches an event, a projection
// value or a log line in clear.
//
// Three layers:
//
//   - The key-encryption key (KEK): 32 random bytes in a file beside the CA
//     (LoadOrCreateKEK), shared by the nodes of a cluster like the CA. It is
//     never in the event log.
//   - A data key per owner (an identity, an edge router, a CA): 32 random
//     bytes, created on first use, kept sealed by the KEK in a KeyStore
//     outside the event stream. Destroy erases it, and with it every secret
//     sealed under it, in every copy of the log (crypto-shredding).
//   - Sealed fields: AES-GCM with a random nonce under the owner's data key,
//     the additional data binding the ciphertext to its owner and field, in
//     the compact form "s1.<key id>.<base64url(nonce|ciphertext)>".
//
// Secrets that only have to be matched (one-time tokens) are not sealed but
// hashed by the caller (posture.HashToken). This package imports the
// standard library only.
package secrets
