package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/seed-0809debe/posture"
)

// Password hashing parameters (argon2id, OWASP's minimum recommendation).
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
)

// passwordSlots bounds the argon2id computations running at once. Each one
// holds argonMemory (19 MiB) while it runs: without a bound, failed logins
// sent at once (every address may fail 100 times before it is slowed down)
// held gigabytes, and the node's other requests waited behind them.
var passwordSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

// passwordWait is how long a password check or hash waits for a slot; past
// it the request is answered 429.
var passwordWait = 3 * time.Second

// withPasswordSlot runs f in a slot of passwordSlots, or answers 429
// SERVER_TOO_MANY_REQUESTS when none frees up within passwordWait (or the
// request ends first).
func withPasswordSlot(ctx context.Context, f func()) error {
	select {
	case passwordSlots <- struct{}{}:
	default:
		wait := time.NewTimer(passwordWait)
		defer wait.Stop()
		select {
		case passwordSlots <- struct{}{}:
		case <-wait.C:
			return errPasswordsBusy
		case <-ctx.Done():
			return errPasswordsBusy
		}
	}
	defer func() { <-passwordSlots }()
	f()
	return nil
}

var errPasswordsBusy = &posture.Error{Code: posture.CodeTooManyRequests, RetryAfter: time.Second,
	Message: "too many passwords are being checked at once; try again shortly"}

// HashPassword returns an argon2id hash in PHC string form. It is computed at
// the edge so that the log only ever holds the hash. It waits for a slot of
// passwordSlots (429 when none frees up).
func HashPassword(ctx context.Context, password string) (string, error) {
	var hash string
	err := withPasswordSlot(ctx, func() { hash = hashPassword(password) })
	return hash, err
}

func hashPassword(password string) string {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		panic(err)
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, enc.EncodeToString(salt), enc.EncodeToString(key))
}

// dummyHash is checked against when a username is unknown, so that a failed
// login takes the same time whether or not the user exists.
var dummyHash = hashPassword("postured-dummy-password")

// CheckPassword reports whether password matches the PHC hash. An empty or
// malformed hash is checked against a dummy hash (same cost) and fails. It
// waits for a slot of passwordSlots (429 when none frees up).
func CheckPassword(ctx context.Context, hash, password string) (bool, error) {
	var ok bool
	err := withPasswordSlot(ctx, func() { ok = checkPassword(hash, password) })
	return ok, err
}

func checkPassword(hash, password string) bool {
	ok := true
	if hash == "" {
		hash, ok = dummyHash, false
	}
	var v, m, t, p int
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		parts, ok = strings.Split(dummyHash, "$"), false
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil {
		return false
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false
	}
	got := argon2.IDKey([]byte(password), salt, uint32(t), uint32(m), uint8(p), uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1 && ok
}

// SealedPasswordHash hashes a password (HashPassword) and seals the hash
// for its identity: the form an authenticator keeps, in the log too.
func SealedPasswordHash(ctx context.Context, s Secrets, identityID, password string) (string, error) {
	hash, err := HashPassword(ctx, password)
	if err != nil {
		return "", err
	}
	return Seal(ctx, s, identityID, posture.FieldPasswordHash, hash)
}

// PasswordHashOf is an authenticator's password hash: its sealed form
// opened, or the clear one of a log written before hashes were sealed (""
// for none, which CheckPassword takes as a wrong password).
func PasswordHashOf(ctx context.Context, s Secrets, au posture.Authenticator) (string, error) {
	return Reveal(ctx, s, au.IdentityID, posture.FieldPasswordHash, au.PasswordHashSealed, au.PasswordHash)
}
