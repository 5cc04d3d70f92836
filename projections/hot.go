package projections

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// hotPrefixes are the keys read on every posture event and every
// authenticated request: kept in memory as well as in Pebble.
var hotPrefixes = [][]byte{
	[]byte("p/i/"), []byte("p/s/"),
	[]byte("e/config/"), []byte("e/posture-checks/"), []byte("e/service-policies/"),
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
