package posture

import (
	"crypto/rand"

	"github.com/google/uuid"
)

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// NewID returns a short random entity id (10 characters of [0-9A-Za-z]). Ids
// contain no '.', so they are safe as NATS subject tokens.
func NewID() string {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return string(b[:])
}

// NewToken returns a random UUID (version 4), used for event ids, API session
// tokens and enrollment tokens.
func NewToken() string { return uuid.NewString() }

// IsToken reports whether s is a well-formed UUID.
func IsToken(s string) bool {
	_, err := uuid.Parse(s)
	return err == nil && len(s) == 36
}

var derivedNamespace = uuid.MustParse("6f1d8a52-4c1e-4b8e-9a57-0d4f2f1c9b11")

// DerivedID returns a UUID derived from its parts (UUID version 5). Events
// that several nodes may append for the same fact (a deadline reached, an
// idle API session expired) use it as their ID, so that the stream keeps one.
func DerivedID(parts ...string) string {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	return uuid.NewSHA1(derivedNamespace, b).String()
}
