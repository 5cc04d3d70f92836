package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Errors of the key store and of opening.
var (
	// ErrNoKey is a KeyStore's answer for an owner without a data key.
	ErrNoKey = errors.New("secrets: no data key")
	// ErrKeyExists is a KeyStore's answer to Create when the owner has a
	// key already.
	ErrKeyExists = errors.New("secrets: data key exists")
	// ErrShredded means that the data key a value was sealed under was
	// destroyed (its owner was deleted): the value cannot be read by anyone.
	ErrShredded = errors.New("secrets: the data key of this value was destroyed")
	// ErrNotSealed is returned by Open for a string that is not a sealed
	// value.
	ErrNotSealed = errors.New("secrets: not a sealed value")
)

// KeyStore keeps the owners' data keys, sealed by the KEK, outside the
// event stream (eventlog's key bucket implements it). Values are opaque to
// it.
type KeyStore interface {
	// GetKey returns the owner's sealed data key, or ErrNoKey.
	GetKey(ctx context.Context, owner string) ([]byte, error)
	// CreateKey stores the owner's sealed data key unless the owner has
	// one (ErrKeyExists).
	CreateKey(ctx context.Context, owner string, sealed []byte) error
	// DestroyKey erases the owner's data key, so that it cannot be read
	// back from the store's files. Destroying a missing key is no error.
	DestroyKey(ctx context.Context, owner string) error
}

// Options configure a Keyring.
type Options struct {
	// KEK is the key-encryption key (KEKSize bytes).
	KEK []byte
	// Keys stores the sealed data keys.
	Keys KeyStore
	// CacheTTL is how long an opened data key is kept in memory (default
	// one minute). Another node's Destroy takes effect here at the latest
	// after it.
	CacheTTL time.Duration
	// Now is the clock of the cache (default time.Now).
	Now func() time.Time
}

// Keyring seals and opens values under per-owner data keys. It is safe for
// concurrent use.
type Keyring struct {
	kek   cipher.AEAD
	kekID string
	names []byte // keys DerivedKey
	keys  KeyStore
	ttl   time.Duration
	now   func() time.Time

	mu    sync.Mutex
	cache map[string]cachedKey
}

type cachedKey struct {
	key     dataKey
	expires time.Time
}

// dataKey is an owner's opened data key.
type dataKey struct {
	id   string // 8 hex characters, random, in every value sealed under it
	aead cipher.AEAD
}

// New returns a Keyring.
func New(opts Options) (*Keyring, error) {
	if len(opts.KEK) != KEKSize {
		return nil, fmt.Errorf("secrets: the KEK must be %d bytes, not %d", KEKSize, len(opts.KEK))
	}
	if opts.Keys == nil {
		return nil, errors.New("secrets: a key store is required")
	}
	kek, err := newAEAD(opts.KEK)
	if err != nil {
		return nil, err
	}
	names, err := hkdf.Key(sha256.New, opts.KEK, nil, "postured derived keys", 32)
	if err != nil {
		return nil, err
	}
	k := &Keyring{kek: kek, kekID: KEKID(opts.KEK), names: names, keys: opts.Keys, ttl: opts.CacheTTL, now: opts.Now, cache: map[string]cachedKey{}}
	if k.ttl <= 0 {
		k.ttl = time.Minute
	}
	if k.now == nil {
		k.now = time.Now
	}
	return k, nil
}

// DerivedKey is a 32-byte key for a purpose, derived from the KEK (HKDF,
// then HMAC-SHA256 of the purpose): the same on every node that shares the
// KEK, and unknown to anyone without it. It keys what must be neither
// guessed nor kept anywhere, such as the names of the webhooks' consumers.
func (k *Keyring) DerivedKey(purpose string) []byte {
	mac := hmac.New(sha256.New, k.names)
	mac.Write([]byte(purpose))
	return mac.Sum(nil)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sealedPrefix starts every sealed value (version 1).
const sealedPrefix = "s1."

// IsSealed reports whether s has the form of a sealed value.
func IsSealed(s string) bool { return strings.HasPrefix(s, sealedPrefix) }

// Seal encrypts plain for an owner's field under the owner's data key
// (created on first use) and returns it in the sealed form. The field name
// is bound to the ciphertext: Open must be given the same owner and field.
func (k *Keyring) Seal(ctx context.Context, owner, field string, plain []byte) (string, error) {
	dk, err := k.dataKey(ctx, owner, true)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, dk.aead.NonceSize(), dk.aead.NonceSize()+len(plain)+dk.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := dk.aead.Seal(nonce, nonce, plain, fieldAD(owner, field, dk.id))
	return sealedPrefix + dk.id + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// SealString is Seal of a string.
func (k *Keyring) SealString(ctx context.Context, owner, field, plain string) (string, error) {
	return k.Seal(ctx, owner, field, []byte(plain))
}

// Open decrypts a value Seal made for the owner's field. It is ErrShredded
// when the owner's data key was destroyed (or replaced since).
func (k *Keyring) Open(ctx context.Context, owner, field, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, ErrNotSealed
	}
	id, body, ok := strings.Cut(rest, ".")
	if !ok || len(id) != 8 {
		return nil, fmt.Errorf("%w: malformed", ErrNotSealed)
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotSealed, err)
	}
	dk, err := k.dataKey(ctx, owner, false)
	if errors.Is(err, ErrNoKey) {
		return nil, fmt.Errorf("%s of %s: %w", field, owner, ErrShredded)
	}
	if err != nil {
		return nil, err
	}
	if dk.id != id {
		return nil, fmt.Errorf("%s of %s: sealed under data key %s, the owner's key is now %s: %w", field, owner, id, dk.id, ErrShredded)
	}
	n := dk.aead.NonceSize()
	if len(raw) < n+dk.aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrNotSealed)
	}
	plain, err := dk.aead.Open(nil, raw[:n], raw[n:], fieldAD(owner, field, id))
	if err != nil {
		return nil, fmt.Errorf("secrets: %s of %s does not open (altered, or sealed for another field): %w", field, owner, err)
	}
	return plain, nil
}

// OpenString is Open of a string.
func (k *Keyring) OpenString(ctx context.Context, owner, field, sealed string) (string, error) {
	b, err := k.Open(ctx, owner, field, sealed)
	return string(b), err
}

// Destroy erases the owner's data key: every value sealed under it, in
// every copy of the log and every backup, can no longer be opened.
func (k *Keyring) Destroy(ctx context.Context, owner string) error {
	k.mu.Lock()
	delete(k.cache, owner)
	k.mu.Unlock()
	if err := k.keys.DestroyKey(ctx, owner); err != nil {
		return fmt.Errorf("secrets: destroy the data key of %s: %w", owner, err)
	}
	return nil
}

// dataKey returns the owner's data key, from the cache or the store,
// creating it when create is set and there is none (ErrNoKey otherwise).
func (k *Keyring) dataKey(ctx context.Context, owner string, create bool) (dataKey, error) {
	if owner == "" {
		return dataKey{}, errors.New("secrets: a sealed value needs an owner")
	}
	now := k.now()
	k.mu.Lock()
	c, ok := k.cache[owner]
	k.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.key, nil
	}
	sealed, err := k.keys.GetKey(ctx, owner)
	if errors.Is(err, ErrNoKey) && create {
		sealed, err = k.createKey(ctx, owner)
	}
	if err != nil {
		if errors.Is(err, ErrNoKey) {
			return dataKey{}, err
		}
		return dataKey{}, fmt.Errorf("secrets: data key of %s: %w", owner, err)
	}
	dk, err := k.openKey(owner, sealed)
	if err != nil {
		return dataKey{}, err
	}
	k.mu.Lock()
	k.cache[owner] = cachedKey{key: dk, expires: now.Add(k.ttl)}
	k.mu.Unlock()
	return dk, nil
}

// createKey makes and stores a new data key for the owner; when another
// node stored one first, that one is used.
func (k *Keyring) createKey(ctx context.Context, owner string) ([]byte, error) {
	raw := make([]byte, 32)
	idb := make([]byte, 4)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	if _, err := rand.Read(idb); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(idb)
	nonce := make([]byte, k.kek.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	ct := k.kek.Seal(nonce, nonce, raw, keyAD(owner, id))
	sealed := []byte("k1." + k.kekID + "." + id + "." + base64.RawURLEncoding.EncodeToString(ct))
	err := k.keys.CreateKey(ctx, owner, sealed)
	if errors.Is(err, ErrKeyExists) {
		return k.keys.GetKey(ctx, owner)
	}
	return sealed, err
}

// openKey decrypts a stored data key with the KEK.
func (k *Keyring) openKey(owner string, sealed []byte) (dataKey, error) {
	kekID, id, body, ok := splitSealedKey(sealed)
	if !ok {
		return dataKey{}, fmt.Errorf("secrets: the stored data key of %s is malformed", owner)
	}
	if kekID != k.kekID {
		return dataKey{}, fmt.Errorf("secrets: the data key of %s is sealed by key-encryption key %s, this node has %s (do all nodes share one --secrets-key-file?)", owner, kekID, k.kekID)
	}
	ct, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || len(ct) < k.kek.NonceSize() {
		return dataKey{}, fmt.Errorf("secrets: the stored data key of %s is malformed", owner)
	}
	n := k.kek.NonceSize()
	raw, err := k.kek.Open(nil, ct[:n], ct[n:], keyAD(owner, id))
	if err != nil {
		return dataKey{}, fmt.Errorf("secrets: the stored data key of %s does not open: %w", owner, err)
	}
	aead, err := newAEAD(raw)
	if err != nil {
		return dataKey{}, err
	}
	return dataKey{id: id, aead: aead}, nil
}

// fieldAD is the additional data of a sealed field: it binds the
// ciphertext to its owner, its field and its key.
func fieldAD(owner, field, keyID string) []byte {
	return []byte("postured sealed field v1\x00" + owner + "\x00" + field + "\x00" + keyID)
}

// keyAD is the additional data of a data key sealed by the KEK.
func keyAD(owner, keyID string) []byte {
	return []byte("postured data key v1\x00" + owner + "\x00" + keyID)
}
