package api_test

import (
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

var rewrite = flag.Bool("rewrite", false, "rewrite golden files in testdata")

// TestErrorEnvelopes checks the error bodies against golden JSON files.
func TestErrorEnvelopes(t *testing.T) {
	cases := map[string]error{
		"validation":   posture.Invalid("username", "must be between 4 and 100 characters", "ab"),
		"not_found":    posture.NotFound("identity", "abc"),
		"unauthorized": &posture.Error{Code: posture.CodeUnauthorized},
		"posture": &posture.Error{Code: posture.CodeInvalidPosture, Cause: map[string]any{
			"message": "Failed to pass posture checks for service policies: [p1]",
			"data":    map[string]any{"p1": []any{map[string]any{"id": "c1", "typeId": "OS", "isPassing": false}}},
		}},
		"internal":           errors.New("pebble: disk on fire"),
		"echo_404":           echo.ErrNotFound,
		"echo_405":           echo.ErrMethodNotAllowed,
		"not_found_sentinel": posture.ErrNotFound,
	}
	e := api.New(api.Options{})
	for name, err := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			c := e.NewContext(httptest.NewRequest(http.MethodGet, "/x", nil), rec)
			c.Response().Header().Set(echo.HeaderXRequestID, "req-1")
			e.HTTPErrorHandler(err, c)
			var pretty map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &pretty); err != nil {
				t.Fatalf("not JSON: %s", rec.Body)
			}
			got, _ := json.MarshalIndent(map[string]any{"status": rec.Code, "body": pretty}, "", "  ")
			got = append(got, '\n')
			golden := filepath.Join("testdata", "error_"+name+".json")
			if *rewrite {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if name == "internal" && regexp.MustCompile(`disk on fire`).Match(rec.Body.Bytes()) {
				t.Fatal("an internal error leaked to the caller")
			}
		})
	}
}

// TestResponsesKeepRangesReadable: <, > and & are written as they are.
func TestResponsesKeepRangesReadable(t *testing.T) {
	e := api.New(api.Options{})
	rec := httptest.NewRecorder()
	if err := api.OK(e.NewContext(httptest.NewRequest(http.MethodGet, "/x", nil), rec), []string{">=10.0.19041 <11 & more"}); err != nil {
		t.Fatal(err)
	}
	if want := `{"data":[">=10.0.19041 <11 & more"],"meta":{}}` + "\n"; rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body, want)
	}
}

func TestParseList(t *testing.T) {
	cases := []struct {
		query         string
		limit, offset int64
		code          string
	}{
		{"", 10, 0, ""},
		{"limit=25&offset=5", 25, 5, ""},
		{"limit=501", 500, 0, ""},
		{"limit=0", 10, 0, ""},
		{"limit=-2", 10, 0, ""},
		{"limit=-1", 500, 0, ""},
		{"offset=100001", 10, 100000, ""},
		{"limit=99999999999999999999&offset=99999999999999999999", 500, 100000, ""},
		{"limit=-99999999999999999999", 10, 0, ""},
		{"offset=-99999999999999999999", 0, 0, posture.CodeInvalidPagination},
		{"limit=ten", 0, 0, posture.CodeInvalidPagination},
		{"offset=-1", 0, 0, posture.CodeInvalidPagination},
		{"offset=x", 0, 0, posture.CodeInvalidPagination},
	}
	e := echo.New()
	for _, c := range cases {
		ctx := e.NewContext(httptest.NewRequest(http.MethodGet, "/x?"+c.query, nil), httptest.NewRecorder())
		p, err := api.ParseList(ctx)
		if c.code != "" {
			if posture.CodeOf(err) != c.code {
				t.Errorf("%q: error %v, want %s", c.query, err, c.code)
			}
			continue
		}
		if err != nil || p.Limit != c.limit || p.Offset != c.offset {
			t.Errorf("%q: %+v %v, want limit %d offset %d", c.query, p, err, c.limit, c.offset)
		}
	}
}

func TestPaginate(t *testing.T) {
	e := echo.New()
	items := []int{1, 2, 3, 4, 5}
	for _, c := range []struct {
		p    api.ListParams
		want []int
	}{
		{api.ListParams{Limit: 2, Offset: 0}, []int{1, 2}},
		{api.ListParams{Limit: 2, Offset: 4}, []int{5}},
		{api.ListParams{Limit: 2, Offset: 9}, []int{}},
		{api.ListParams{Limit: 4, Offset: 1}, []int{2, 3, 4, 5}},
	} {
		rec := httptest.NewRecorder()
		if err := api.Paginate(e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec), c.p, items); err != nil {
			t.Fatal(err)
		}
		var env struct {
			Data []int
			Meta api.Meta
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(env.Data, c.want) || env.Meta.Pagination.TotalCount != 5 || env.Meta.Pagination.Limit != c.p.Limit {
			t.Errorf("%+v: got %v %+v", c.p, env.Data, env.Meta.Pagination)
		}
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"/edge/client/v1/enroll?method=ott&token=0f6b5c1e-1111-4222-8333-944445555666": "/edge/client/v1/enroll?method=ott&token=REDACTED",
		"/edge/client/v1/enroll?method=ott":                                            "/edge/client/v1/enroll?method=ott",
		"/version":                                                                     "/version",
		"/x?token=%zz":                                                                 "/x?[unparsed query redacted]",
		"/edge/client/v1/current-api-session?zt-session=0f6b5c1e&limit=5":              "/edge/client/v1/current-api-session?limit=5&zt-session=REDACTED",
		"/x?access_token=a&ACCESS_TOKEN=b&Password=c&client_secret=d&api_key=e&code=f": "/x?ACCESS_TOKEN=REDACTED&Password=REDACTED&access_token=REDACTED&api_key=REDACTED&client_secret=REDACTED&code=REDACTED",
		"/x?filter=name%3D%22a%22&limit=5":                                             "/x?filter=name%3D%22a%22&limit=5",
	} {
		if got := api.RedactURI(in); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFixedAnswer checks that an answer encoded once is what c.JSON writes,
// with and without ?pretty.
func TestFixedAnswer(t *testing.T) {
	data := map[string]any{"services": []string{}, "range": ">=10.0"}
	fixed := api.NewFixed(data)
	e := api.New(api.Options{})
	for _, target := range []string{"/x", "/x?pretty"} {
		answer := func(f func(c echo.Context) error) *httptest.ResponseRecorder {
			rec := httptest.NewRecorder()
			if err := f(e.NewContext(httptest.NewRequest(http.MethodPost, target, nil), rec)); err != nil {
				t.Fatal(err)
			}
			return rec
		}
		got := answer(func(c echo.Context) error { return fixed.Answer(c, http.StatusCreated) })
		want := answer(func(c echo.Context) error { return c.JSON(http.StatusCreated, api.Envelope{Data: data}) })
		if got.Code != want.Code || got.Body.String() != want.Body.String() ||
			got.Header().Get(echo.HeaderContentType) != want.Header().Get(echo.HeaderContentType) {
			t.Errorf("%s: fixed answer %d %q (%s), c.JSON %d %q (%s)", target, got.Code, got.Body, got.Header().Get(echo.HeaderContentType),
				want.Code, want.Body, want.Header().Get(echo.HeaderContentType))
		}
	}
}

// TestClientRequestIDs: a client's own X-Request-Id is kept when it is a
// plain token and replaced when it is long or holds other characters.
func TestClientRequestIDs(t *testing.T) {
	e := api.New(api.Options{})
	e.GET("/edge/client/v1/ping", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	long := strings.Repeat("a", api.MaxRequestID+1)
	for id, kept := range map[string]bool{
		"3f9a-77:client.req_1": true, strings.Repeat("b", api.MaxRequestID): true,
		long: false, "<script>": false, "a b": false, "é": false,
	} {
		req := httptest.NewRequest(http.MethodGet, "/edge/client/v1/ping", nil)
		req.Header.Set(echo.HeaderXRequestID, id)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		got := rec.Header().Get(echo.HeaderXRequestID)
		if (got == id) != kept || got == "" {
			t.Errorf("X-Request-Id %.20q answered as %.40q; kept: %v", id, got, kept)
		}
	}
}

// TestListViews: without a filter or sort only the page's items are shown
// (their views may be costly); with one, every item is, and filtered.
func TestListViews(t *testing.T) {
	type view struct {
		N int `json:"n"`
	}
	items := []int{1, 2, 3, 4, 5}
	for _, c := range []struct {
		query string
		want  []int
		total int64
		views int
	}{
		{"limit=2&offset=1", []int{2, 3}, 5, 2},
		{"offset=9", []int{}, 5, 0},
		{"filter=" + url.QueryEscape("n > 3"), []int{4, 5}, 2, 5},
		{"sort=" + url.QueryEscape("n desc") + "&limit=2", []int{5, 4}, 5, 5},
	} {
		shown := 0
		rec := httptest.NewRecorder()
		ctx := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/x?"+c.query, nil), rec)
		if err := api.ListViews(ctx, items, func(n int) (view, error) { shown++; return view{n}, nil }); err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		var env struct {
			Data []view
			Meta api.Meta
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		got := []int{}
		for _, v := range env.Data {
			got = append(got, v.N)
		}
		if !cmp.Equal(got, c.want) || env.Meta.Pagination.TotalCount != c.total || shown != c.views || !slices.Contains(env.Meta.FilterableFields, "n") {
			t.Errorf("%s: %v of %d, %d views, fields %v; want %v of %d, %d views", c.query, got, env.Meta.Pagination.TotalCount, shown, env.Meta.FilterableFields, c.want, c.total, c.views)
		}
	}
}

// TestQueryOnce: a parameter given twice, but roleFilter and configTypes,
// and a query that separates with ";" are refused before the operation
// runs, with the code of the parameter's kind.
func TestQueryOnce(t *testing.T) {
	e := echo.New()
	e.HTTPErrorHandler = api.ErrorHandler(slog.New(slog.DiscardHandler))
	ran := 0
	api.Mount(e.Group(""), nil, []api.Route{{Method: http.MethodGet, Path: "/x", Access: api.Public, Handler: func(c echo.Context) error {
		ran++
		return c.NoContent(http.StatusOK)
	}}})
	for query, code := range map[string]string{
		"limit=1&limit=2":                    posture.CodeInvalidPagination,
		"offset=1&offset=1":                  posture.CodeInvalidPagination,
		`filter=name="a"&filter=name="b"`:    posture.CodeInvalidFilter,
		"sort=name&sort=id":                  posture.CodeInvalidSort,
		"method=password&method=cert":        posture.CodeCouldNotValidate,
		`filter=name%3D%22a%22;filter=true`:  posture.CodeCouldNotValidate,
		"limit=1;limit=2":                    posture.CodeCouldNotValidate,
		"roleFilter=%23a&roleFilter=%23b":    "",
		"configTypes=a&configTypes=b&limit=": "",
		"filter=name%3D%22a%3Bb%22":          "",
	} {
		before := ran
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x?"+query, nil))
		if code == "" {
			if w.Code != http.StatusOK || ran != before+1 {
				t.Errorf("%s: %d %s", query, w.Code, w.Body)
			}
			continue
		}
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `"code":"`+code+`"`) || ran != before {
			t.Errorf("%s: %d %s, want 400 %s and the operation not run", query, w.Code, w.Body, code)
		}
	}
}
