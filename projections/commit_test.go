package projections

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
)

// TestFailedCommitIsNeverSeen makes a batch's commit fail (the database is
// read-only) and shows that no reader saw its keys: not while the batch was
// built and about to commit, and not after the commit failed. Hot keys
// (identities) are the ones a cache could leak.
func TestFailedCommitIsNeverSeen(t *testing.T) {
	fs := vfs.NewMem()
	at := time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)
	laptop := posture.Identity{ID: "ident00001", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	created := posture.MustEvent(posture.Created[posture.Identity]{Entity: laptop}, at)
	created.Seq = 1

	s, err := Open(Options{Dir: "db", FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]posture.Event{created}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(Options{Dir: "db", FS: fs, readOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Warm the cache with the committed identity, as a query would.
	if _, err := Get[posture.Identity](s, laptop.ID); err != nil {
		t.Fatal(err)
	}

	renamed := laptop
	renamed.Name, renamed.UpdatedAt = "laptop-renamed", at.Add(time.Second)
	desktop := posture.Identity{ID: "ident00002", Name: "desktop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	updated := posture.MustEvent(posture.Updated[posture.Identity]{Entity: renamed}, at.Add(time.Second))
	updated.Seq = 2
	added := posture.MustEvent(posture.Created[posture.Identity]{Entity: desktop}, at.Add(time.Second))
	added.Seq = 3

	check := func(when string) {
		t.Helper()
		got, err := Get[posture.Identity](s, laptop.ID)
		if err != nil || got.Name != "laptop" {
			t.Errorf("%s: identity %s = %q, %v; want the committed name \"laptop\"", when, laptop.ID, got.Name, err)
		}
		if got, err := Get[posture.Identity](s, desktop.ID); !errors.Is(err, posture.ErrNotFound) {
			t.Errorf("%s: identity %s = %+v, %v; want not found", when, desktop.ID, got, err)
		}
		if _, err := ByName[posture.Identity](s, "desktop"); !errors.Is(err, posture.ErrNotFound) {
			t.Errorf("%s: identity named desktop: %v; want not found", when, err)
		}
		if err := s.view(func(r reader) error {
			var v posture.Identity
			found, err := getJSON(r, entityKey(posture.KindIdentity, desktop.ID), &v)
			if err != nil || found {
				t.Errorf("%s: view: identity %s found=%v, %v", when, desktop.ID, found, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	hooked := false
	s.beforeCommit = func() {
		hooked = true
		check("before the commit")
	}
	err = s.Apply([]posture.Event{updated, added})
	if !errors.Is(err, pebble.ErrReadOnly) {
		t.Fatalf("Apply on a read-only database = %v, want %v", err, pebble.ErrReadOnly)
	}
	if !hooked {
		t.Fatal("the batch never reached its commit")
	}
	check("after the failed commit")
	if got := s.Cursor(); got != 1 {
		t.Errorf("cursor = %d after a failed commit, want 1", got)
	}
	if !errors.Is(s.Err(), pebble.ErrReadOnly) {
		t.Errorf("Err() = %v, want the commit's error", s.Err())
	}
}
