package pki

import "errors"

// Sentinel errors. Functions wrap them with detail, so compare with errors.Is.
var (
	// ErrMissingCSR: the CSR input is empty.
	ErrMissingCSR = errors.New("pki: missing certificate signing request")
	// ErrInvalidCSR: the input is not a PKCS#10 CSR (PEM, DER or base64 DER),
	// or it carries a public key type that this CA does not sign.
	ErrInvalidCSR = errors.New("pki: invalid certificate signing request")
	// ErrCSRSignature: the CSR parses, but its self-signature does not verify
	// (the requester does not hold the private key).
	ErrCSRSignature = errors.New("pki: certificate signing request signature is invalid")

	// ErrInvalidCertificate: the input holds no parsable X.509 certificate
	// (PEM "CERTIFICATE" block), or a certificate that should be a CA is not one.
	ErrInvalidCertificate = errors.New("pki: invalid certificate")
	// ErrCertificateFailedValidation: the certificate does not chain to the
	// given roots, is outside its validity period, or lacks the key usage.
	ErrCertificateFailedValidation = errors.New("pki: certificate failed validation")
	// ErrInvalidCommonName: a CA proof certificate's common name is not the
	// CA's verification token.
	ErrInvalidCommonName = errors.New("pki: certificate common name does not match the verification token")

	// ErrTokenExpired: an enrollment JWT's exp has passed.
	ErrTokenExpired = errors.New("pki: enrollment token expired")
	// ErrTokenInvalid: an enrollment JWT is malformed, uses another algorithm
	// or key, or its signature does not verify.
	ErrTokenInvalid = errors.New("pki: invalid enrollment token")

	// ErrUnknownKey: a key id does not name a key of this signer.
	ErrUnknownKey = errors.New("pki: unknown key id")
	// ErrInvalidNonce: a challenge nonce is not a UUID.
	ErrInvalidNonce = errors.New("pki: nonce must be a UUID")
	// ErrChallengeFailed: a challenge response does not verify against the key.
	ErrChallengeFailed = errors.New("pki: challenge signature does not verify")

	// ErrUnsupportedKey: a key is neither ECDSA (P-256, P-384, P-521) nor RSA
	// where this package needs one of those, or a private key does not match
	// its certificate.
	ErrUnsupportedKey = errors.New("pki: unsupported or mismatched key")
)
