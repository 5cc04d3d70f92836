package projections_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

var rewriteEvents = flag.Bool("rewrite-events", false, "regenerate the recorded event files in testdata")

// scenario builds a recorded event sequence with fixed ids and times.
type scenario struct {
	t      time.Time
	events []posture.Event
}

func (s *scenario) add(p posture.Payload, after time.Duration) {
	s.t = s.t.Add(after)
	e := posture.MustEvent(p, s.t)
	e.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", len(s.events)+1)
	e.Seq = uint64(len(s.events) + 1)
	s.events = append(s.events, e)
}

func (s *scenario) write(t *testing.T, name string) {
	f, err := os.Create(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range s.events {
		rec := struct {
			posture.Event
			Seq uint64 `json:"seq"`
		}{e, e.Seq}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%s\n", line)
	}
}

func TestGenerateFoundationEvents(t *testing.T) {
	if !*rewriteEvents {
		t.Skip("run with -rewrite-events to regenerate testdata/foundation.events.jsonl")
	}
	s := &scenario{t: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	at := func() time.Time { return s.t }
	s.add(posture.ConfigChanged{MFAGraceSeconds: 300, APISessionTimeoutSeconds: 1800}, 0)
	admin := posture.Identity{ID: "admin00001", Name: "admin", Type: posture.IdentityUser, IsAdmin: true, IsDefaultAdmin: true, RoleAttributes: []string{}, CreatedAt: at(), UpdatedAt: at()}
	s.add(posture.Created[posture.Identity]{Entity: admin}, 0)
	s.add(posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: "auth000001", IdentityID: admin.ID, Method: posture.MethodPassword, Username: "admin", PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2g", CreatedAt: at(), UpdatedAt: at()}}, 0)
	for i := 1; i <= 5; i++ {
		id := posture.Identity{ID: fmt.Sprintf("ident%05d", i), Name: fmt.Sprintf("laptop-%d", i), Type: posture.IdentityDevice, RoleAttributes: []string{"laptops", fmt.Sprintf("team-%d", i%2)}, Tags: posture.Tags{"owner": fmt.Sprintf("user%d", i)}, CreatedAt: s.t, UpdatedAt: s.t}
		s.add(posture.Created[posture.Identity]{Entity: id}, time.Second)
		s.add(posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: fmt.Sprintf("auth%06d", i+1), IdentityID: id.ID, Method: posture.MethodPassword, Username: fmt.Sprintf("user%d", i), PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA", CreatedAt: s.t, UpdatedAt: s.t}}, 0)
		sess := posture.APISession{ID: fmt.Sprintf("apis%06d", i), TokenHash: fmt.Sprintf("%064d", i), IdentityID: id.ID, AuthenticatorID: fmt.Sprintf("auth%06d", i+1), AuthMethod: "password", IPAddress: "127.0.0.1", ConfigTypes: []string{}, CreatedAt: s.t, LastActivityAt: s.t}
		s.add(posture.APISessionCreated{APISession: sess}, time.Second)
	}
	s.add(posture.APISessionTouched{ID: "apis000002", IdentityID: "ident00002", At: s.t.Add(time.Minute)}, time.Minute)
	renamed := posture.Identity{ID: "ident00003", Name: "laptop-3-renamed", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}, CreatedAt: time.Date(2026, 1, 2, 10, 0, 5, 0, time.UTC), UpdatedAt: s.t.Add(time.Second)}
	s.add(posture.Updated[posture.Identity]{Entity: renamed}, time.Second)
	s.add(posture.APISessionDeleted{ID: "apis000001", IdentityID: "ident00001", Reason: posture.EndLogout}, time.Second)
	s.add(posture.Deleted[posture.Identity]{ID: "ident00004"}, time.Second)
	s.add(posture.Deleted[posture.Authenticator]{ID: "auth000006"}, time.Second)
	s.add(posture.APISessionDeleted{ID: "apis000005", IdentityID: "ident00005", Reason: posture.EndExpired}, time.Second)
	s.write(t, "foundation.events.jsonl")
}
