package pki

import (
	"crypto/rand"
	"io"
	"time"
)

// Options configure a CA or a Signer. The zero value is ready to use.
type Options struct {
	// Now is the clock. It decides NotBefore/NotAfter of issued certificates,
	// when the server certificate is due for renewal, and the time against
	// which certificates and JWTs are checked. Default time.Now.
	Now func() time.Time

	// Rand is the source of serial numbers, CA name suffixes, JWT ids, and the
	// randomness handed to signing and key generation. Default crypto/rand.
	// Note: since Go 1.26 the standard library ignores a custom reader for key
	// generation and signatures (GODEBUG=cryptocustomrand=1 restores it), so a
	// deterministic Rand makes serials and ids repeatable, not keys.
	Rand io.Reader

	// CAName is the common name of a CA created by Open. Default
	// "postured CA " followed by 8 random hex digits. An existing CA keeps
	// its name.
	CAName string
}

func (o Options) withDefaults() Options {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Rand == nil {
		o.Rand = rand.Reader
	}
	return o
}
