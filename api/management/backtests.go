package management

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// A backtest's candidate is a set of changes to the model written with
// this API's own bodies:
//
//	{"postureChecks":   {"create": [body, ...], "update": {"<id>": body}, "delete": ["<id>"]},
//	 "servicePolicies": {"create": [...], "update": {...}, "delete": [...]}}
//
// Every part is optional. A create body is a POST body; an update body is
// a full PUT body (the entity's whole new state, as PUT takes it: fields
// left out take their defaults, as with PUT). Each body is validated by
// the code that validates the API's own requests, against the model the
// candidate is checked against (the current one for the API).

// candidateDoc is a backtest request: the candidate and its window.
type candidateDoc struct {
	PostureChecks   *changeSet `json:"postureChecks"`
	ServicePolicies *changeSet `json:"servicePolicies"`
	From            string     `json:"from"`
	Until           string     `json:"until"`
}

type changeSet struct {
	Create []json.RawMessage          `json:"create"`
	Update map[string]json.RawMessage `json:"update"`
	Delete []string                   `json:"delete"`
}

// MaxCandidateChanges bounds the creates, updates and deletes of a
// candidate: each decision of a backtest evaluates them all.
const MaxCandidateChanges = 1000

// ParseCandidate validates a candidate document (with, in the API's
// request, optional "from" and "until") against the model in store, as
// the API validates requests, at time now (the created and updated
// entities' timestamps). It returns the changes as model-change payloads
// in the order they apply: checks created, updated and deleted, then
// policies created, updated and deleted. New entities get ids derived from
// their place in the document, so that a report names them the same every
// time. An error is a posture.Error whose field is the path in the
// document ("postureChecks.create[0].operatingSystems").
func ParseCandidate(store Store, body []byte, now time.Time) ([]posture.Payload, error) {
	doc, err := decodeCandidate(body)
	if err != nil {
		return nil, err
	}
	return (&API{Store: store}).candidate(doc, now)
}

// shaped is api.CheckShape for a candidate that is JSON: one that is not is
// said by its decoding, below.
func shaped(body []byte) error {
	if !json.Valid(body) {
		return nil
	}
	return api.CheckShape(body)
}

func decodeCandidate(body []byte) (candidateDoc, error) {
	var doc candidateDoc
	for _, check := range []func([]byte) error{api.CheckUTF8, shaped} {
		if err := check(body); err != nil {
			if pe, ok := err.(*posture.Error); ok { // said of the candidate, which may be a file
				pe.Message = strings.Replace(pe.Message, "the body", "the candidate", 1)
			}
			return doc, err
		}
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		what := "it is empty"
		if err := json.Unmarshal(t, new(any)); err != nil && len(t) > 0 {
			what = "it is not JSON: " + err.Error()
		} else if len(t) > 0 {
			what = "it is JSON, but not an object"
		}
		return doc, &posture.Error{Code: posture.CodeCouldNotParseBody,
			Message: "the candidate must be a JSON object with postureChecks and servicePolicies (each with create, update, delete); " + what}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return doc, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: api.ParseMessage(err)}
		}
		return doc, &posture.Error{Code: posture.CodeCouldNotParseBody,
			Message: "the candidate must be a JSON object with postureChecks and servicePolicies (each with create, update, delete): " + err.Error()}
	}
	return doc, api.Rest(dec, body)
}

// at prefixes a body's error with its path in the document: the field of
// a validation error, the message of any other.
func at(path string, err error) error {
	var pe *posture.Error
	if !errors.As(err, &pe) {
		return err
	}
	out := *pe
	if out.Field != "" {
		out.Field = path + "." + out.Field
		return &out
	}
	if out.Message == "" {
		out.Message = posture.DefaultMessage(out.Code)
	}
	out.Message = path + ": " + out.Message
	return &out
}

func (a *API) candidate(doc candidateDoc, now time.Time) ([]posture.Payload, error) {
	n := 0
	for _, set := range []*changeSet{doc.PostureChecks, doc.ServicePolicies} {
		if set != nil {
			n += len(set.Create) + len(set.Update) + len(set.Delete)
		}
	}
	if n > MaxCandidateChanges {
		return nil, posture.Invalid("candidate", fmt.Sprintf("a candidate makes at most %d changes (creates, updates and deletes of checks and policies together)", MaxCandidateChanges), n)
	}
	var out []posture.Payload
	checks, err := candidateChanges(a.checks(), "postureChecks", doc.PostureChecks, now)
	if err != nil {
		return nil, err
	}
	out = append(out, checks...)
	policies, err := candidateChanges(a.servicePolicies(), "servicePolicies", doc.ServicePolicies, now)
	if err != nil {
		return nil, err
	}
	return append(out, policies...), nil
}

// candidateChanges validates one kind's change set with the resource's
// own decode and build.
func candidateChanges[T posture.Entity, In any](r *resource[T, In], path string, set *changeSet, now time.Time) ([]posture.Payload, error) {
	if set == nil {
		return nil, nil
	}
	var out []posture.Payload
	names := map[string]string{} // name -> where it is set in the document
	claim := func(where string, e T) error {
		n := entityName(e)
		if other, dup := names[n]; dup && n != "" {
			return posture.Invalid(where+".name", "the candidate gives the name to "+other+" too", n)
		}
		names[n] = where
		return nil
	}
	for i, raw := range set.Create {
		where := fmt.Sprintf("%s.create[%d]", path, i)
		var in In
		if err := decodeBody(raw, &in); err != nil {
			return nil, at(where, err)
		}
		e, err := r.build(in, nil, now)
		if err != nil {
			return nil, at(where, err)
		}
		e = withID(e, posture.DerivedID("backtest", string(r.kind), strconv.Itoa(i), string(raw))[:10])
		if err := claim(where, e); err != nil {
			return nil, err
		}
		out = append(out, posture.Created[T]{Entity: e})
	}
	ids := make([]string, 0, len(set.Update))
	for id := range set.Update {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	deleted := map[string]bool{}
	for _, id := range set.Delete {
		deleted[id] = true
	}
	for _, id := range ids {
		where := fmt.Sprintf("%s.update.%s", path, id)
		if deleted[id] {
			return nil, posture.Invalid(where, "the candidate both updates and deletes "+r.noun+" "+id, id)
		}
		old, err := get[T](r.a.Store, r.noun, id)
		if err != nil {
			return nil, at(where, err)
		}
		var in In
		if err := decodeBody(set.Update[id], &in); err != nil {
			return nil, at(where, err)
		}
		e, err := r.build(in, &old, now)
		if err != nil {
			return nil, at(where, err)
		}
		if err := claim(where, e); err != nil {
			return nil, err
		}
		out = append(out, posture.Updated[T]{Entity: e})
	}
	for i, id := range set.Delete {
		where := fmt.Sprintf("%s.delete[%d]", path, i)
		if _, err := get[T](r.a.Store, r.noun, id); err != nil {
			return nil, at(where, err)
		}
		out = append(out, posture.Deleted[T]{ID: id})
	}
	return out, nil
}

// decodeBody decodes one body of the candidate as decodeObject decodes a
// request's.
func decodeBody(raw json.RawMessage, v any) error {
	var probe map[string]json.RawMessage
	if err := api.DecodeBytes(raw, &probe); err != nil || probe == nil {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body must be a JSON object"}
	}
	return api.DecodeBytes(raw, v)
}

// entityName and withID reach the two fields of the entities a candidate
// may change.
func entityName(e posture.Entity) string {
	switch v := e.(type) {
	case posture.Check:
		return v.Name
	case posture.ServicePolicy:
		return v.Name
	}
	return ""
}

func withID[T posture.Entity](e T, id string) T {
	var out posture.Entity = e
	switch v := out.(type) {
	case posture.Check:
		if v.TypeID == posture.CheckMFA && v.Name == "MFA check "+v.ID {
			v.Name = "MFA check " + id // the generated name follows the id
		}
		v.ID = id
		out = v
	case posture.ServicePolicy:
		v.ID = id
		out = v
	}
	return out.(T)
}

// Backtests runs backtests as jobs (the node's wiring implements it with
// package backtest).
type Backtests interface {
	// Start starts a backtest of changes over [from, until] (zero: the
	// log's start and end) and returns its job id. A full queue is a
	// posture.Error SERVER_TOO_MANY_REQUESTS; retryAfter says when to
	// try again.
	Start(changes []posture.Payload, from, until time.Time) (id string, retryAfter time.Duration, err error)
	// Job is a job's state and, once done, its report (a JSON value);
	// false when there is no such job (never, or forgotten).
	Job(id string) (any, bool)
	// Wait waits until a job ends or ctx does.
	Wait(ctx context.Context, id string)
	// Stop stops a running job and forgets it once it has ended, or
	// forgets a finished one (by says who, for the node's log), waiting
	// for a running one to end or ctx to; found is false when there is no
	// such job, ended false when it is still stopping.
	Stop(ctx context.Context, id, by string) (found, ended bool)
}

func (a *API) backtestRoutes() []api.Route {
	if a.Backtests == nil {
		return nil
	}
	return []api.Route{
		{Method: http.MethodPost, Path: "/backtests", Access: api.Admin, Handler: a.startBacktest},
		{Method: http.MethodGet, Path: "/backtests/:id", Access: api.Admin, Handler: a.detailBacktest},
		{Method: http.MethodDelete, Path: "/backtests/:id", Access: api.Admin, Handler: a.deleteBacktest},
	}
}

// startBacktest is POST /backtests: the candidate is validated against the
// current model (400 with the field's path, 404 for an id to update or
// delete that does not exist), then the backtest runs as a job: 202 with
// its id; GET /backtests/{id} shows its progress, then its report.
func (a *API) startBacktest(c echo.Context) error {
	body, err := api.ReadBody(c)
	if err != nil {
		return err
	}
	doc, err := decodeCandidate(body)
	if err != nil {
		return err
	}
	now := a.Writer.Now()
	from, err := windowTime("from", doc.From, now)
	if err != nil {
		return err
	}
	until, err := windowTime("until", doc.Until, now)
	if err != nil {
		return err
	}
	if !from.IsZero() && !until.IsZero() && until.Before(from) {
		return posture.Invalid("until", "must not be before from", doc.Until)
	}
	changes, err := a.candidate(doc, now.UTC())
	if err != nil {
		return err
	}
	id, retry, err := a.Backtests.Start(changes, from, until)
	if err != nil {
		if retry > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(retry.Round(time.Second)/time.Second)+1))
		}
		return err
	}
	job, _ := a.Backtests.Job(id)
	c.Response().Header().Set(echo.HeaderLocation, "./backtests/"+id)
	return c.JSON(http.StatusAccepted, api.Envelope{Data: job})
}

// windowTime reads from or until: RFC 3339, or empty.
func windowTime(field, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, posture.Invalid(field, "must be an RFC 3339 time (2026-11-22T10:32:00Z)", s)
	}
	if field == "from" && t.After(now) {
		return t, posture.Invalid(field, "must not be in the future", s)
	}
	if field == "until" {
		t = posture.EndOf(s, t)
	}
	return t.UTC(), beforeLog(field, s, t)
}

// maxBacktestWait bounds GET /backtests/{id}?wait=.
const maxBacktestWait = 60 * time.Second

// detailBacktest is GET /backtests/{id}: the job's status and progress,
// and its report once done. With wait=<seconds> (at most 60) it answers
// when the job ends or the wait is over, whichever is first.
func (a *API) detailBacktest(c echo.Context) error {
	if w := c.QueryParam("wait"); w != "" {
		secs, err := strconv.ParseFloat(w, 64)
		if err != nil || !(secs >= 0 && secs <= maxBacktestWait.Seconds()) { // NaN is neither
			return posture.Invalid("wait", fmt.Sprintf("must be a number of seconds from 0 to %.0f", maxBacktestWait.Seconds()), w)
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), time.Duration(secs*float64(time.Second)))
		defer cancel()
		a.Backtests.Wait(ctx, c.Param("id"))
	}
	job, ok := a.Backtests.Job(c.Param("id"))
	if !ok {
		return posture.NotFound("backtest", c.Param("id"))
	}
	return api.OK(c, job)
}

// stopWait bounds how long DELETE /backtests/{id} waits for a running job
// to end: a job stops within the event it is deciding, or the identity it
// is re-evaluating.
const stopWait = 10 * time.Second

// deleteBacktest is DELETE /backtests/{id}: a running job is stopped and
// forgotten once it has ended (its place is free then), a finished one
// forgotten. The answer waits for a running job to end: 200 when it has,
// 202 with the job (status stopping) when it has not yet.
func (a *API) deleteBacktest(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), stopWait)
	defer cancel()
	id := c.Param("id")
	who := api.PrincipalOf(c).Identity
	found, ended := a.Backtests.Stop(ctx, id, fmt.Sprintf("%s (%s)", who.Name, who.ID))
	switch {
	case !found:
		return posture.NotFound("backtest", id)
	case ended:
		return api.Empty(c)
	}
	job, ok := a.Backtests.Job(id)
	if !ok { // it ended meanwhile
		return api.Empty(c)
	}
	return c.JSON(http.StatusAccepted, api.Envelope{Data: job})
}
