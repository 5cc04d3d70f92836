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
