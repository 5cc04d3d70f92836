package projections

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
)

// TestQueriesFillTheHotCache: after a restart the hot cache is empty; a
// query caches the hot keys it found (the token's index entry, the API
// session), so that later requests read them from memory, but not a key it
// did not find.
func TestQueriesFillTheHotCache(t *testing.T) {
	fs := vfs.NewMem()
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	var events []posture.Event
	for i, p := range []posture.Payload{
		posture.Created[posture.Identity]{Entity: posture.Identity{ID: "ident00001", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}},
		posture.APISessionCreated{APISession: posture.APISession{ID: "sess000001", TokenHash: "hash1", IdentityID: "ident00001", CreatedAt: at, LastActivityAt: at}},
	} {
		e := posture.MustEvent(p, at)
		e.Seq = uint64(i + 1)
		events = append(events, e)
	}
	s, err := Open(Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(events); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(Options{Dir: "db", FS: fs}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tokenKey, sessionKey := uniqueKey(posture.KindAPISession, "token", "hash1"), entityKey(posture.KindAPISession, "sess000001")
	cached := func(key []byte) bool {
		_, ok := s.hot.load(key, false)
		return ok
	}
	if cached(tokenKey) || cached(sessionKey) {
		t.Fatal("a reopened store's cache holds the API session")
	}
	if got, err := s.APISessionByTokenHash("hash1"); err != nil || got.ID != "sess000001" {
		t.Fatalf("by token: %+v, %v", got, err)
	}
	if !cached(tokenKey) || !cached(sessionKey) {
		t.Error("the query did not cache the keys it read")
	}
	if _, err := s.APISessionByTokenHash("unknown"); !errors.Is(err, posture.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	if cached(uniqueKey(posture.KindAPISession, "token", "unknown")) {
		t.Error("the query cached a token that is not there")
	}
}

// TestFillSkipsValuesACommitMayHaveReplaced: a value read while a commit
// was in flight, or before a commit that ended since, is not cached; one
// read with no commit meanwhile is, and never replaces a cached entry.
func TestFillSkipsValuesACommitMayHaveReplaced(t *testing.T) {
	var h hotCache
	key := []byte("e/identities/x")
	old, fresh := &hotEntry{raw: []byte("old")}, &hotEntry{raw: []byte("fresh")}

	stamp, busy := h.stamp()
	h.begin()
	h.end(nil, true)
	h.fill(key, old, stamp)
	if _, ok := h.load(key, false); ok || busy {
		t.Fatal("cached a value read before a commit that ended since")
	}
	stamp, _ = h.stamp()
	h.begin()
	if _, busy := h.stamp(); !busy {
		t.Fatal("a commit in flight is not told")
	}
	h.fill(key, old, stamp)
	h.end(nil, false)
	if _, ok := h.load(key, false); ok {
		t.Fatal("cached a value read while a commit started")
	}
	stamp, _ = h.stamp()
	h.fill(key, fresh, stamp)
	h.fill(key, old, stamp)
	if e, ok := h.load(key, false); !ok || e != fresh {
		t.Fatalf("cache holds %+v, want the first value filled", e)
	}
}

// TestFilledCacheNeverKeepsAReplacedValue: queries that fill the cache
// while apply renames an identity batch after batch end, every time, with
// the last name cached.
func TestFilledCacheNeverKeepsAReplacedValue(t *testing.T) {
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	s, err := Open(Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	laptop := posture.Identity{ID: "ident00001", Name: "name-0", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	created := posture.MustEvent(posture.Created[posture.Identity]{Entity: laptop}, at)
	created.Seq = 1
	if err := s.Apply([]posture.Event{created}); err != nil {
		t.Fatal(err)
	}
	const renames = 300
	for round := range renames {
		// The cache loses the identity, as after a restart, and readers
		// fill it while the next rename commits.
		s.hot.mu.Lock()
		delete(s.hot.m, string(entityKey(posture.KindIdentity, laptop.ID)))
		s.hot.mu.Unlock()
		done := make(chan struct{})
		for range 3 {
			go func() {
				defer func() { done <- struct{}{} }()
				for range 20 {
					if _, err := Get[posture.Identity](s, laptop.ID); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		laptop.Name = fmt.Sprintf("name-%d", round+1)
		updated := posture.MustEvent(posture.Updated[posture.Identity]{Entity: laptop}, at)
		updated.Seq = uint64(round + 2)
		if err := s.Apply([]posture.Event{updated}); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			<-done
		}
		if got, err := Get[posture.Identity](s, laptop.ID); err != nil || got.Name != laptop.Name {
			t.Fatalf("round %d: read %q, %v after the rename to %q", round, got.Name, err, laptop.Name)
		}
	}
}

// TestEndedSessionsLeaveTheHotCache: logins and logouts one after another
// leave the hot cache as it was: the keys of an ended API session (its
// token's index entry, the session, its posture state) are not kept as
// absent entries.
func TestEndedSessionsLeaveTheHotCache(t *testing.T) {
	s, err := Open(Options{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	seq := uint64(0)
	apply := func(p posture.Payload) {
		t.Helper()
		seq++
		e := posture.MustEvent(p, at.Add(time.Duration(seq)*time.Second))
		e.Seq = seq
		if err := s.Apply([]posture.Event{e}); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int {
		s.hot.mu.RLock()
		defer s.hot.mu.RUnlock()
		return len(s.hot.m)
	}
	apply(posture.Created[posture.Identity]{Entity: posture.Identity{ID: "ident00001", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}})
	var before int
	for i := range 50 {
		id := fmt.Sprintf("sess%06d", i)
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: id, TokenHash: "hash-" + id, IdentityID: "ident00001", CreatedAt: at, LastActivityAt: at}})
		apply(posture.APISessionDeleted{ID: id, IdentityID: "ident00001", Reason: posture.EndLogout})
		if i == 0 {
			before = size()
		}
	}
	if after := size(); after != before {
		t.Fatalf("the hot cache held %d keys after one login and logout, %d after 50", before, after)
	}
}
