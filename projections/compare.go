package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Compare compares the store, key by key, with the projection a stopped
// node left in dir (opened read only), or a snapshot of it; of the
// transitions queue (not state, see Dump), only what the node's holds. It
// describes at most limit of the keys that differ and counts them all. A
// projection rebuilt from the log to the node's cursor holds the same bytes
// as the node's own (replays are deterministic), so any difference is a
// change made outside the log.
func (s *Store) Compare(dir string, limit int) (diffs []string, n int, err error) {
	db, err := openReadOnly(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("open the projection at %s: %w", dir, err)
	}
	defer db.Close()
	// A node of another build may have left another layout, which it
	// would rebuild when started: nothing to compare key by key.
	v, closer, err := db.Get(layoutKey)
	switch {
	case err == nil:
		other, size := uint64(0), len(v)
		if size == 8 {
			other = binary.BigEndian.Uint64(v)
		}
		closer.Close()
		if size == 8 && other != layout {
			return nil, 0, fmt.Errorf("the projection at %s has layout %d and this build writes layout %d: start the node once (it rebuilds its projection), stop it, then compare", dir, other, layout)
		}
		// A layout key of another size is a difference the walk reports.
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, 0, fmt.Errorf("read the layout of the projection at %s: %w", dir, err)
	}
	ours, err := s.db.NewIter(nil)
	if err != nil {
		return nil, 0, err
	}
	defer ours.Close()
	theirs, err := db.NewIter(nil)
	if err != nil {
		return nil, 0, err
	}
	defer theirs.Close()
	differ := func(format string, key []byte) {
		if n++; n <= limit {
			diffs = append(diffs, fmt.Sprintf(format, key))
		}
	}
	// The transitions outbox is a queue, which the node's relay empties as
	// it publishes: the node's holds a part of what the rebuild's holds,
	// never a transition of its own.
	queued := func(it *pebble.Iterator) bool { return bytes.HasPrefix(it.Key(), transitionPrefix) }
	a, b := ours.First(), theirs.First()
	for a || b {
		switch {
		case !b || a && bytes.Compare(ours.Key(), theirs.Key()) < 0:
			if !queued(ours) {
				differ("%q: missing", ours.Key())
			}
			a = ours.Next()
		case !a || bytes.Compare(ours.Key(), theirs.Key()) > 0:
			differ("%q: not derived from the log", theirs.Key())
			b = theirs.Next()
		default:
			if !bytes.Equal(ours.Value(), theirs.Value()) {
				differ("%q: another value than the log's", ours.Key())
			}
			a, b = ours.Next(), theirs.Next()
		}
	}
	if err := ours.Error(); err != nil {
		return diffs, n, err
	}
	return diffs, n, theirs.Error()
}
