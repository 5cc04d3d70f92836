package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
)

// adminStore knows one identity, an admin; the pages of these tests read
// nothing else.
type adminStore struct{ Store }

func (adminStore) Identity(id string) (posture.Identity, error) {
	if id != "admin-id" {
		return posture.Identity{}, posture.ErrNotFound
	}
	return posture.Identity{ID: id, Name: "admin", IsAdmin: true}, nil
}

// fakeAPI answers the API operations the backtest pages call with fixed
// bodies: the session check, a check, a start refused as busy and a job
// still running. The real API's answers are tested with the node
// (cmd/postured TestConsoleBacktest).
func fakeAPI(t *testing.T) http.Handler {
	m := http.NewServeMux()
	json := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get(headerSession) != "token" {
				t.Errorf("%s %s without the admin's session", r.Method, r.URL)
			}
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "31")
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	m.Handle("GET /c/current-api-session", json(http.StatusOK, `{"data":{"identityId":"admin-id"}}`))
	m.Handle("GET /m/posture-checks/c1", json(http.StatusOK, `{"data":{"id":"c1","name":"os <new>","typeId":"OS","version":1,
		"createdAt":"2026-11-01T00:00:00.000Z","updatedAt":"2026-11-01T00:00:00.000Z","_links":{"self":{"href":"./posture-checks/c1"}},
		"roleAttributes":["a"],"tags":{},"operatingSystems":[{"type":"Windows","versions":["\u003e=10.0.19041"]}],"maxAgeSeconds":86400,"onStale":"fail"}}`))
	m.Handle("POST /m/backtests", json(http.StatusTooManyRequests,
		`{"error":{"code":"SERVER_TOO_MANY_REQUESTS","message":"a backtest is <running> on this node","cause":{"retryAfterSeconds":30}}}`))
	m.Handle("GET /m/backtests/j1", json(http.StatusOK,
		`{"data":{"id":"j1","status":"running","createdAt":"2026-11-24T01:00:00Z","progress":{"seq":250,"lastSeq":1000}}}`))
	m.Handle("GET /m/backtests/j0", json(http.StatusOK,
		`{"data":{"id":"j0","status":"running","createdAt":"2026-11-24T01:00:00Z","progress":{"seq":0,"lastSeq":0}}}`))
	return m
}

func newTestConsole(t *testing.T) *Console {
	c, err := New(Options{API: fakeAPI(t), ManagementBase: "/m", ClientBase: "/c", Store: adminStore{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testCSRF = "0123456789012345678901234567890123456789012" // 43 characters

func get(t *testing.T, c *Console, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, "https://node"+path, nil)
	r.AddCookie(&http.Cookie{Name: SessionCookie, Value: "token"})
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func post(t *testing.T, c *Console, path string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	form.Set(CSRFField, testCSRF)
	r := httptest.NewRequest(http.MethodPost, "https://node"+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: SessionCookie, Value: "token"})
	r.AddCookie(&http.Cookie{Name: CSRFCookie, Value: testCSRF})
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

// TestBacktestForm: the form's body is the check's GET view without what
// PUT does not take, with ">" as it is (escaped by the page, not by JSON).
func TestBacktestForm(t *testing.T) {
	w := get(t, newTestConsole(t), "/console/checks/c1/backtest")
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("form: %d %s", w.Code, body)
	}
	want := `{
  &#34;maxAgeSeconds&#34;: 86400,
  &#34;name&#34;: &#34;os &lt;new&gt;&#34;,
  &#34;onStale&#34;: &#34;fail&#34;,
  &#34;operatingSystems&#34;: [
    {
      &#34;type&#34;: &#34;Windows&#34;,
      &#34;versions&#34;: [
        &#34;&gt;=10.0.19041&#34;
      ]
    }
  ],
  &#34;roleAttributes&#34;: [
    &#34;a&#34;
  ],
  &#34;tags&#34;: {},
  &#34;typeId&#34;: &#34;OS&#34;
}</textarea>`
	if !strings.Contains(body, want) {
		t.Fatalf("the form's body is not the check's PUT body:\n%s", body)
	}
	if !strings.Contains(body, "<h1>Backtest os &lt;new&gt;</h1>") {
		t.Errorf("the form's title does not name the check, escaped:\n%s", body)
	}
	if get(t, newTestConsole(t), "/console/checks/c2/backtest").Code != http.StatusNotFound {
		t.Errorf("an unknown check's form is not a 404")
	}
}

// TestBacktestBusy: the API's 429 is shown on the form, escaped, with the
// time to wait, and what was typed is kept.
func TestBacktestBusy(t *testing.T) {
	w := post(t, newTestConsole(t), "/console/checks/c1/backtest", url.Values{"body": {`{"typeId": "OS"}`}, "from": {"2026-11-17T00:00:00Z"}})
	body := w.Body.String()
	if w.Code != http.StatusTooManyRequests || !strings.Contains(body, "a backtest is &lt;running&gt; on this node (try again in 30s)") ||
		!strings.Contains(body, `{&#34;typeId&#34;: &#34;OS&#34;}</textarea>`) || !strings.Contains(body, `value="2026-11-17T00:00:00Z"`) {
		t.Fatalf("busy: %d %s", w.Code, body)
	}
}

// TestBacktestRunning: a running job's page shows its progress and reloads
// itself; the meta refresh is not inline script, so the CSP allows it.
func TestBacktestRunning(t *testing.T) {
	c := newTestConsole(t)
	w := get(t, c, "/console/backtests/j1")
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `<meta http-equiv="refresh" content="2">`) ||
		!strings.Contains(body, "event 250 of 1000 (25%)") || !strings.Contains(body, `<progress max="100" value="25">`) {
		t.Fatalf("running job: %d %s", w.Code, body)
	}
	if w := get(t, c, "/console/backtests/j0"); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "event 0 of 0 (0%)") {
		t.Fatalf("a job that has not started reading: %d %s", w.Code, w.Body)
	}
}
