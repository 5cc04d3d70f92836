package secrets

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KEKSize is the size of the key-encryption key in bytes (AES-256).
const KEKSize = 32

// KEKFile is the KEK's file name in the PKI directory, its default place.
const KEKFile = "secrets.key"

// LoadOrCreateKEK reads the key-encryption key from path (one line of
// standard base64) or, when the file does not exist, creates it with a new
// random key, mode 0600 (created reports that). A file that is readable by
// others than its owner, or that does not hold a 32-byte key, is an error.
func LoadOrCreateKEK(path string) (kek []byte, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kek, err = createKEK(path)
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: read that one.
			kek, _, err = LoadOrCreateKEK(path)
			return kek, false, err
		}
		return kek, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("secrets: read the key file: %w", err)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, false, fmt.Errorf("secrets: key file %s is accessible to others (mode %o): chmod 600 it", path, fi.Mode().Perm())
	}
	kek, err = base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data)))
	if err != nil || len(kek) != KEKSize {
		return nil, false, fmt.Errorf("secrets: key file %s must hold %d bytes in base64", path, KEKSize)
	}
	return kek, false, nil
}

func createKEK(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("secrets: create the key file: %w", err)
	}
	kek := make([]byte, KEKSize)
	if _, err := rand.Read(kek); err != nil {
		return nil, err
	}
	// Written to a temporary file and linked into place, so that a reader
	// never sees a half-written key.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".secrets-key-*")
	if err != nil {
		return nil, fmt.Errorf("secrets: create the key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(base64.StdEncoding.EncodeToString(kek) + "\n")
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("secrets: write the key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		return nil, fmt.Errorf("secrets: create the key file: %w", err)
	}
	return kek, nil
}

// KEKID names a key-encryption key without revealing it: 8 hex characters
// of a hash of it. Sealed data keys carry it, so that a node with another
// key says so instead of failing to decrypt.
func KEKID(kek []byte) string {
	sum := sha256.Sum256(append([]byte("postured kek id\x00"), kek...))
	return hex.EncodeToString(sum[:4])
}

// SealedBy is the id of the key-encryption key that sealed a stored data
// key (ok false when it is not one).
func SealedBy(sealed []byte) (kekID string, ok bool) {
	kekID, _, _, ok = splitSealedKey(sealed)
	return kekID, ok
}

// splitSealedKey reads a stored data key, "k1.<kek id>.<key id>.<base64
// ciphertext>".
func splitSealedKey(sealed []byte) (kekID, id, ct string, ok bool) {
	parts := strings.Split(string(sealed), ".")
	if len(parts) != 4 || parts[0] != "k1" {
		return "", "", "", false
	}
	return parts[1], parts[2], parts[3], true
}
