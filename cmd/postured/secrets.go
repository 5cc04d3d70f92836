package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/seed-0809debe/posture/eventlog"
	"github.com/seed-0809debe/posture/secrets"
)

// secretsKeyFile is the key-encryption key's file: --secrets-key-file, or
// secrets.key beside the CA.
func (s *serveCmd) secretsKeyFile() string {
	if s.SecretsKeyFile != "" {
		return s.SecretsKeyFile
	}
	return filepath.Join(s.pkiDir(), secrets.KEKFile)
}

// openSecrets loads (or creates) the key-encryption key and opens the
// keyring on the log's data key bucket.
func openSecrets(ctx context.Context, s *serveCmd, elog *eventlog.Log, log *slog.Logger) (*secrets.Keyring, error) {
	path := s.secretsKeyFile()
	keys, err := elog.OpenKeys(ctx)
	if err != nil {
		return nil, err
	}
	// A log whose values are sealed needs the key that sealed them: a new
	// one, or another, would open none of them (a key file left out of a
	// restore, a mistyped --secrets-key-file, another deployment's key, a
	// cluster node started without the shared one).
	sample, sealed, err := keys.Sample(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && sealed {
		return nil, fmt.Errorf("no secrets key at %s, but the log's data key bucket holds data keys sealed by one: "+
			"restore the secrets key there (the same file on every node of a cluster), or give it with --secrets-key-file; "+
			"values sealed under it cannot be read with a new key", path)
	}
	kek, created, err := secrets.LoadOrCreateKEK(path)
	if err != nil {
		return nil, err
	}
	if by, ok := secrets.SealedBy(sample); sealed && ok && by != secrets.KEKID(kek) {
		return nil, fmt.Errorf("the secrets key at %s (key %s) is not the one that sealed the log's data keys (key %s): "+
			"give that one with --secrets-key-file (the same file on every node of a cluster); with this one no sealed "+
			"value can be read", path, secrets.KEKID(kek), by)
	}
	if created {
		log.Info("created the secrets key (share it between the nodes of a cluster, like the CA; keep it out of backups of the log)", "path", path, "kekId", secrets.KEKID(kek))
	}
	k, err := secrets.New(secrets.Options{KEK: kek, Keys: keyStore{keys}})
	if err != nil {
		return nil, fmt.Errorf("secrets key %s: %w", path, err)
	}
	return k, nil
}

// keyStore adapts the log's data key bucket to secrets.KeyStore.
type keyStore struct{ k *eventlog.Keys }

func (s keyStore) GetKey(ctx context.Context, owner string) ([]byte, error) {
	v, err := s.k.Get(ctx, owner)
	if errors.Is(err, eventlog.ErrKeyNotFound) {
		return nil, secrets.ErrNoKey
	}
	return v, err
}

func (s keyStore) CreateKey(ctx context.Context, owner string, sealed []byte) error {
	err := s.k.Create(ctx, owner, sealed)
	if errors.Is(err, eventlog.ErrKeyExists) {
		return secrets.ErrKeyExists
	}
	return err
}

func (s keyStore) DestroyKey(ctx context.Context, owner string) error {
	return s.k.Destroy(ctx, owner)
}
