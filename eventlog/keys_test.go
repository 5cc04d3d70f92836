package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-0809debe/posture/eventlog"
)

// TestKeysDestroyErases stores a value in the data key bucket of an
// embedded server, destroys it, and finds its bytes nowhere in the store's
// files.
func TestKeysDestroyErases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	l, err := eventlog.Open(ctx, eventlog.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	keys, err := l.OpenKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	val := []byte("k1.sealed-data-key-of-identity-42.XYZ")
	if _, err := keys.Get(ctx, "identity-42"); !errors.Is(err, eventlog.ErrKeyNotFound) {
		t.Fatalf("get before create: %v", err)
	}
	if err := keys.Create(ctx, "identity-42", val); err != nil {
		t.Fatal(err)
	}
	if err := keys.Create(ctx, "identity-42", []byte("other")); !errors.Is(err, eventlog.ErrKeyExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := keys.Get(ctx, "identity-42")
	if err != nil || !bytes.Equal(got, val) {
		t.Fatalf("get: %q, %v", got, err)
	}
	if !containsBytes(t, dir, val) {
		t.Fatal("the stored value is not in the store's files: the scan proves nothing")
	}
	if err := keys.Destroy(ctx, "identity-42"); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Get(ctx, "identity-42"); !errors.Is(err, eventlog.ErrKeyNotFound) {
		t.Fatalf("get after destroy: %v", err)
	}
	if err := keys.Destroy(ctx, "identity-42"); err != nil {
		t.Fatalf("destroy twice: %v", err)
	}
	if containsBytes(t, dir, val) {
		t.Fatal("the destroyed value is still in the store's files")
	}
	// The owner can get a new key.
	if err := keys.Create(ctx, "identity-42", []byte("new")); err != nil {
		t.Fatal(err)
	}
}

func containsBytes(t *testing.T, dir string, needle []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, needle) {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
