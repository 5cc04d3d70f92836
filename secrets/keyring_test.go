package secrets_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/seed-0809debe/posture/secrets"
)

// memKeys is a KeyStore in memory.
type memKeys struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func newMemKeys() *memKeys { return &memKeys{keys: map[string][]byte{}} }

func (m *memKeys) GetKey(_ context.Context, owner string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[owner]
	if !ok {
		return nil, secrets.ErrNoKey
	}
	return k, nil
}

func (m *memKeys) CreateKey(_ context.Context, owner string, sealed []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[owner]; ok {
		return secrets.ErrKeyExists
	}
	m.keys[owner] = sealed
	return nil
}

func (m *memKeys) DestroyKey(_ context.Context, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, owner)
	return nil
}

func newKeyring(t *testing.T, kek []byte, keys secrets.KeyStore) *secrets.Keyring {
	t.Helper()
	k, err := secrets.New(secrets.Options{KEK: kek, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	ctx := context.Background()
	kek := bytes.Repeat([]byte{7}, secrets.KEKSize)
	keys := newMemKeys()
	k := newKeyring(t, kek, keys)
	plain := "JBSWY3DPEHPK3PXP"
	s, err := k.SealString(ctx, "identity-1", "mfa.secret", plain)
	if err != nil {
		t.Fatal(err)
	}
	if !secrets.IsSealed(s) || strings.Contains(s, plain) {
		t.Fatalf("sealed form %q", s)
	}
	s2, _ := k.SealString(ctx, "identity-1", "mfa.secret", plain)
	if s == s2 {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	// Another keyring on the same KEK and store (a second node) opens it.
	got, err := newKeyring(t, kek, keys).OpenString(ctx, "identity-1", "mfa.secret", s)
	if err != nil || got != plain {
		t.Fatalf("open: %q, %v", got, err)
	}
	// The value is bound to its owner and field.
	if _, err := k.Open(ctx, "identity-1", "session.token", s); err == nil {
		t.Fatal("opened under another field")
	}
	if _, err := k.SealString(ctx, "identity-2", "x", "y"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(ctx, "identity-2", "mfa.secret", s); err == nil {
		t.Fatal("opened for another owner")
	}
	// A tampered ciphertext does not open.
	b := []byte(s)
	b[len(b)-3] ^= 1
	if _, err := k.Open(ctx, "identity-1", "mfa.secret", string(b)); err == nil {
		t.Fatal("opened an altered value")
	}
	if _, err := k.Open(ctx, "identity-1", "mfa.secret", plain); !errors.Is(err, secrets.ErrNotSealed) {
		t.Fatalf("clear value: %v", err)
	}
	// The stored data key is sealed: it is not the raw key material and
	// names the KEK.
	stored, _ := keys.GetKey(ctx, "identity-1")
	if !strings.HasPrefix(string(stored), "k1."+secrets.KEKID(kek)+".") {
		t.Fatalf("stored key %q", stored)
	}
}

func TestDestroyShreds(t *testing.T) {
	ctx := context.Background()
	kek := bytes.Repeat([]byte{1}, secrets.KEKSize)
	keys := newMemKeys()
	k := newKeyring(t, kek, keys)
	s, err := k.SealString(ctx, "id", "f", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Destroy(ctx, "id"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(ctx, "id", "f", s); !errors.Is(err, secrets.ErrShredded) {
		t.Fatalf("open after destroy: %v", err)
	}
	// A new key for the same owner does not open the old values either.
	if _, err := k.SealString(ctx, "id", "f", "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Open(ctx, "id", "f", s); !errors.Is(err, secrets.ErrShredded) {
		t.Fatalf("open under a new key: %v", err)
	}
}

func TestWrongKEKIsNamed(t *testing.T) {
	ctx := context.Background()
	keys := newMemKeys()
	a := newKeyring(t, bytes.Repeat([]byte{1}, secrets.KEKSize), keys)
	s, err := a.SealString(ctx, "id", "f", "secret")
	if err != nil {
		t.Fatal(err)
	}
	b := newKeyring(t, bytes.Repeat([]byte{2}, secrets.KEKSize), keys)
	_, err = b.Open(ctx, "id", "f", s)
	if err == nil || !strings.Contains(err.Error(), "--secrets-key-file") {
		t.Fatalf("open with another KEK: %v", err)
	}
}

func TestLoadOrCreateKEK(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pki", secrets.KEKFile)
	kek, created, err := secrets.LoadOrCreateKEK(path)
	if err != nil || !created || len(kek) != secrets.KEKSize {
		t.Fatalf("create: %d bytes, created %v, %v", len(kek), created, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	again, created, err := secrets.LoadOrCreateKEK(path)
	if err != nil || created || !bytes.Equal(again, kek) {
		t.Fatalf("load: created %v, %v", created, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := secrets.LoadOrCreateKEK(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key file: %v", err)
	}
}

// BenchmarkSealOpen is the cost of sealing and opening a session token
// (about 600 bytes) with the owner's data key cached.
func BenchmarkSealOpen(b *testing.B) {
	ctx := context.Background()
	k, err := secrets.New(secrets.Options{KEK: bytes.Repeat([]byte{3}, secrets.KEKSize), Keys: newMemKeys()})
	if err != nil {
		b.Fatal(err)
	}
	plain := strings.Repeat("x", 600)
	for b.Loop() {
		s, err := k.SealString(ctx, "identity", "session.token", plain)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := k.OpenString(ctx, "identity", "session.token", s); err != nil {
			b.Fatal(err)
		}
	}
}

// A derived key is the same for the same KEK and purpose, and differs with
// either.
func TestDerivedKey(t *testing.T) {
	kek := bytes.Repeat([]byte{7}, secrets.KEKSize)
	a := newKeyring(t, kek, newMemKeys()).DerivedKey("names")
	if len(a) != 32 || !bytes.Equal(a, newKeyring(t, kek, newMemKeys()).DerivedKey("names")) {
		t.Fatalf("derived key %x is not stable", a)
	}
	if bytes.Equal(a, newKeyring(t, kek, newMemKeys()).DerivedKey("other")) ||
		bytes.Equal(a, newKeyring(t, bytes.Repeat([]byte{8}, secrets.KEKSize), newMemKeys()).DerivedKey("names")) {
		t.Fatal("a derived key does not depend on its purpose and KEK")
	}
}
