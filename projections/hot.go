package projections

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// hotPrefixes are the keys read on every posture event, session and
// authenticated request: kept in memory as well as in Pebble.
var hotPrefixes = [][]byte{
	[]byte("p/i/"), []byte("p/s/"),
	[]byte("e/config/"), []byte("e/posture-checks/"), []byte("e/service-policies/"), []byte("e/services/"),
	[]byte("e/identities/"), []byte("e/api-sessions/"), []byte("u/api-sessions/"),
}

func isHot(key []byte) bool {
	for _, p := range hotPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// hotCache is a write-through copy of hot keys. Only the apply goroutine
// writes it: on its own writes (put, delete) and when it reads a hot key
// from its batch. Readers only look, so a reader never stores a value that
// apply has since replaced. A nil value records a deleted key.
type hotCache struct {
	m sync.Map // string -> []byte (nil: absent)
	// decoded holds the decoded form of hot values, each tagged with the
	// bytes it was decoded from: an entry is used only while those very
	// bytes are still the cached value, so a reader can never install a
	// stale decoding.
	decoded sync.Map // string -> decodedValue
}

type decodedValue struct {
	raw *byte
	typ reflect.Type
	v   reflect.Value
}

// decode fills v (a pointer) from raw, the cached bytes of a hot key,
// reusing an earlier decoding of the same bytes. Decoded values are shared:
// callers copy before they change a slice or map inside one.
func (h *hotCache) decode(key string, raw []byte, v any) error {
	rv := reflect.ValueOf(v)
	if len(raw) > 0 {
		if d, ok := h.decoded.Load(key); ok {
			dv := d.(decodedValue)
			if dv.raw == &raw[0] && dv.typ == rv.Type() {
				rv.Elem().Set(dv.v)
				return nil
			}
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	if len(raw) > 0 {
		h.decoded.Store(key, decodedValue{raw: &raw[0], typ: rv.Type(), v: reflect.ValueOf(rv.Elem().Interface())})
	}
	return nil
}

func (h *hotCache) store(key, value []byte) {
	if isHot(key) {
		h.m.Store(string(key), value)
	}
}

func (h *hotCache) forget(key []byte) {
	if isHot(key) {
		h.m.Store(string(key), []byte(nil))
	}
}

// hotReader reads hot keys from the cache before the underlying reader;
// with populate (the apply path only) it caches what it had to read.
type hotReader struct {
	hot      *hotCache
	r        reader
	populate bool
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func (h hotReader) Get(key []byte) ([]byte, io.Closer, error) {
	if !isHot(key) {
		return h.r.Get(key)
	}
	if v, ok := h.hot.m.Load(string(key)); ok {
		if v.([]byte) == nil {
			return nil, nil, pebble.ErrNotFound
		}
		return v.([]byte), nopCloser{}, nil
	}
	v, closer, err := h.r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		if h.populate {
			h.hot.m.Store(string(key), []byte(nil))
		}
		return nil, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	cp := bytes.Clone(v)
	closer.Close()
	if h.populate {
		h.hot.m.Store(string(key), cp)
	}
	return cp, nopCloser{}, nil
}

func (h hotReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) { return h.r.NewIter(o) }

// storeDecoded records the value a hot key was just written from, so that
// the next read need not decode the bytes again. v is the value (not a
// pointer); the writer does not change it afterwards.
func (h *hotCache) storeDecoded(key, raw []byte, v any) {
	if !isHot(key) || len(raw) == 0 {
		return
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	h.decoded.Store(string(key), decodedValue{raw: &raw[0], typ: reflect.PointerTo(rv.Type()), v: rv})
}

// getJSONHot decodes a hot key through the decoded cache. It reports false
// when the key is not hot or the reader is not a hotReader.
func getJSONHot(r reader, key []byte, v any) (found, ok bool, err error) {
	h, isHR := r.(hotReader)
	if !isHR || !isHot(key) {
		return false, false, nil
	}
	data, closer, err := h.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, true, nil
	}
	if err != nil {
		return false, true, err
	}
	closer.Close()
	if err := h.hot.decode(string(key), data, v); err != nil {
		return false, true, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, true, nil
}
