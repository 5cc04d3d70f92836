package projections

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	gojson "github.com/goccy/go-json"

	"github.com/seed-0809debe/posture"
)

// reader is what queries need: the DB, a snapshot or an indexed batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
	NewIter(o *pebble.IterOptions) (*pebble.Iterator, error)
}

// Tx is the write side of one apply batch. Reads see the batch's own writes.
type Tx struct {
	b      *pebble.Batch
	reader reader // the batch through the hot cache
	graph  *graph
	lean   bool // Options.Lean: no history, no fleet summary
	// dueWrites is the store's count of writes to the deadline index;
	// evicted its count of API sessions ended by MaxAPISessions.
	dueWrites, evicted *atomic.Uint64
	hot                *hotCache
	// staged holds the hot keys the batch wrote, published to the cache
	// only once the batch is committed.
	staged map[string]*hotEntry
	ranges *rangeCache
	event  posture.Event // the event being applied
	// transitions counts the transitions derived from the event.
	transitions int
	// derived, when set (Overlay), receives the derived transitions
	// instead of the outbox.
	derived *[]posture.Transition
	// pending holds the history entries of the event being applied.
	pending []identityHistory
	// pendingAt indexes pending by identity once an event has many
	// (pendingIndex).
	pendingAt map[string]int
	// enc and encoder encode history details, without HTML escaping (so
	// that ranges such as ">=1.2.7 <1.3.0" read as written); out is the
	// buffer history records are written into.
	enc     bytes.Buffer
	encoder *gojson.Encoder
	out     []byte
	// interrupt is the store's (SetInterrupt), asked between identities
	// when a change re-evaluates many.
	interrupt func() error
}

func newTx(b *pebble.Batch, s *Store) *Tx {
	tx := &Tx{b: b, graph: s.graph, lean: s.lean, dueWrites: &s.dueWrites, evicted: &s.evicted, hot: s.hot, ranges: s.ranges, staged: map[string]*hotEntry{},
		interrupt: s.interrupt}
	tx.reader = hotReader{hot: s.hot, r: b, staged: tx.staged, populate: true}
	tx.encoder = gojson.NewEncoder(&tx.enc)
	tx.encoder.SetEscapeHTML(false)
	return tx
}

// r reads through the hot cache, filling it.
func (tx *Tx) r() reader { return tx.reader }

// marshal and unmarshal are encoding/json's functions as go-json implements
// them: the same bytes, written about three times and read about twice as
// fast. Apply encodes a value or more for every event.
var marshal, unmarshal = gojson.Marshal, gojson.Unmarshal

func (tx *Tx) put(key []byte, v any) error {
	data, err := marshal(v)
	if err != nil {
		return fmt.Errorf("encode %s: %w", key, err)
	}
	// data is ours (the batch keeps a copy): the cache holds it.
	if tx.stage(key, data, v) {
		return nil
	}
	return tx.b.Set(key, data, nil)
}

func (tx *Tx) putRaw(key, value []byte) error {
	if tx.stage(key, bytes.Clone(value), nil) {
		return nil
	}
	return tx.b.Set(key, value, nil)
}

func (tx *Tx) del(key []byte) error {
	if tx.stage(key, nil, nil) {
		return nil
	}
	return tx.b.Delete(key, nil)
}

// stage records a hot key's new value (nil: deleted) and reports whether
// the key is hot. A hot key is written to the batch once, with its last
// value, when the batch is complete (writeStaged): the apply reads it from
// staged meanwhile, and many events of a batch rewrite the same few keys
// (an identity's posture, the fleet's counts). Readers see it once the
// batch is committed.
func (tx *Tx) stage(key, raw []byte, v any) bool {
	if !isHot(key) {
		return false
	}
	tx.staged[string(key)] = newHotEntry(raw, v)
	return true
}

// writeStaged writes the staged hot keys into the batch, before its commit.
func (tx *Tx) writeStaged() error {
	for k, e := range tx.staged {
		var err error
		if e.raw == nil {
			err = tx.b.Delete([]byte(k), nil)
		} else {
			err = tx.b.Set([]byte(k), e.raw, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// delPrefix removes every key with the prefix (never a hot key).
func (tx *Tx) delPrefix(prefix []byte) error {
	if isHot(prefix) {
		return fmt.Errorf("delPrefix %q: hot keys are deleted one by one", prefix)
	}
	return tx.b.DeleteRange(prefix, prefixEnd(prefix), nil)
}

// getJSON decodes the value at key into v; found is false when absent.
func getJSON(r reader, key []byte, v any) (found bool, err error) {
	if found, ok, err := getJSONHot(r, key, v); ok {
		return found, err
	}
	data, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer closer.Close()
	if err := unmarshal(data, v); err != nil {
		return false, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, nil
}

// getString reads a raw string value (index entries).
func getString(r reader, key []byte) (string, bool, error) {
	data, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer closer.Close()
	return string(data), true, nil
}

// scan calls fn for every key with the prefix, in key order, until fn
// returns false or an error.
func scan(r reader, prefix []byte, fn func(key, value []byte) (bool, error)) error {
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		more, err := fn(it.Key(), it.Value())
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	return it.Error()
}

// scanJSON decodes every value with the prefix as a T.
func scanJSON[T any](r reader, prefix []byte, fn func(T) bool) error {
	return scan(r, prefix, func(key, value []byte) (bool, error) {
		var v T
		if err := unmarshal(value, &v); err != nil {
			return false, fmt.Errorf("decode %s: %w", key, err)
		}
		return fn(v), nil
	})
}

// childIDs lists the ids of an entity's children of one kind.
func childIDs(r reader, kind posture.Kind, id string, child posture.Kind) ([]string, error) {
	prefix := relationPrefix(kind, id, child)
	var ids []string
	err := scan(r, prefix, func(key, _ []byte) (bool, error) {
		ids = append(ids, string(key[len(prefix):]))
		return true, nil
	})
	return ids, err
}
