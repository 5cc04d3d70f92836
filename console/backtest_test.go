package console

import (
	"html"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
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
	// After a stop, the notice names no job: the address is anyone's to
	// write, and the page does not repeat it.
	w = get(t, newTestConsole(t), "/console/checks/c1/backtest?stopped=1&job="+url.QueryEscape("x. Sign in again at https://evil.example"))
	if body := w.Body.String(); !strings.Contains(body, `<p id="stopped" role="status">The backtest was stopped and forgotten.</p>`) || strings.Contains(body, "evil.example") {
		t.Errorf("the stopped notice:\n%s", body)
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

// TestBacktestReportCandidate: the report of a backtest the console started
// shows the edited body that was tested, "again" opens the form with it
// (not the stored check's body), and the checks the edit did not change
// are set apart from the edited one.
func TestBacktestReportCandidate(t *testing.T) {
	m := http.NewServeMux()
	m.Handle("/", fakeAPI(t))
	m.HandleFunc("POST /m/backtests", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"data":{"id":"j2","status":"running","createdAt":"2026-11-24T01:00:00Z"}}`)
	})
	m.HandleFunc("GET /m/backtests/j2", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"data":{"id":"j2","status":"done","createdAt":"2026-11-24T01:00:00Z","report":{"changed":true,
			"totals":{"decisions":3,"newlyDenied":2},
			"checks":[{"id":"c1","name":"os <new>","type":"OS","newlyDeniedIdentities":2,"newlyDeniedRequests":2},
			          {"id":"c9","name":"windows-11","type":"OS","newlyDeniedIdentities":1,"newlyDeniedRequests":1}],
			"failingValues":[{"checkId":"c9","checkName":"windows-11","checkType":"OS","value":"Linux 6.1","identities":1,"requests":1},
			                 {"checkId":"c1","checkName":"os <new>","checkType":"OS","value":"Windows 10.0.19045","identities":2,"requests":2}],
			"lostAccess":[{"identityId":"admin-id","identityName":"admin","at":"2026-11-20T00:00:00Z","serviceName":"crm","how":"denied"},
			              {"identityId":"gone-id","identityName":"carol","at":"2026-11-20T00:00:00Z","serviceName":"crm","how":"denied"}],
			"changes":[{"seq":7,"at":"2026-11-20T00:00:00Z","kind":"decision","identityId":"gone-id","identityName":"carol","apiSessionId":"as-7","recorded":"granted","candidate":"denied"}]}}}`)
	})
	c, err := New(Options{API: m, ManagementBase: "/m", ClientBase: "/c", Store: adminStore{}})
	if err != nil {
		t.Fatal(err)
	}
	edited := `{"typeId": "OS", "name": "os <new>", "operatingSystems": [{"type": "Windows", "versions": [">=10.0.22000"]}]}`
	w := post(t, c, "/console/checks/c1/backtest", url.Values{"body": {edited}, "name": {"os <new>"}, "from": {"2026-11-17T00:00:00Z"}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/backtests/j2?check=c1" {
		t.Fatalf("start: %d %v %s", w.Code, w.Header(), w.Body)
	}
	w = get(t, c, "/console/backtests/j2?check=c1")
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("report: %d %s", w.Code, body)
	}
	if !strings.Contains(body, `<pre id="candidate-body">`+template.HTMLEscapeString(edited)+`</pre>`) {
		t.Errorf("the report does not show the candidate that was tested:\n%s", body)
	}
	again := regexp.MustCompile(`<a id="again" href="([^"]+)"`).FindStringSubmatch(body)
	if again == nil {
		t.Fatalf("no link to backtest the candidate again:\n%s", body)
	}
	// The edited check is marked; the other one is apart, said not edited.
	impact := regexp.MustCompile(`(?s)<table id="impact-table">.*?</table>`).FindString(body)
	others := regexp.MustCompile(`(?s)<table id="other-checks-table">.*?</table>`).FindString(body)
	if !strings.Contains(impact, `<tr class="edited"><td>Check os &lt;new&gt; (OS) <strong class="tag">edited</strong></td><td>2</td>`) ||
		strings.Contains(impact, "windows-11") || !strings.Contains(others, "<td>Check windows-11 (OS)</td><td>1</td>") ||
		!strings.Contains(body, "Other checks that refuse the same requests (not edited)") {
		t.Errorf("the per-check rows do not set the edited check apart:\n%s\n%s", impact, others)
	}
	// An identity deleted since is said so, with no link to a page it no
	// longer has; one that is there is linked.
	lost := regexp.MustCompile(`(?s)<table id="lost-table">.*?</table>`).FindString(body)
	changes := regexp.MustCompile(`(?s)<table id="changes-table">.*?</table>`).FindString(body)
	if !strings.Contains(lost, `<a href="/console/identities/admin-id">admin</a>`) || !strings.Contains(lost, "carol (deleted since)") ||
		strings.Contains(lost+changes, "gone-id") || !strings.Contains(changes, "carol (deleted since)") {
		t.Errorf("identities deleted since are linked:\n%s\n%s", lost, changes)
	}
	// Two rows of one identity's API sessions tell which is which.
	if !strings.Contains(changes, ", API session <code>as-7</code></td>") {
		t.Errorf("a change does not name its API session:\n%s", changes)
	}
	values := regexp.MustCompile(`(?s)<table id="values-table">.*?</table>`).FindString(body)
	otherValues := regexp.MustCompile(`(?s)<table id="other-values-table">.*?</table>`).FindString(body)
	if !strings.Contains(values, "<code>Windows 10.0.19045</code>") || strings.Contains(values, "Linux 6.1") ||
		!strings.Contains(otherValues, "<td>windows-11 (OS)</td><td><code>Linux 6.1</code>") {
		t.Errorf("the failing values do not set the edited check apart:\n%s\n%s", values, otherValues)
	}

	// Again: the form holds the candidate and its window, not the stored
	// check's body.
	w = get(t, c, html.UnescapeString(again[1]))
	body = w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, `id="candidate" rows="18" spellcheck="false" required>`+template.HTMLEscapeString(edited)+`</textarea>`) ||
		!strings.Contains(body, `value="2026-11-17T00:00:00Z"`) || strings.Contains(body, "10.0.19041") {
		t.Fatalf("again does not open the form with the candidate: %d\n%s", w.Code, body)
	}
	// Another check's form is not filled with this job's candidate.
	if w := get(t, c, "/console/checks/c2/backtest?job=j2"); w.Code != http.StatusNotFound {
		t.Errorf("another check's form with the job: %d", w.Code)
	}
}
