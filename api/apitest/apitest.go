// Package apitest holds what the handler tests of the API packages share:
// an event log that keeps what is appended, a projection that has applied
// everything, a secrets keyring that seals reversibly, and Serve, which
// serves one request to a set of routes as a given caller with the API's
// error handler, so that a broken handler fails a millisecond test that
// names it. It is imported by tests only.
package apitest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// Log is the event log of handler tests (api.Log): it keeps what is
// appended, in order.
type Log struct {
	mu     sync.Mutex
	Events []posture.Event
	// Err, when set, is returned by every append.
	Err error
	// Apply, when set, is called with each event appended: a test's fake
	// projection applies the few events its handler reads back.
	Apply func(e posture.Event)
}

// Append records e and returns its sequence (its position, from 1).
func (l *Log) Append(_ context.Context, e posture.Event) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Err != nil {
		return 0, l.Err
	}
	e.Seq = uint64(len(l.Events) + 1)
	l.Events = append(l.Events, e)
	if l.Apply != nil {
		l.Apply(e)
	}
	return e.Seq, nil
}

// AppendIfLast appends; the fake log has no concurrent writers, so the
// expectation always holds.
func (l *Log) AppendIfLast(ctx context.Context, e posture.Event, _ uint64) (uint64, error) {
	return l.Append(ctx, e)
}

// Fits takes every event: the fake log has no size limit.
func (l *Log) Fits(posture.Event) error { return nil }

// LastSubjectSeq is the sequence of the last event appended.
func (l *Log) LastSubjectSeq(context.Context, string) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return uint64(len(l.Events)), nil
}

// Types are the types of the events appended, in order.
func (l *Log) Types() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []string{}
	for _, e := range l.Events {
		out = append(out, e.Type)
	}
	return out
}

// Payload decodes the i-th event appended.
func (l *Log) Payload(t testing.TB, i int) posture.Payload {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if i >= len(l.Events) {
		t.Fatalf("event %d asked for, %d appended", i, len(l.Events))
	}
	p, err := l.Events[i].Decode()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Entities are a fake store's model records, JSON by kind and id, as the
// projection keeps them.
type Entities map[posture.Kind]map[string]json.RawMessage

// Put keeps e's JSON under its kind and id.
func (m Entities) Put(t testing.TB, e posture.Entity) {
	t.Helper()
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if m[e.EntityKind()] == nil {
		m[e.EntityKind()] = map[string]json.RawMessage{}
	}
	m[e.EntityKind()][e.EntityID()] = raw
}

// RawEntity reads the record of a kind with the id, or posture.ErrNotFound.
func (m Entities) RawEntity(kind posture.Kind, id string) (json.RawMessage, error) {
	if raw, ok := m[kind][id]; ok {
		return raw, nil
	}
	return nil, posture.ErrNotFound
}

// IDByName finds the id of the record of a kind with the name, or
// posture.ErrNotFound.
func (m Entities) IDByName(kind posture.Kind, name string) (string, error) {
	for id, raw := range m[kind] {
		var named struct{ Name string }
		if json.Unmarshal(raw, &named) == nil && named.Name == name {
			return id, nil
		}
	}
	return "", posture.ErrNotFound
}

// Applied is a projection that has applied everything (api.Barrier).
type Applied struct{}

// WaitFor returns at once.
func (Applied) WaitFor(context.Context, uint64) error { return nil }

// LastModelSeq is 0: the fake log's expectations always hold.
func (Applied) LastModelSeq() uint64 { return 0 }

// Writer is a writer on log whose clock stands at now.
func Writer(log *Log, now time.Time) *api.Writer {
	return &api.Writer{Log: log, Barrier: Applied{}, Now: func() time.Time { return now }}
}

// Secrets seals reversibly ("sealed:<owner>:<field>:<plain>") and records
// the owners destroyed (api.Secrets).
type Secrets struct {
	mu        sync.Mutex
	Destroyed []string
}

// SealString seals plain for an owner's field.
func (s *Secrets) SealString(_ context.Context, owner, field, plain string) (string, error) {
	return "sealed:" + owner + ":" + field + ":" + plain, nil
}

// OpenString opens what SealString sealed for the same owner and field.
func (s *Secrets) OpenString(_ context.Context, owner, field, sealed string) (string, error) {
	prefix := "sealed:" + owner + ":" + field + ":"
	plain, ok := strings.CutPrefix(sealed, prefix)
	if !ok {
		return "", &posture.Error{Code: posture.CodeUnhandled, Message: "sealed for another owner or field"}
	}
	return plain, nil
}

// Destroy records the owner.
func (s *Secrets) Destroy(_ context.Context, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Destroyed = append(s.Destroyed, owner)
	return nil
}

// Request is one request to serve.
type Request struct {
	Method string
	Path   string // with the query, relative to the API's base path
	Body   string // sent as JSON unless Header sets a Content-Type
	Header map[string]string
	// TLS is the connection's TLS state (nil: plain HTTP): its peer
	// certificates are a mutual TLS client's.
	TLS *tls.ConnectionState
}

// Response is what a handler answered.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Data is the envelope's data of a JSON answer below 400.
	Data json.RawMessage
	// Meta is the envelope's meta of a JSON answer.
	Meta api.Meta
	// Error is the envelope's error of an answer of 400 and above.
	Error api.APIError
}

// Serve serves one request to routes (mounted without their access
// checks) as caller (nil: none), with the API's error handler, and decodes
// the envelope. An error answer that is not an envelope fails the test.
func Serve(t testing.TB, routes []api.Route, caller *api.Principal, req Request) Response {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = api.ErrorHandler(slog.New(slog.DiscardHandler))
	as := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if caller != nil {
				p := *caller
				api.WithPrincipal(c, &p)
			}
			return next(c)
		}
	}
	for _, r := range routes {
		e.Add(r.Method, r.Path, r.Handler, as)
	}
	hr := httptest.NewRequest(req.Method, req.Path, strings.NewReader(req.Body))
	if req.Body != "" {
		hr.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	}
	for k, v := range req.Header {
		hr.Header.Set(k, v)
	}
	hr.TLS = req.TLS
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, hr)
	out := Response{Status: rec.Code, Header: rec.Header(), Body: rec.Body.Bytes()}
	if !strings.HasPrefix(rec.Header().Get(echo.HeaderContentType), echo.MIMEApplicationJSON) {
		if rec.Code >= 400 {
			t.Fatalf("%s %s: error answer %d is not JSON: %s", req.Method, req.Path, rec.Code, rec.Body)
		}
		return out
	}
	var env struct {
		Data  json.RawMessage `json:"data"`
		Meta  api.Meta        `json:"meta"`
		Error *api.APIError   `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatalf("%s %s: the answer is not an envelope: %v: %s", req.Method, req.Path, err, rec.Body)
	}
	out.Data, out.Meta = env.Data, env.Meta
	if rec.Code >= 400 {
		if env.Error == nil {
			t.Fatalf("%s %s: error answer %d without an error object: %s", req.Method, req.Path, rec.Code, rec.Body)
		}
		out.Error = *env.Error
	}
	return out
}

// DataInto decodes the envelope's data into v.
func (r Response) DataInto(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Data, v); err != nil {
		t.Fatalf("data %s: %v", r.Data, err)
	}
}

// Field is the field an error's cause names ("" for none).
func (r Response) Field() string {
	cause, _ := r.Error.Cause.(map[string]any)
	f, _ := cause["field"].(string)
	return f
}

// Case is one request to a handler and what it must answer. Name says
// which handler and what case ("createSession: service unknown").
type Case struct {
	Name   string
	Method string
	Path   string
	Body   string
	Header map[string]string
	TLS    *tls.ConnectionState
	// Status is the answer's status.
	Status int
	// Code is the error code of an error answer; Field the field its cause
	// names, when it must name one.
	Code  string
	Field string
	// Appended are the types of the events the request appended, in order
	// (none when empty: a refused request writes nothing).
	Appended []string
	// Check, when set, checks the rest of the answer and the events.
	Check func(t *testing.T, r Response, log *Log)
}

// Request is the case's request.
func (c Case) Request() Request {
	return Request{Method: c.Method, Path: c.Path, Body: c.Body, Header: c.Header, TLS: c.TLS}
}

// Expect checks an answer and the events appended against the case. An
// internal error (500) must show the default message, nothing of its cause.
func (c Case) Expect(t *testing.T, r Response, log *Log) {
	t.Helper()
	if r.Status != c.Status {
		t.Fatalf("status %d, want %d: %s", r.Status, c.Status, r.Body)
	}
	if c.Code != "" && r.Error.Code != c.Code {
		t.Fatalf("error code %q, want %q: %s", r.Error.Code, c.Code, r.Body)
	}
	if c.Code == "" && r.Status >= 400 {
		t.Fatalf("an error answer (%s) for a case that expects none: %s", r.Error.Code, r.Body)
	}
	if c.Field != "" && r.Field() != c.Field {
		t.Fatalf("error cause %v, want the field %q", r.Error.Cause, c.Field)
	}
	if r.Status == http.StatusInternalServerError && (r.Error.Message != posture.DefaultMessage(posture.CodeUnhandled) || r.Error.Cause != nil) {
		t.Fatalf("an internal error showed its cause: %s", r.Body)
	}
	want := c.Appended
	if want == nil {
		want = []string{}
	}
	if log != nil {
		if got := log.Types(); !slices.Equal(got, want) {
			t.Fatalf("appended %v, want %v", got, want)
		}
	}
	if c.Check != nil {
		c.Check(t, r, log)
	}
}

// Run serves each case with the routes and caller setup returns for it (a
// fresh API per case) and checks the answer.
func Run(t *testing.T, cases []Case, setup func(t *testing.T, c Case) (routes []api.Route, caller *api.Principal, log *Log)) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			routes, caller, log := setup(t, c)
			c.Expect(t, Serve(t, routes, caller, c.Request()), log)
		})
	}
}
