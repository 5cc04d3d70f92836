package eventlog

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// keysBucket is the JetStream key-value bucket of the owners' data keys
// (sealed by the key-encryption key, which it never holds). It is a stream
// of its own, outside the event stream, so that a key can be destroyed
// while the events stay: every copy of the log keeps only ciphertext that
// nobody can open (crypto-shredding).
const keysBucket = "postured_keys"

// Errors of Keys.
var (
	ErrKeyNotFound = errors.New("eventlog: no such key")
	ErrKeyExists   = errors.New("eventlog: key exists")
)

// Keys is the data key bucket: opaque values by owner id, one version each.
type Keys struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
}

// OpenKeys opens (creating on first use) the data key bucket: file
// storage, history 1, as many replicas as the event stream.
func (l *Log) OpenKeys(ctx context.Context) (*Keys, error) {
	replicas := 1
	if info := l.stream.CachedInfo(); info != nil && info.Config.Replicas > 0 {
		replicas = info.Config.Replicas
	}
	// The bucket's stream is made here rather than by the key-value API,
	// which denies message deletes: Destroy needs them to overwrite a key
	// (a purge alone leaves its bytes in the files until they are
	// compacted), and a stream's deny-delete cannot be lifted later. Nor
	// does it allow rollups: a message with a rollup header of "all",
	// which anyone who may publish to the bucket could send, would
	// erase every key at once (the permissions deny the purge that does
	// the same). Destroy leaves a delete marker, which MaxMsgsPerSubject
	// makes the key's only message, without one.
	cfg := jetstream.StreamConfig{
		Name:              "KV_" + keysBucket,
		Description:       "postured data keys, sealed by the key-encryption key",
		Subjects:          []string{"$KV." + keysBucket + ".>"},
		MaxMsgsPerSubject: 1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          replicas,
		AllowRollup:       false,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
	}
	var (
		stream jetstream.Stream
		kv     jetstream.KeyValue
	)
	err := retry(ctx, func(ctx context.Context) error {
		var err error
		if stream, err = l.ensureStream(ctx, cfg); err != nil {
			return err
		}
		kv, err = l.js.KeyValue(ctx, keysBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("eventlog: data key bucket: %w", err)
	}
	return &Keys{kv: kv, stream: stream}, nil
}

// Sample returns one of the values the bucket holds (found false when it
// holds none, destroyed ones aside): what a node checks its key against.
func (k *Keys) Sample(ctx context.Context) (val []byte, found bool, err error) {
	lister, err := k.kv.ListKeys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eventlog: data key bucket: %w", err)
	}
	defer lister.Stop()
	for name := range lister.Keys() {
		owner, err := base64.RawURLEncoding.DecodeString(name)
		if err != nil {
			continue
		}
		val, err := k.Get(ctx, string(owner))
		if errors.Is(err, ErrKeyNotFound) {
			continue // destroyed meanwhile
		}
		return val, err == nil, err
	}
	return nil, false, nil
}

// keyName is the bucket key of an owner: ids may hold characters a
// key-value key may not, so it is encoded.
func keyName(owner string) string { return base64.RawURLEncoding.EncodeToString([]byte(owner)) }

// Get returns the owner's value, or ErrKeyNotFound.
func (k *Keys) Get(ctx context.Context, owner string) ([]byte, error) {
	var val []byte
	err := retry(ctx, func(ctx context.Context) error {
		e, err := k.kv.Get(ctx, keyName(owner))
		if err != nil {
			return err
		}
		val = e.Value()
		return nil
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrKeyNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: read the data key of %s: %w", owner, err)
	}
	return val, nil
}

// Create stores the owner's value unless it has one (ErrKeyExists).
func (k *Keys) Create(ctx context.Context, owner string, val []byte) error {
	err := retry(ctx, func(ctx context.Context) error {
		_, err := k.kv.Create(ctx, keyName(owner), val)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("eventlog: store the data key of %s: %w", owner, err)
	}
	return nil
}

// Destroy erases the owner's value: its message is overwritten on every
// replica (JetStream's secure delete), then the key is marked deleted. A
// missing key is no error.
func (k *Keys) Destroy(ctx context.Context, owner string) error {
	name := keyName(owner)
	err := retry(ctx, func(ctx context.Context) error {
		e, err := k.kv.Get(ctx, name)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		err = k.stream.SecureDeleteMsg(ctx, e.Revision())
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
		return k.kv.Delete(ctx, name)
	})
	if err != nil {
		return fmt.Errorf("eventlog: destroy the data key of %s: %w", owner, err)
	}
	return nil
}
