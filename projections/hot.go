package projections

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// hotPrefixes are the keys read on every posture event, session and
// authenticated request, and the fleet's counts (a few keys, read and
// rewritten at every changed verdict): kept in memory as well as in Pebble.
var hotPrefixes = [][]byte{
	[]byte("p/i/"), []byte("p/s/"), []byte("p/c/"),
	[]byte("e/config/"), []byte("e/posture-checks/"), []byte("e/service-policies/"), []byte("e/services/"),
	[]byte("e/identities/"), []byte("e/api-sessions/"), []byte("u/api-sessions/"),
	[]byte("f/n/"),
}

func isHot(key []byte) bool {
	for _, p := range hotPrefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// hotCache is a copy of the committed values of hot keys. Only the apply
// goroutine replaces values: it stages its own writes (put, delete) in the
// Tx and publishes them under the write lock together with the batch's
// commit, so a reader never sees a key of a batch that is not committed;
// and it caches a hot key it read from the store and did not write. Other
// readers add a key they found only when it is not cached and no commit ran
// while they read (fill), so none stores a value that apply has since
// replaced.
//
// A commit is bracketed by begin and end, which take the write lock for a
// moment each; a reader that holds the read lock while no commit is in
// flight sees the cache and the database at one cursor (Store.view).
type hotCache struct {
	mu       sync.RWMutex
	m        map[string]*hotEntry
	inflight bool   // a batch is being committed
	commits  uint64 // commits ended so far
}

// begin marks a commit in flight.
func (h *hotCache) begin() {
	h.mu.Lock()
	h.inflight = true
	h.mu.Unlock()
}

// end ends the commit in flight, publishing the batch's staged entries if
// it was committed.
func (h *hotCache) end(staged map[string]*hotEntry, committed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if committed {
		h.publishLocked(staged)
	}
	h.inflight = false
	h.commits++
}

// hotEntry is a hot key's value (raw nil: the key is absent) and, once
// someone decoded it, its decoded form. Each write of the key makes a new
// entry, so a decoded form always belongs to the bytes beside it.
type hotEntry struct {
	raw     []byte
	decoded atomic.Pointer[decodedValue]
}

type decodedValue struct {
	typ reflect.Type // the pointer type decoded into
	v   reflect.Value
}

// load returns a key's entry; locked says the caller holds the read lock.
func (h *hotCache) load(key []byte, locked bool) (*hotEntry, bool) {
	if !locked {
		h.mu.RLock()
		defer h.mu.RUnlock()
	}
	e, ok := h.m[string(key)]
	return e, ok
}

// fill caches what a reader found in the store, unless a commit started
// since the reader saw commits and no commit in flight (stamp): the value
// may be older than the store's then, and apply alone replaces entries. An
// entry already cached stays.
func (h *hotCache) fill(key []byte, e *hotEntry, stamp uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight || h.commits != stamp {
		return
	}
	if h.m == nil {
		h.m = map[string]*hotEntry{}
	}
	if _, ok := h.m[string(key)]; !ok {
		h.m[string(key)] = e
	}
}

// stamp is the count of commits ended, and whether one is in flight.
func (h *hotCache) stamp() (uint64, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.commits, h.inflight
}

func (h *hotCache) store(key []byte, e *hotEntry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]*hotEntry{}
	}
	h.m[string(key)] = e
}

// publishLocked makes staged entries visible; the caller holds the write
// lock and has committed the batch they belong to. A deleted key leaves
// the cache (the store has the delete): the keys of ended API sessions
// would otherwise stay in memory, one login after another.
func (h *hotCache) publishLocked(staged map[string]*hotEntry) {
	if len(staged) == 0 {
		return
	}
	if h.m == nil {
		h.m = make(map[string]*hotEntry, len(staged))
	}
	for k, e := range staged {
		if e.raw == nil {
			delete(h.m, k)
		} else {
			h.m[k] = e
		}
	}
}

// newHotEntry is a hot key's new value (nil: deleted) and, when v is not
// nil, the value it was encoded from (not a pointer; the writer does not
// change it afterwards).
func newHotEntry(raw []byte, v any) *hotEntry {
	e := &hotEntry{raw: raw}
	if v != nil && raw != nil {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Pointer {
			rv = rv.Elem()
		}
		e.decoded.Store(&decodedValue{typ: reflect.PointerTo(rv.Type()), v: rv})
	}
	return e
}

// decode fills v (a pointer) from the entry, reusing an earlier decoding.
// Decoded values are shared: callers copy before they change a slice or map
// inside one.
func (e *hotEntry) decode(v any) error {
	rv := reflect.ValueOf(v)
	if d := e.decoded.Load(); d != nil && d.typ == rv.Type() {
		rv.Elem().Set(d.v)
		return nil
	}
	if err := unmarshal(e.raw, v); err != nil {
		return err
	}
	e.decoded.Store(&decodedValue{typ: rv.Type(), v: reflect.ValueOf(rv.Elem().Interface())})
	return nil
}

// hotReader reads hot keys from the cache before the underlying reader.
// The apply path sets staged (its batch's uncommitted hot writes, read
// first) and populate (cache what it had to read: a key it did not write
// reads the committed value). A view sets locked: it holds the cache's read
// lock for its whole length. Other readers (the API's) fill the cache with
// the values they find when no commit ran meanwhile (hotCache.fill), so
// that after a restart the keys of every request are read from Pebble once,
// not at every request; a key they do not find is not cached (anyone may
// ask for any token).
type hotReader struct {
	hot      *hotCache
	r        reader
	staged   map[string]*hotEntry
	populate bool
	locked   bool
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func (h hotReader) Get(key []byte) ([]byte, io.Closer, error) {
	if !isHot(key) {
		return h.r.Get(key)
	}
	e, err := h.entry(key)
	if err != nil {
		return nil, nil, err
	}
	if e.raw == nil {
		return nil, nil, pebble.ErrNotFound
	}
	return e.raw, nopCloser{}, nil
}

// entry is the cache entry of a hot key, read from the underlying reader
// when the cache does not hold it (and cached, with populate).
func (h hotReader) entry(key []byte) (*hotEntry, error) {
	if e, ok := h.staged[string(key)]; ok {
		return e, nil
	}
	if e, ok := h.hot.load(key, h.locked); ok {
		return e, nil
	}
	fill := !h.populate && !h.locked
	var stamp uint64
	if fill {
		var busy bool
		stamp, busy = h.hot.stamp()
		fill = !busy
	}
	v, closer, err := h.r.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		v = nil
	case err != nil:
		return nil, err
	default:
		v = bytes.Clone(v)
		closer.Close()
	}
	e := &hotEntry{raw: v}
	switch {
	case v == nil: // absent keys are not cached: anyone may ask for any
	case h.populate:
		h.hot.store(key, e)
	case fill:
		h.hot.fill(key, e, stamp)
	}
	return e, nil
}

func (h hotReader) NewIter(o *pebble.IterOptions) (*pebble.Iterator, error) { return h.r.NewIter(o) }

// getJSONHot decodes a hot key through the decoded cache. It reports false
// when the key is not hot or the reader is not a hotReader.
func getJSONHot(r reader, key []byte, v any) (found, ok bool, err error) {
	h, isHR := r.(hotReader)
	if !isHR || !isHot(key) {
		return false, false, nil
	}
	e, err := h.entry(key)
	if err != nil {
		return false, true, err
	}
	if e.raw == nil {
		return false, true, nil
	}
	if err := e.decode(v); err != nil {
		return false, true, fmt.Errorf("decode %s: %w", key, err)
	}
	return true, true, nil
}
