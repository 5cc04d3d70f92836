package api_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// sessions knows the API sessions in known, and those in pending once the
// node caught up.
type sessions struct {
	known, pending map[string]posture.APISession
}

func (s *sessions) APISessionByTokenHash(hash string) (posture.APISession, error) {
	if v, ok := s.known[hash]; ok {
		return v, nil
	}
	return posture.APISession{}, posture.ErrNotFound
}

func (s *sessions) Identity(id string) (posture.Identity, error) {
	return posture.Identity{ID: id}, nil
}

// A token the node does not know is looked up again after catching up
// with the log: it may come from another node.
func TestUnknownTokenWaitsForTheLog(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	issued, unknown := posture.NewToken(), posture.NewToken()
	s := &sessions{known: map[string]posture.APISession{}, pending: map[string]posture.APISession{
		api.TokenHash(issued): {ID: "as1", IdentityID: "id1", LastActivityAt: now},
	}}
	catchUps := 0
	auth := &api.Auth{Sessions: s, Now: func() time.Time { return now }, Timeout: time.Hour,
		CatchUp: func(ctx context.Context) error {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("the wait is not bounded")
			}
			catchUps++
			for k, v := range s.pending {
				s.known[k] = v
			}
			return nil
		}}
	authenticate := func(token string) (*api.Principal, error) {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set(api.HeaderSession, token)
		return auth.Authenticate(echo.New().NewContext(req, httptest.NewRecorder()))
	}

	if p, err := authenticate(issued); err != nil || p.Session.ID != "as1" || catchUps != 1 {
		t.Fatalf("a token issued elsewhere: %+v %v (catch-ups %d)", p, err, catchUps)
	}
	if _, err := authenticate(issued); err != nil || catchUps != 1 {
		t.Fatalf("a known token: %v (catch-ups %d, want no more)", err, catchUps)
	}
	var e *posture.Error
	if _, err := authenticate(unknown); !errors.As(err, &e) || e.Code != posture.CodeUnauthorized || catchUps != 2 {
		t.Fatalf("an unknown token: %v (catch-ups %d)", err, catchUps)
	}
	// A node that cannot catch up answers with what it knows.
	auth.CatchUp = func(context.Context) error { return context.DeadlineExceeded }
	if _, err := authenticate(posture.NewToken()); !errors.As(err, &e) || e.Code != posture.CodeUnauthorized {
		t.Fatalf("an unknown token, the log unreachable: %v", err)
	}
}

// An activity record outlives its session only for the idle timeout: a
// session that ended where this node's Forget did not hear of it (another
// node's logout, the cap on an identity's sessions) does not leave it in
// memory for good.
func TestActivityRecordsArePruned(t *testing.T) {
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	token := posture.NewToken()
	s := &sessions{known: map[string]posture.APISession{api.TokenHash(token): {ID: "as1", IdentityID: "id1", LastActivityAt: now.Add(-5 * time.Minute)}}}
	auth := &api.Auth{Sessions: s, Now: func() time.Time { return now }, Timeout: 30 * time.Minute}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set(api.HeaderSession, token)
	if _, err := auth.Authenticate(echo.New().NewContext(req, httptest.NewRecorder())); err != nil || auth.Touched() != 1 {
		t.Fatalf("a request after 5 idle minutes: %v, %d activity records", err, auth.Touched())
	}
	if auth.PruneTouched(now.Add(29 * time.Minute)); auth.Touched() != 1 {
		t.Fatal("a record within the idle timeout was pruned")
	}
	if auth.PruneTouched(now.Add(31 * time.Minute)); auth.Touched() != 0 {
		t.Fatal("a record older than the idle timeout was kept")
	}
}
