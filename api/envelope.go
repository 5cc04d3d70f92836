package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// Envelope is the body of every JSON response: {data, meta}.
type Envelope struct {
	Data any  `json:"data"`
	Meta Meta `json:"meta"`
}

// Meta carries paging information on lists.
type Meta struct {
	Pagination       *Pagination `json:"pagination,omitempty"`
	FilterableFields []string    `json:"filterableFields,omitempty"`
}

// Pagination describes one page of a list.
type Pagination struct {
	Limit      int64 `json:"limit"`
	Offset     int64 `json:"offset"`
	TotalCount int64 `json:"totalCount"`
}

// Link is a relative link to an entity, as OpenZiti writes them.
type Link struct {
	Href string `json:"href"`
}

// Links holds an entity's links; "self" at least.
type Links map[string]Link

// SelfLink is the link of an entity in a collection ("./identities/abc").
func SelfLink(collection, id string) Links {
	return Links{"self": {Href: "./" + collection + "/" + id}}
}

// Created is the data of a create response.
type Created struct {
	ID    string `json:"id"`
	Links Links  `json:"_links"`
}

// OK answers 200 with data in the envelope.
func OK(c echo.Context, data any) error {
	return c.JSON(http.StatusOK, Envelope{Data: data})
}

// Empty answers 200 with empty data, as updates, patches and deletes do.
func Empty(c echo.Context) error {
	return c.JSON(http.StatusOK, Envelope{Data: struct{}{}})
}

// Fixed is an answer whose body never changes, encoded once: a hot path
// answers it without encoding it again for every request.
type Fixed struct {
	data any
	body []byte // as the serializer writes Envelope{Data: data}
}

// NewFixed encodes the envelope of data (plain data that always encodes).
func NewFixed(data any) Fixed {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(Envelope{Data: data}); err != nil {
		panic(fmt.Sprintf("api: encode a fixed answer: %v", err))
	}
	return Fixed{data: data, body: b.Bytes()}
}

// Answer writes the answer with the status code. A request with a query
// (?pretty), or any in echo's debug mode (indented), is answered through
// the serializer, as c.JSON answers it.
func (f Fixed) Answer(c echo.Context, code int) error {
	if c.Request().URL.RawQuery != "" || c.Echo().Debug {
		return c.JSON(code, Envelope{Data: f.data})
	}
	return c.JSONBlob(code, f.body)
}

// CreatedAt answers 201 with the new entity's id and link.
func CreatedAt(c echo.Context, collection, id string) error {
	return c.JSON(http.StatusCreated, Envelope{Data: Created{ID: id, Links: SelfLink(collection, id)}})
}

// Time is a timestamp as the wire shows it: RFC 3339 in UTC with
// milliseconds. The zero time is null.
type Time time.Time

// TimeFormat is the wire format of timestamps.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + tt.UTC().Format(TimeFormat) + `"`), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (t *Time) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*t = Time{}
		return nil
	}
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return err
	}
	*t = Time(tt)
	return nil
}

// TimePtr converts an optional time.
func TimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	v := Time(*t)
	return &v
}

// serializer writes JSON responses as echo's default does, but without
// escaping <, > and & (a version range reads ">=10.0.19041", not
// "\u003e=10.0.19041"; both are the same JSON). Request bodies are read by
// Decode.
type serializer struct{ echo.DefaultJSONSerializer }

func (serializer) Serialize(c echo.Context, v any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(v)
}
