package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/golang-jwt/jwt/v5"
	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

type jwtRegistered = jwt.RegisteredClaims

type sessionInput struct {
	ServiceID string       `json:"serviceId"`
	Type      string       `json:"type"`
	Tags      posture.Tags `json:"tags"`
}

// sessionView is sessionDetail.
type sessionView struct {
	ID           string           `json:"id"`
	Token        string           `json:"token"`
	Type         string           `json:"type"`
	ServiceID    string           `json:"serviceId"`
	Service      api.EntityRef    `json:"service"`
	APISessionID string           `json:"apiSessionId"`
	APISession   api.EntityRef    `json:"apiSession"`
	IdentityID   string           `json:"identityId"`
	EdgeRouters  []edgeRouterView `json:"edgeRouters"`
	Tags         posture.Tags     `json:"tags"`
	CreatedAt    api.Time         `json:"createdAt"`
	UpdatedAt    api.Time         `json:"updatedAt"`
	Links        api.Links        `json:"_links"`
}

// entityReader reads one entity as stored (Store.RawEntity).
type entityReader interface {
	RawEntity(kind posture.Kind, id string) (json.RawMessage, error)
}

// serviceName is a service's name ("" when it cannot be read).
func serviceName(r entityReader, id string) string {
	var svc posture.Service
	if raw, err := r.RawEntity(posture.KindService, id); err == nil {
		_ = json.Unmarshal(raw, &svc)
	}
	return svc.Name
}

// sessionView shows one of the caller's sessions, with its token opened.
func (a *API) sessionView(ctx context.Context, s posture.Session) (sessionView, error) {
	token, err := api.Reveal(ctx, a.Secrets, s.IdentityID, posture.FieldSessionToken, s.TokenSealed, s.Token)
	if err != nil {
		return sessionView{}, fmt.Errorf("session %s: %w", s.ID, err)
	}
	if earlierLayout(token) {
		// A session made by an earlier version: its token in the layout
		// the Go SDK reads, so that it can refresh the session.
		if token, err = a.sessionToken(s); err != nil {
			return sessionView{}, err
		}
	}
	name := serviceName(a.Store, s.ServiceID)
	tags := s.Tags
	if tags == nil {
		tags = posture.Tags{}
	}
	return sessionView{
		ID: s.ID, Token: token, Type: s.Type, ServiceID: s.ServiceID, Service: api.Ref("services", s.ServiceID, name),
		APISessionID: s.APISessionID, APISession: api.Ref("api-sessions", s.APISessionID, ""), IdentityID: s.IdentityID,
		EdgeRouters: a.routers(a.routersFor(s.IdentityID, s.ServiceID)), Tags: tags,
		CreatedAt: api.Time(s.CreatedAt), UpdatedAt: api.Time(s.CreatedAt), Links: api.SelfLink("sessions", s.ID),
	}, nil
}

// sessionToken signs a session's token (sessionClaims).
func (a *API) sessionToken(s posture.Session) (string, error) {
	return a.Tokens.Sign(sessionClaims{
		jwtRegistered: jwt.RegisteredClaims{Subject: s.ServiceID, ID: s.ID, IssuedAt: jwt.NewNumericDate(s.CreatedAt)},
		APISessionID:  s.APISessionID, IdentityID: s.IdentityID, Type: s.Type,
	})
}

// earlierLayout reports whether a session token has the claims of earlier
// versions (the session as subject, no z_iid).
func earlierLayout(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	return err == nil && !bytes.Contains(payload, []byte(`"z_iid"`))
}

func sessionType(s string) (string, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "dial":
		return posture.Dial, true
	case "bind":
		return posture.Bind, true
	}
	return "", false
}

// serviceNotFound is the answer to a session request for a service the
// identity has a policy of the other type only for.
func serviceNotFound(id string) error {
	return posture.Invalid("serviceId", "service not found", id)
}

// createSession is POST /sessions. One passing policy of the type is
// enough; a policy without checks passes. A refusal is recorded as a failed
// service request and answered 409 INVALID_POSTURE with the failing
// policies and checks.
func (a *API) createSession(c echo.Context) error {
	var in sessionInput
	if err := api.Decode(c, &in); err != nil {
		return err
	}
	typ, ok := sessionType(in.Type)
	if !ok {
		return posture.Invalid("type", "must be Dial or Bind", in.Type)
	}
	if strings.TrimSpace(in.ServiceID) == "" {
		return posture.Invalid("serviceId", "is required", in.ServiceID)
	}
	t, err := api.CheckTags(in.Tags)
	if err != nil {
		return err
	}
	if err := api.CheckTagsText("tags", t); err != nil {
		return err
	}
	// As the real controller: a service that does not exist, or that no
	// policy of either type grants the identity, is 404 (an SDK then
	// refreshes its list of services); one that only a policy of the other
	// type grants, 400 COULD_NOT_VALIDATE "service not found".
	raw, err := a.Store.RawEntity(posture.KindService, in.ServiceID)
	if errors.Is(err, posture.ErrNotFound) {
		return posture.NotFound("service", in.ServiceID)
	}
	if err != nil {
		return err
	}
	var svc posture.Service
	if err := json.Unmarshal(raw, &svc); err != nil {
		return err
	}
	p := api.PrincipalOf(c)
	results, err := a.Store.Access(p.Identity.ID, p.Session.ID, svc.ID, typ, a.Writer.Now())
	if err != nil {
		return err
	}
	if len(results) == 0 {
		if granted, err := a.Store.Access(p.Identity.ID, p.Session.ID, svc.ID, posture.OtherType(typ), a.Writer.Now()); err != nil {
			return err
		} else if len(granted) == 0 {
			return posture.NotFound("service", in.ServiceID) // as one that does not exist
		}
		return serviceNotFound(in.ServiceID)
	}
	var passing []string
	strict := false
	for _, r := range results {
		if r.Passing {
			passing = append(passing, r.PolicyID)
		}
		strict = strict || r.Strict
	}
	if len(passing) == 0 {
		return a.deny(c, p, svc, typ, results)
	}
	// Granted only because failing checks report: the request full
	// enforcement would have denied, recorded with the session.
	var wouldDeny []posture.PolicyFailure
	if !strict {
		wouldDeny = posture.Failures(results)
	}
	ctx := c.Request().Context()
	if s, err := a.Store.SessionFor(p.Session.ID, typ, svc.ID); err == nil {
		v, err := a.sessionView(ctx, s)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, api.Envelope{Data: v})
	}
	s := posture.Session{
		ID: posture.NewID(), IdentityID: p.Identity.ID, APISessionID: p.Session.ID,
		ServiceID: svc.ID, Type: typ, Tags: t, CreatedAt: a.Writer.Now().UTC(),
	}
	token, err := a.sessionToken(s)
	if err != nil {
		return err
	}
	if s.TokenSealed, err = api.Seal(ctx, a.Secrets, s.IdentityID, posture.FieldSessionToken, token); err != nil {
		return err
	}
	if _, err := a.Writer.AppendBudgeted(c, a.Budget, s.IdentityID, posture.SessionCreated{Session: s, Policies: passing, WouldDeny: wouldDeny}, transitionCost(len(wouldDeny) > 0)); err != nil {
		return err
	}
	stored, err := a.Store.Session(s.ID)
	if err != nil {
		return a.notCreated(c, p, svc, typ)
	}
	v, err := a.sessionView(ctx, stored)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, api.Envelope{Data: v})
}

// notCreated answers a session the projection did not create when it
// applied the request: another request of the API session created it first
// (that one is the answer, as to a repeated request), what was applied
// meanwhile took the grant away (the refusal the state now gives), or the
// API session ended.
func (a *API) notCreated(c echo.Context, p *api.Principal, svc posture.Service, typ string) error {
	if s, err := a.Store.SessionFor(p.Session.ID, typ, svc.ID); err == nil {
		v, err := a.sessionView(c.Request().Context(), s)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusCreated, api.Envelope{Data: v})
	}
	if _, err := a.Store.APISession(p.Session.ID); err != nil {
		return &posture.Error{Code: posture.CodeUnauthorized, Message: "the API session ended before the session could be created"}
	}
	results, err := a.Store.Access(p.Identity.ID, p.Session.ID, svc.ID, typ, a.Writer.Now())
	if err != nil {
		return err
	}
	if len(results) == 0 {
		return serviceNotFound(svc.ID)
	}
	for _, r := range results {
		if r.Passing {
			// Refused when applied, passing again now: the access changed
			// while the request was in flight.
			return &posture.Error{Code: posture.CodeInvalidPosture, Message: "the service's policies changed while the session was being created; try again"}
		}
	}
	return a.deny(c, p, svc, typ, results)
}

type failedCheck struct {
	ID        string `json:"id"`
	TypeID    string `json:"typeId"`
	IsPassing bool   `json:"isPassing"`
}

// deny records the failed request and answers 409 INVALID_POSTURE.
func (a *API) deny(c echo.Context, p *api.Principal, svc posture.Service, typ string, results []posture.PolicyResult) error {
	denied := posture.SessionDenied{
		IdentityID: p.Identity.ID, APISessionID: p.Session.ID, ServiceID: svc.ID, ServiceName: svc.Name, Type: typ,
	}
	data := map[string][]failedCheck{}
	var ids []string
	denied.PolicyFailures = posture.Failures(results)
	for _, f := range denied.PolicyFailures {
		for _, cf := range f.Checks {
			if !cf.ReportOnly {
				data[f.PolicyID] = append(data[f.PolicyID], failedCheck{ID: cf.PostureCheckID, TypeID: string(cf.PostureCheckType)})
			}
		}
		ids = append(ids, f.PolicyID)
	}
	if _, err := a.Writer.AppendBudgeted(c, a.Budget, denied.IdentityID, denied, 0); err != nil {
		return err
	}
	return &posture.Error{Code: posture.CodeInvalidPosture, Cause: map[string]any{
		"message": fmt.Sprintf("Failed to pass posture checks for service policies: [%s]", strings.Join(ids, " ")),
		"data":    data,
	}}
}

// listSessions lists the sessions of the caller's identity, from all its
// API sessions, as detail and delete find them (an admin's: its own).
func (a *API) listSessions(c echo.Context) error {
	sessions, err := a.Store.IdentitySessions(api.PrincipalOf(c).Identity.ID)
	if err != nil {
		return err
	}
	return api.ListViews(c, sessions, func(s posture.Session) (sessionView, error) {
		return a.sessionView(c.Request().Context(), s)
	})
}

// ownSession reads one of the caller's sessions (others' are not found).
func (a *API) ownSession(c echo.Context) (posture.Session, error) {
	id := c.Param("id")
	s, err := a.Store.Session(id)
	if err != nil || s.IdentityID != api.PrincipalOf(c).Identity.ID {
		return s, posture.NotFound("session", id)
	}
	return s, nil
}

func (a *API) detailSession(c echo.Context) error {
	s, err := a.ownSession(c)
	if err != nil {
		return err
	}
	v, err := a.sessionView(c.Request().Context(), s)
	if err != nil {
		return err
	}
	return api.OK(c, v)
}

func (a *API) deleteSession(c echo.Context) error {
	s, err := a.ownSession(c)
	if err != nil {
		return err
	}
	if _, err := a.Writer.Append(c, posture.SessionDeleted{ID: s.ID, IdentityID: s.IdentityID}); err != nil {
		return err
	}
	return api.Empty(c)
}
