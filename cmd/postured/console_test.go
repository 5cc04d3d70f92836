package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"io"
	"log"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
	"github.com/seed-0809debe/posture/console"
)

// consoleBrowser is a plain HTTPS client with cookies, as a browser
// without script: it follows no redirect, so that tests see each answer.
type consoleBrowser struct {
	t    testing.TB
	base string
	c    *http.Client
}

// consoleServer serves the node itself (the APIs and the console) over TLS.
func consoleServer(t testing.TB, n *testNode) *httptest.Server {
	srv := httptest.NewUnstartedServer(n.node)
	srv.TLS = n.tlsConfig()
	// Browsers open and drop spare connections; their handshake EOFs are
	// not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func newConsoleBrowser(t testing.TB, n *testNode, srv *httptest.Server) *consoleBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &consoleBrowser{t: t, base: srv.URL, c: &http.Client{
		Jar:           jar,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: n.ca.Pool(), ServerName: "localhost"}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}}
}

type page struct {
	Status int
	Header http.Header
	Body   string
}

func (b *consoleBrowser) do(method, path string, form url.Values) page {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, rd)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{resp.StatusCode, resp.Header, string(body)}
}

func (b *consoleBrowser) get(path string) page { b.t.Helper(); return b.do(http.MethodGet, path, nil) }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// post submits a form with the CSRF token of the page at from.
func (b *consoleBrowser) post(from, path string, form url.Values) page {
	b.t.Helper()
	m := csrfField.FindStringSubmatch(b.get(from).Body)
	if m == nil {
		b.t.Fatalf("no CSRF field on %s", from)
	}
	form.Set(console.CSRFField, m[1])
	return b.do(http.MethodPost, path, form)
}

func (b *consoleBrowser) signIn(username, password string) page {
	b.t.Helper()
	return b.post("/console/sign-in", "/console/sign-in", url.Values{"username": {username}, "password": {password}, "next": {"/console/fleet"}})
}

func (b *consoleBrowser) sessionToken() string {
	u, _ := url.Parse(b.base)
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == console.SessionCookie {
			return c.Value
		}
	}
	return ""
}

// story is the deny-then-grant story of the console tests: laptop-1's old
// Windows is denied the crm service, then a current one is granted it.
type consoleStory struct {
	identity, service, apiSession string
	deniedAt                      time.Time
	token                         string // laptop-1's API session token
}

func denyThenGrant(t testing.TB, n *testNode) consoleStory {
	t.Helper()
	admin := n.adminToken(t)
	crm := n.create(t, admin, "services", map[string]any{"name": "crm"})
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "modern-windows",
		"operatingSystems": []any{map[string]any{"type": "WINDOWS", "versions": []string{">=10.0.19041"}}}})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-dial-crm", "type": "Dial",
		"identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + crm}, "postureCheckRoles": []string{"@" + osCheck}})
	ep := n.endpoint(t, admin, "laptop-1", "laptops")
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "6.1.7601"}); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm, "type": "Dial"}); r.Status != http.StatusConflict {
		t.Fatalf("session on an old Windows: %d %s", r.Status, r.Body)
	}
	var failed []posture.FailedServiceRequest
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/failed-service-requests", admin, &failed)
	if len(failed) != 1 {
		t.Fatalf("failed requests: %+v", failed)
	}
	// The fleet's last failed requests name the identity.
	var fleet []struct {
		IdentityID string        `json:"identityId"`
		Identity   api.EntityRef `json:"identity"`
		ServiceID  string        `json:"serviceId"`
	}
	n.getJSON(t, mgmt+"/failed-service-requests?limit=5", admin, &fleet)
	if len(fleet) != 1 || fleet[0].IdentityID != ep.id || fleet[0].Identity.Name != "laptop-1" || fleet[0].ServiceID != crm {
		t.Fatalf("the fleet's failed requests: %+v", fleet)
	}
	// The API gives the denial's time to the millisecond, and a moment given
	// so means the end of that millisecond: the grant comes after it.
	time.Sleep(time.Until(failed[0].When.Add(time.Millisecond)))
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": osCheck, "typeId": "OS", "type": "Windows", "version": "10.0.19045"}); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": crm, "type": "Dial"}); r.Status != http.StatusCreated {
		t.Fatalf("session on a current Windows: %d %s", r.Status, r.Body)
	}
	return consoleStory{identity: ep.id, service: crm, apiSession: ep.apiSessionID, deniedAt: failed[0].When, token: ep.token}
}

// longNamedService adds to the console story a service with a long name,
// granted to the laptops without posture checks, and a session of
// laptop-1's for it.
func longNamedService(t testing.TB, n *testNode, st consoleStory) string {
	t.Helper()
	admin := n.adminToken(t)
	svc := n.create(t, admin, "services", map[string]any{"name": "wiki-with-a-rather-long-service-name-for-layout"})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-dial-long", "type": "Dial",
		"identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + svc}})
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", st.token, map[string]any{"serviceId": svc, "type": "Dial"}); r.Status != http.StatusCreated {
		t.Fatalf("session for the long-named service: %d %s", r.Status, r.Body)
	}
	return svc
}

// reportOnlyNIC adds to the console story a report-only MAC check, due to
// enforce in a day, that alone grants the laptops a wiki: laptop-1, which
// reports no MAC address, fails it and would lose the wiki.
func reportOnlyNIC(t testing.TB, n *testNode) (string, time.Time) {
	t.Helper()
	admin := n.adminToken(t)
	enforceAt := time.Now().UTC().Add(24 * time.Hour).Truncate(time.Second)
	nic := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MAC", "name": "registered-nic", "macAddresses": []string{"aa:bb:cc:dd:ee:ff"},
		"enforcement": map[string]any{"mode": "report", "enforceAt": enforceAt.Format(time.RFC3339), "message": "Register your laptop's network card"}})
	wiki := n.create(t, admin, "services", map[string]any{"name": "wiki"})
	n.create(t, admin, "service-policies", map[string]any{"name": "laptops-dial-wiki", "type": "Dial",
		"identityRoles": []string{"#laptops"}, "serviceRoles": []string{"@" + wiki}, "postureCheckRoles": []string{"@" + nic}})
	return nic, enforceAt
}

// TestConsolePages signs in, reads every page and signs out, as a browser
// without script would: the cookies' attributes, the CSP, CSRF refusals,
// the timeline's denial and explain's values.
func TestConsolePages(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	b := newConsoleBrowser(t, n, consoleServer(t, n))

	// Signed out: every page sends to sign-in.
	p := b.get("/console/identities/" + st.identity)
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/console/sign-in?next=") {
		t.Fatalf("signed out: %d %v", p.Status, p.Header)
	}
	csrf := p.Header.Get("Set-Cookie")
	for _, attr := range []string{console.CSRFCookie + "=", "HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(csrf, attr) {
			t.Fatalf("CSRF cookie %q lacks %s", csrf, attr)
		}
	}
	p = b.get("/console/sign-in")
	if p.Status != http.StatusOK || p.Header.Get("Content-Security-Policy") != console.CSP || !strings.Contains(console.CSP, "script-src 'self'") {
		t.Fatalf("sign-in page: %d %v", p.Status, p.Header)
	}
	if strings.Contains(p.Body, "<script>") || strings.Contains(p.Body, "style=") {
		t.Fatalf("inline script or style on the sign-in page:\n%s", p.Body)
	}

	// A form without the token, or with another, is refused.
	form := url.Values{"username": {"admin"}, "password": {testAdminPassword}}
	if p := b.do(http.MethodPost, "/console/sign-in", form); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "CSRF") {
		t.Fatalf("sign-in without CSRF token: %d %s", p.Status, p.Body)
	}
	form.Set(console.CSRFField, "forged-forged-forged-forged-forged-forged-ab")
	p = b.do(http.MethodPost, "/console/sign-in", form)
	if p.Status != http.StatusForbidden || !strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(p.Body, "<title>Form refused · postured</title>") || !strings.Contains(p.Body, `href="/console/sign-in"`) {
		t.Fatalf("sign-in with a forged CSRF token, want the console's error page: %d %v\n%s", p.Status, p.Header, p.Body)
	}
	// A form from another site is refused with the same page, whatever its
	// token (the browser says where the form came from).
	m := csrfField.FindStringSubmatch(b.get("/console/sign-in").Body)
	req, err := http.NewRequest(http.MethodPost, b.base+"/console/sign-in",
		strings.NewReader(url.Values{"username": {"admin"}, "password": {testAdminPassword}, console.CSRFField: {m[1]}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	cross, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(cross), "another site") || !strings.Contains(string(cross), "<title>Form refused") || b.sessionToken() != "" {
		t.Fatalf("cross-site sign-in: %d\n%s", resp.StatusCode, cross)
	}
	// The console's answers are counted beside the APIs'.
	metrics := scrape(t, n)
	for series, want := range map[string]float64{
		`postured_http_requests_total{method="GET",route="/console/",status="303"}`:  1,
		`postured_http_requests_total{method="GET",route="/console/",status="200"}`:  2,
		`postured_http_requests_total{method="POST",route="/console/",status="403"}`: 3,
	} {
		if got := metricValue(t, metrics, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// A form's body is bounded (4 MiB), before anyone signed in.
	form.Set("username", strings.Repeat("a", 5<<20))
	if p := b.do(http.MethodPost, "/console/sign-in", form); p.Status != http.StatusRequestEntityTooLarge || !strings.Contains(p.Body, "larger than 4 MiB") {
		t.Fatalf("a 5 MiB sign-in form: %d %.200s", p.Status, p.Body)
	}
	if b.sessionToken() != "" {
		t.Fatal("a refused form set a session")
	}

	// A wrong password says so; the right one signs in.
	for _, wrong := range [][2]string{{"admin", "wrong-password"}, {"admin", "nope"}, {"abc", "wrong-password"}} {
		if p := b.signIn(wrong[0], wrong[1]); p.Status != http.StatusUnauthorized || !strings.Contains(p.Body, `<p class="error" role="alert">Wrong username or password.</p>`) {
			t.Fatalf("wrong credentials %q: %d %s", wrong, p.Status, p.Body)
		}
	}
	// Past a username's failures from one address, the form says when to
	// try again.
	n.createUser(t, "console-guesser", "guesser-password", false)
	for range 10 {
		b.signIn("console-guesser", "wrong-password")
	}
	if p := b.signIn("console-guesser", "wrong-password"); p.Status != http.StatusTooManyRequests || p.Header.Get("Retry-After") == "" ||
		!regexp.MustCompile(`too many failed authentication attempts, or too many at once \(try again in \d+ s\)`).MatchString(p.Body) {
		t.Fatalf("sign-in past the failures: %d %v %s", p.Status, p.Header, p.Body)
	}
	p = b.signIn("admin", testAdminPassword)
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/fleet" {
		t.Fatalf("sign in: %d %v %s", p.Status, p.Header, p.Body)
	}
	session := p.Header.Get("Set-Cookie")
	for _, attr := range []string{console.SessionCookie + "=", "Path=/", "HttpOnly", "Secure", "SameSite=Strict"} {
		if !strings.Contains(session, attr) {
			t.Fatalf("session cookie %q lacks %s", session, attr)
		}
	}
	token := b.sessionToken()
	if r := n.do(t, http.MethodGet, mgmt+"/current-api-session", token, nil); r.Status != http.StatusOK {
		t.Fatalf("the console's session is not a management API session: %d %s", r.Status, r.Body)
	}

	// Fleet: the identities and the last failed request.
	p = b.get("/console/fleet")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, ">laptop-1</a>") || !strings.Contains(p.Body, "laptops-dial-crm") {
		t.Fatalf("fleet: %d %s", p.Status, p.Body)
	}
	// The last failed requests are the fleet's, not the page's: a page of
	// the identities after laptop-1 still shows its denial.
	p = b.get("/console/fleet?after=laptop-1")
	section := func(id string) string {
		return regexp.MustCompile(`(?s)<table id="` + id + `">.*?</table>`).FindString(p.Body)
	}
	if failures := section("failures"); p.Status != http.StatusOK || !strings.Contains(failures, ">laptop-1</a>") || !strings.Contains(failures, "laptops-dial-crm") ||
		strings.Contains(section("identities"), ">laptop-1</a>") {
		t.Fatalf("fleet after laptop-1: %d %s", p.Status, p.Body)
	}
	// The fleet summary: laptop-1 passes the policy and its check now.
	for _, row := range []string{"<td>Policy laptops-dial-crm</td><td>service policy</td><td>1</td><td>0</td><td>0</td>", "<td>Check modern-windows</td><td>OS</td><td>1</td><td>0</td><td>0</td>"} {
		if !strings.Contains(p.Body, row) {
			t.Errorf("fleet summary lacks %s", row)
		}
	}
	var counts console.Counts
	if p := b.get("/console/fleet/counts"); p.Status != http.StatusOK || json.Unmarshal([]byte(p.Body), &counts) != nil || counts.LogPosition != n.store.Cursor() {
		t.Fatalf("counts: %d %s (cursor %d)", p.Status, p.Body, n.store.Cursor())
	}

	// Identity: the denial on the timeline at its moment, linked to explain.
	p = b.get("/console/identities/" + st.identity)
	denied := regexp.MustCompile(`<a href="([^"]+)" class="mark denied" data-at="([^"]+)"`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || denied == nil {
		t.Fatalf("identity: %d, no denial mark:\n%s", p.Status, p.Body)
	}
	// The API shows the moment in milliseconds; the mark has it whole.
	if at, err := time.Parse(time.RFC3339Nano, denied[2]); err != nil || at.Truncate(time.Millisecond) != st.deniedAt.Truncate(time.Millisecond) {
		t.Fatalf("denial mark at %s, want %s", denied[2], st.deniedAt)
	}
	for _, want := range []string{"<svg id=\"timeline\"", ">OS</text>", ">Service crm</text>", ">Policy laptops-dial-crm</text>", "class=\"mark granted\"", "Windows 10.0.19045", "<td>modern-windows</td>"} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("identity page lacks %q", want)
		}
	}
	// A window that ends before the denial leaves it out.
	if p := b.get("/console/identities/" + st.identity + "?to=" + url.QueryEscape(st.deniedAt.Add(-time.Second).UTC().Format(time.RFC3339))); strings.Contains(p.Body, "mark denied") {
		t.Fatal("a window ending before the denial shows it")
	}

	// Explain at the denial: the failing check's actual and expected values.
	p = b.get(html.UnescapeString(denied[1]))
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Decision: <strong>denied</strong>") {
		t.Fatalf("explain: %d %s", p.Status, p.Body)
	}
	row := regexp.MustCompile(`(?s)<tr class="fail">.*?<code class="actual">(.*?)</code>.*?<code class="expected">(.*?)</code>`).FindStringSubmatch(p.Body)
	if row == nil || !strings.Contains(html.UnescapeString(row[1]), "6.1.7601") || !strings.Contains(html.UnescapeString(row[2]), ">=10.0.19041") {
		t.Fatalf("explain's failing check: %q\n%s", row, p.Body)
	}
	// Now, the same question is granted.
	if p := b.get("/console/explain?identity=" + st.identity + "&service=" + st.service + "&type=Bogus"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "Dial or Bind") {
		t.Fatalf("explain of type Bogus: %d %s", p.Status, p.Body)
	}
	// A question that cannot be answered is said on the form, which keeps
	// what was asked; a moment may be a duration before now.
	p = b.get("/console/explain?identity=" + st.identity + "&service=" + st.service + "&at=" + url.QueryEscape("2026-11-27 16:01:54"))
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `id="explain-error"`) || !strings.Contains(p.Body, "at must be a time") ||
		!strings.Contains(p.Body, `value="2026-11-27 16:01:54"`) || strings.Contains(p.Body, "Sign in</a>") {
		t.Fatalf("explain at a time it cannot read: %d %s", p.Status, p.Body)
	}
	if p := b.get("/console/explain?identity=" + st.identity + "&service=" + st.service + "&at=-1ms"); p.Status != http.StatusOK || !strings.Contains(p.Body, `id="decision"`) {
		t.Fatalf("explain a millisecond ago: %d %s", p.Status, p.Body)
	}
	if p := b.get("/console/explain?identity=nope&service=" + st.service); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "nope") {
		t.Fatalf("explain of an unknown identity: %d %s", p.Status, p.Body)
	}
	if p := b.get("/console/explain?identity=" + st.identity + "&service=" + st.service); !strings.Contains(p.Body, "Decision: <strong>granted</strong>") {
		t.Fatalf("explain now: %s", p.Body)
	}

	// Checks.
	if p := b.get("/console/checks"); p.Status != http.StatusOK || !strings.Contains(p.Body, "modern-windows") || !strings.Contains(p.Body, "&gt;=10.0.19041") ||
		!strings.Contains(p.Body, "Every check enforces") {
		t.Fatalf("checks: %d %s", p.Status, p.Body)
	}
	// A report-only MAC check that laptop-1 fails: the checks page shows
	// its enforceAt, its message and its impact; the fleet counts it.
	nic, enforceAt := reportOnlyNIC(t, n)
	p = b.get("/console/checks")
	impact := regexp.MustCompile(`(?s)<article class="impact" id="impact-` + nic + `">(.*?)</article>`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || impact == nil {
		t.Fatalf("checks: %d, no impact of the report-only check:\n%s", p.Status, p.Body)
	}
	for _, want := range []string{`datetime="` + enforceAt.Format(time.RFC3339Nano) + `"`, "Register your laptop&#39;s network card",
		`<span class="n failing-count">1</span>`, `<span class="n losing-count">1</span>`, ">laptop-1</a>", "wiki (Dial)"} {
		if !strings.Contains(impact[1], want) {
			t.Errorf("impact lacks %q:\n%s", want, impact[1])
		}
	}
	if !regexp.MustCompile(`<td>registered-nic</td><td data-label="Type">MAC</td><td data-label="Enforcement">report-only, enforced from <time`).MatchString(p.Body) {
		t.Errorf("the checks table does not show the check as report-only:\n%s", p.Body)
	}
	if p := b.get("/console/fleet"); !strings.Contains(p.Body, "<td>Check registered-nic</td><td>MAC</td><td>0</td><td>0</td><td>0</td><td>1</td>") {
		t.Errorf("fleet summary lacks the report-only failing count:\n%s", p.Body)
	}
	// Unknown identity: said, with a search of it as a name when names
	// start with it.
	if p := b.get("/console/identities/laptop"); p.Status != http.StatusNotFound || !strings.Contains(p.Body, "<title>Identity not found · postured</title>") ||
		!strings.Contains(p.Body, `<p class="error" role="alert">No identity has the id &#34;laptop&#34;.</p>`) || !strings.Contains(p.Body, `<a id="find" href="/console/fleet?name=laptop">`) {
		t.Fatalf("unknown identity, a name's beginning: %d\n%s", p.Status, p.Body)
	}
	if p := b.get("/console/identities/nope"); p.Status != http.StatusNotFound || strings.Contains(p.Body, `id="find"`) ||
		!strings.Contains(p.Body, `<p class="error" role="alert">No identity has the id &#34;nope&#34;, nor a name that starts with it.</p>`) {
		t.Fatalf("unknown identity: %d\n%s", p.Status, p.Body)
	}
	// An API session that never passed MFA, woke or unlocked says so.
	if p := b.get("/console/identities/" + st.identity); !strings.Contains(p.Body, "<td>"+st.apiSession+"</td><td>—</td><td>—</td><td>—</td>") {
		t.Errorf("laptop-1's API session without MFA, wake or unlock:\n%s", p.Body)
	}
	if p := b.get("/console/identities/" + st.identity + "?from=yesterday"); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "from must be a time") {
		t.Fatalf("bad window: %d %s", p.Status, p.Body)
	}

	// Sign out: the API session ends and the pages send to sign-in; the
	// browser is sent on to the sign-in page, which a reload gets again.
	p = b.post("/console/fleet", "/console/sign-out", url.Values{})
	if p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/sign-in?signed-out=1" {
		t.Fatalf("sign out: %d %v %s", p.Status, p.Header, p.Body)
	}
	if p := b.get(p.Header.Get("Location")); p.Status != http.StatusOK || !strings.Contains(p.Body, `<p class="notice" role="status">Signed out.</p>`) {
		t.Fatalf("after sign-out: %d %s", p.Status, p.Body)
	}
	if r := n.do(t, http.MethodGet, mgmt+"/current-api-session", token, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("the API session outlived sign-out: %d", r.Status)
	}
	if p := b.get("/console/fleet"); p.Status != http.StatusSeeOther {
		t.Fatalf("fleet after sign-out: %d", p.Status)
	}
}

// TestConsoleIdentityPageIsBounded: an identity's own requests make its
// history, and its page shows only the newest entries of the window, with
// a note that there are more.
func TestConsoleIdentityPageIsBounded(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "chatty")
	// 3,000 processes, each an entry of its own.
	for b := range 3 {
		procs := make([]map[string]any, 1000)
		for i := range procs {
			procs[i] = map[string]any{"id": "x", "typeId": "PROCESS", "path": fmt.Sprintf("/%d/%d", b, i), "isRunning": true}
		}
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response-bulk", ep.token, procs); r.Status != http.StatusCreated {
			t.Fatalf("bulk posture: %d %s", r.Status, r.Body)
		}
	}
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	b.signIn("admin", testAdminPassword)
	p := b.get("/console/identities/" + ep.id)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `id="more"`) {
		t.Fatalf("identity page: %d, no note of more events", p.Status)
	}
	rows := strings.Count(p.Body[strings.Index(p.Body, `<table id="events">`):], "<tr")
	if rows != 1+2000 { // the header and the newest entries
		t.Fatalf("%d rows in the events table, want 2000 and the header", rows-1)
	}
	// A window with fewer entries has no note.
	if p := b.get("/console/identities/" + ep.id + "?to=" + url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))); p.Status != http.StatusOK || strings.Contains(p.Body, `id="more"`) {
		t.Fatalf("a window before the wakes: %d, note: %v", p.Status, strings.Contains(p.Body, `id="more"`))
	}
}

// TestConsoleRefusesNonAdmins: a user's right password gets no console
// session, and the API session the attempt opened is ended.
func TestConsoleRefusesNonAdmins(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	n.createUser(t, "plain-user", "user-password", false)
	before := n.apiSessionsOf(t, "plain-user")
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	p := b.signIn("plain-user", "user-password")
	if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "for administrators") || b.sessionToken() != "" {
		t.Fatalf("non-admin sign-in: %d %v %s", p.Status, p.Header, p.Body)
	}
	if got := n.apiSessionsOf(t, "plain-user"); got != before {
		t.Fatalf("the refused sign-in left an API session: %d, had %d", got, before)
	}
	// A non-admin token in the cookie is refused too.
	u, _ := url.Parse(b.base)
	b.c.Jar.SetCookies(u, []*http.Cookie{{Name: console.SessionCookie, Value: n.login(t, api.ClientBase, "plain-user", "user-password"), Path: "/", Secure: true}})
	if p := b.get("/console/fleet"); p.Status != http.StatusForbidden {
		t.Fatalf("fleet with a non-admin session: %d %s", p.Status, p.Body)
	}
}

// TestConsoleMFA: an admin with MFA is asked for a code; pages wait for it;
// a wrong code is refused and the right one lets the admin in.
func TestConsoleMFA(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := useFakeClock(&cfg)
	n := startTestNode(t, cfg)
	tok := n.createUser(t, "mfa-admin", "admin-password", true)
	_, secret := n.enrollAndVerifyMFA(t, tok, clk)
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	p := b.signIn("mfa-admin", "admin-password")
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Header.Get("Location"), "/console/mfa") {
		t.Fatalf("sign in with MFA: %d %v", p.Status, p.Header)
	}
	if p := b.get("/console/fleet"); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/mfa" {
		t.Fatalf("fleet before the code: %d %v", p.Status, p.Header)
	}
	if p := b.post("/console/mfa", "/console/mfa", url.Values{"code": {wrongCode(t, secret, clk.Now())}}); p.Status != http.StatusUnauthorized {
		t.Fatalf("wrong code: %d %s", p.Status, p.Body)
	}
	// The code's page can be left: its session ends.
	if p := b.post("/console/mfa", "/console/sign-out", url.Values{}); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/sign-in?signed-out=1" || n.apiSessionsOf(t, "mfa-admin") != 1 {
		t.Fatalf("cancel at the code: %d %s", p.Status, p.Body)
	}
	if p = b.signIn("mfa-admin", "admin-password"); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in again: %d", p.Status)
	}
	if p := b.post("/console/mfa", "/console/mfa", url.Values{"code": {totpAt(t, secret, clk.Now())}, "next": {"/console/checks"}}); p.Status != http.StatusSeeOther || p.Header.Get("Location") != "/console/checks" {
		t.Fatalf("right code: %d %v %s", p.Status, p.Header, p.Body)
	}
	if p := b.get("/console/fleet"); p.Status != http.StatusOK {
		t.Fatalf("fleet after the code: %d", p.Status)
	}
}

// apiSessionsOf counts the API sessions of the identity with the name.
func (n *testNode) apiSessionsOf(t testing.TB, name string) int {
	t.Helper()
	sessions, err := n.store.APISessions()
	if err != nil {
		t.Fatal(err)
	}
	c := 0
	for _, s := range sessions {
		if id, err := n.store.Identity(s.IdentityID); err == nil && id.Name == name {
			c++
		}
	}
	return c
}

// TestConsoleBacktest edits the story's OS check on the checks page,
// backtests it through the console and reads the report: the form holds the
// check's PUT body, a form without the CSRF token and bodies the API refuses
// are answered on the form, and a stricter version shows laptop-1's grant as
// newly denied, linked to its timeline.
func TestConsoleBacktest(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}

	// The checks page links each check to its backtest form.
	p := b.get("/console/checks")
	link := regexp.MustCompile(`<a class="backtest" href="/console/checks/([^/"]+)/backtest">edit and backtest</a>`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || link == nil || strings.Contains(p.Body, `class="pending"`) {
		t.Fatalf("checks page: %d, no backtest link or still pending:\n%s", p.Status, p.Body)
	}
	check, form := link[1], "/console/checks/"+link[1]+"/backtest"

	// The form: the check's body as PUT takes it, and the last 7 days.
	p = b.get(form)
	area := regexp.MustCompile(`(?s)<textarea name="body"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || area == nil {
		t.Fatalf("form: %d, no textarea:\n%s", p.Status, p.Body)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(html.UnescapeString(area[1])), &body); err != nil {
		t.Fatalf("the textarea is not JSON: %v\n%s", err, area[1])
	}
	if body["typeId"] != "OS" || body["name"] != "modern-windows" || body["operatingSystems"] == nil || body["id"] != nil || body["createdAt"] != nil || body["_links"] != nil {
		t.Fatalf("the form's body is not the check's PUT body: %v", body)
	}
	if !strings.Contains(area[1], "\n  &#34;") {
		t.Errorf("the body is not pretty JSON: %s", area[1])
	}
	from := regexp.MustCompile(`name="from" id="from" value="([^"]+)"`).FindStringSubmatch(p.Body)
	if from == nil {
		t.Fatalf("no from field:\n%s", p.Body)
	}
	if at, err := time.Parse(time.RFC3339, from[1]); err != nil || time.Since(at) < 7*24*time.Hour-time.Minute || time.Since(at) > 7*24*time.Hour+time.Minute {
		t.Fatalf("from %q is not a week ago", from[1])
	}

	// Without the CSRF token: refused, and no job.
	stricter := strings.Replace(html.UnescapeString(area[1]), ">=10.0.19041", ">=10.0.22000", 1)
	if p := b.do(http.MethodPost, form, url.Values{"body": {stricter}, "from": {from[1]}}); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "CSRF") {
		t.Fatalf("backtest without the CSRF token: %d %s", p.Status, p.Body)
	}
	// Not JSON: said on the form, what was typed kept and escaped.
	p = b.post(form, form, url.Values{"body": {`{"name": "</textarea><script>alert(1)</script>`}, "from": {from[1]}})
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "is not JSON") || strings.Contains(p.Body, "<script>alert") ||
		!strings.Contains(p.Body, "&lt;/textarea&gt;&lt;script&gt;alert(1)") {
		t.Fatalf("a body that is not JSON: %d %s", p.Status, p.Body)
	}
	// A body the API refuses: its reason and the field's path.
	p = b.post(form, form, url.Values{"body": {`{"typeId": "OS", "name": "modern-windows", "operatingSystems": [{"type": "Windows", "versions": ["<b>newest</b>"]}]}`}, "from": {from[1]}})
	errLine := regexp.MustCompile(`<p class="error" id="backtest-error">(.*?)</p>`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusBadRequest || errLine == nil || !strings.Contains(errLine[1], "<code>postureChecks.update."+check+".operatingSystems") ||
		strings.Contains(p.Body, "<b>newest") {
		t.Fatalf("an invalid body: %d %q\n%s", p.Status, errLine, p.Body)
	}
	// An unknown check: the API's 404, on the form.
	if p := b.post(form, "/console/checks/nope/backtest", url.Values{"body": {stricter}}); p.Status != http.StatusNotFound ||
		!strings.Contains(p.Body, `id="backtest-error"`) {
		t.Fatalf("an unknown check: %d %s", p.Status, p.Body)
	}
	// A window that is not one.
	if p := b.post(form, form, url.Values{"body": {stricter}, "from": {"last week"}}); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "from must be a time") {
		t.Fatalf("a bad from: %d %s", p.Status, p.Body)
	}

	// The stricter check: the job starts and its page follows it.
	p = b.post(form, form, url.Values{"body": {stricter}, "from": {from[1]}, "name": {"modern-windows"}})
	loc := regexp.MustCompile(`^/console/backtests/([^/?]+)\?check=` + check + `$`).FindStringSubmatch(p.Header.Get("Location"))
	if p.Status != http.StatusSeeOther || loc == nil {
		t.Fatalf("start: %d %v %s", p.Status, p.Header, p.Body)
	}
	if p := b.get(loc[0]); p.Status != http.StatusOK || strings.Contains(p.Body, "Status: <strong>running</strong>") != strings.Contains(p.Body, `<meta http-equiv="refresh"`) {
		t.Fatalf("job page: %d, the refresh does not follow the status:\n%s", p.Status, p.Body)
	}
	// Wait for the job's end through the API (the barrier), then read the
	// report on the console.
	admin := n.adminToken(t)
	if r := n.do(t, http.MethodGet, mgmt+"/backtests/"+loc[1]+"?wait=60", admin, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"status":"done"`) {
		t.Fatalf("job: %d %s", r.Status, r.Body)
	}
	p = b.get(loc[0])
	if p.Status != http.StatusOK || strings.Contains(p.Body, `http-equiv="refresh"`) || !strings.Contains(p.Body, "Status: <strong>done</strong>") {
		t.Fatalf("finished job page: %d %s", p.Status, p.Body)
	}
	for _, want := range []string{
		`<span class="n" id="decisions">2</span>`, `<span class="n" id="newly-denied">1</span>newly denied (1 identity)`,
		`<span class="n" id="newly-allowed">0</span>newly allowed (0 identities)`,
		"<td>Service crm</td><td>1</td><td>1</td><td>0</td><td>0</td>",
		`<tr class="edited"><td>Check modern-windows (OS) <strong class="tag">edited</strong></td><td>1</td><td>1</td><td>0</td><td>0</td>`,
		`<pre id="candidate-body">` + template.HTMLEscapeString(stricter) + `</pre>`,
		`<td><a href="/console/identities/` + st.identity + `">laptop-1</a></td>`,
		"<code>Windows 10.0.19045</code>",
		"<td>granted</td><td><strong>denied</strong></td>",
	} {
		if !strings.Contains(p.Body, want) {
			t.Errorf("report lacks %s", want)
		}
	}
	// Again: the form holds the stricter body that was tested, not the
	// stored check's.
	again := regexp.MustCompile(`<a id="again" href="([^"]+)"`).FindStringSubmatch(p.Body)
	if again == nil {
		t.Fatalf("no link to backtest the candidate again:\n%s", p.Body)
	}
	if p := b.get(html.UnescapeString(again[1])); p.Status != http.StatusOK || !strings.Contains(p.Body, template.HTMLEscapeString(stricter)+"</textarea>") {
		t.Fatalf("again does not open the form with the candidate: %d\n%s", p.Status, p.Body)
	}
	// The changed decision links to laptop-1's timeline around it, at its
	// event, and the timeline has that event.
	tl := regexp.MustCompile(`<a href="(/console/identities/` + st.identity + `\?from=[^"#]+#event-(\d+))"><time`).FindStringSubmatch(p.Body)
	if tl == nil {
		t.Fatalf("no timeline link in the changes:\n%s", p.Body)
	}
	target := html.UnescapeString(tl[1])
	if p := b.get(target[:strings.Index(target, "#")]); p.Status != http.StatusOK || !strings.Contains(p.Body, `id="event-`+tl[2]+`"`) {
		t.Fatalf("the timeline of the change lacks event %s: %d\n%s", tl[2], p.Status, p.Body)
	}
	if p := b.get("/console/backtests/nope"); p.Status != http.StatusNotFound {
		t.Fatalf("unknown job: %d %s", p.Status, p.Body)
	}
}

// TestConsoleIdentityWindow: the window the identity page shows can be
// submitted again as it is, even when its inputs, which hold whole seconds,
// show the same second twice; a window that is not one is said beside the
// form, which keeps what was typed; the events table names each event's API
// session, and an empty window says so.
func TestConsoleIdentityWindow(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	b.signIn("admin", testAdminPassword)
	page := "/console/identities/" + st.identity
	p := b.get(page)
	input := func(body, name string) string {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no %s input:\n%s", name, body)
		}
		return m[1]
	}
	events := func(body string) int {
		i := strings.Index(body, `<table id="events">`)
		if i < 0 {
			return 0
		}
		return strings.Count(body[i:strings.Index(body[i:], "</table>")+i], "<tr") - 1
	}
	all := events(p.Body)
	if p.Status != http.StatusOK || all == 0 {
		t.Fatalf("identity page: %d, %d events", p.Status, all)
	}
	// The window's inputs are text, in RFC 3339 (UTC), not the browser's
	// local date pickers.
	if strings.Contains(p.Body, "datetime-local") {
		t.Errorf("the window's inputs are date pickers:\n%s", p.Body)
	}
	for _, name := range []string{"from", "to"} {
		if v := input(p.Body, name); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`).MatchString(v) {
			t.Errorf("the %s input holds %q", name, v)
		}
	}
	// Show, as the page is: the same events.
	q := url.Values{"from": {input(p.Body, "from")}, "to": {input(p.Body, "to")}}
	if p := b.get(page + "?" + q.Encode()); p.Status != http.StatusOK || events(p.Body) != all {
		t.Fatalf("the page's own window: %d, %d events, want %d\n%s", p.Status, events(p.Body), all, p.Body)
	}
	// From and to in the same second: that second's events.
	second := st.deniedAt.UTC().Format("2006-01-02T15:04:05")
	p = b.get(page + "?from=" + second + "&to=" + second)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "mark denied") {
		t.Fatalf("a window of one second, %s: %d\n%s", second, p.Status, p.Body)
	}
	// The events name their API session.
	if !strings.Contains(p.Body, "<th>API session</th>") || !strings.Contains(p.Body, `<td data-label="API session"><code>`+st.apiSession+"</code></td>") {
		t.Errorf("the events table does not name the API session %s:\n%s", st.apiSession, p.Body)
	}
	// The tables' moments are as wide as each other: UTC to the
	// millisecond, the whole moment in the <time> element.
	stamps := regexp.MustCompile(`<td(?: class="when")?><time datetime="([^"]+)" title="([^"]+)">([^<]*)</time></td>`)
	p = b.get(page)
	rows := stamps.FindAllStringSubmatch(p.Body, -1)
	if len(rows) < events(p.Body)+1 { // the events and the failed request
		t.Fatalf("%d moments in <time> elements, for %d events and a failed request:\n%s", len(rows), events(p.Body), p.Body)
	}
	for _, m := range rows {
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || m[2] != m[1] || m[3] != at.Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("a table's moment: %q (%v)", m[0], err)
		}
	}
	// A reversed window: said beside the form, which keeps it.
	from := st.deniedAt.Add(time.Hour).UTC().Format("2006-01-02T15:04:05")
	p = b.get(page + "?from=" + from + "&to=" + second)
	if p.Status != http.StatusBadRequest || !strings.Contains(p.Body, `<p class="error" id="window-error" role="alert">from must be before to</p>`) ||
		!strings.Contains(p.Body, `name="from" value="`+from+`"`) || !strings.Contains(p.Body, `name="to" value="`+second+`"`) ||
		!strings.Contains(p.Body, "<h1>laptop-1</h1>") || strings.Contains(p.Body, `<svg id="timeline"`) {
		t.Fatalf("a reversed window: %d\n%s", p.Status, p.Body)
	}
	// A moment it cannot read: said beside its input, which keeps it.
	p = b.get(page + "?from=garbage")
	if p.Status != http.StatusBadRequest || input(p.Body, "from") != "garbage" || !strings.Contains(p.Body, `aria-invalid="true" aria-describedby="window-error"`) ||
		!regexp.MustCompile(`(?s)<form method="get" class="window">.*<p class="error" id="window-error" role="alert">from must be a time[^<]*</p>\s*</form>`).MatchString(p.Body) {
		t.Fatalf("from=garbage: %d\n%s", p.Status, p.Body)
	}
	// Before now, as the docs say: the window, and the input keeps -2h.
	// An empty to, as the form sends it, stays empty: now, at every reload.
	for _, query := range []string{"?from=-2h", "?from=-2h&to="} {
		p = b.get(page + query)
		if p.Status != http.StatusOK || input(p.Body, "from") != "-2h" || input(p.Body, "to") != "" || events(p.Body) != all {
			t.Fatalf("%s: %d, %d events, want %d\n%s", query, p.Status, events(p.Body), all, p.Body)
		}
	}
	// A window without events says so.
	p = b.get(page + "?to=" + url.QueryEscape(st.deniedAt.Add(-time.Hour).UTC().Format(time.RFC3339)))
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `<p id="no-events">None in the window.</p>`) {
		t.Fatalf("an empty window: %d\n%s", p.Status, p.Body)
	}
}

// TestConsoleExplainByName: explain takes an identity's and a service's name
// as well as their ids, says on the form when neither names one or when
// the identity did not exist at the moment, keeps a service that no policy
// grants the identity as the one chosen, and says what no-permission means.
func TestConsoleExplainByName(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	hr := n.create(t, n.adminToken(t), "services", map[string]any{"name": "hr"})
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	b.signIn("admin", testAdminPassword)

	p := b.get("/console/explain?identity=laptop-1&service=" + st.service)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Decision: <strong>granted</strong>") ||
		!strings.Contains(p.Body, `name="identity" value="`+st.identity+`"`) {
		t.Fatalf("explain by name: %d\n%s", p.Status, p.Body)
	}
	p = b.get("/console/explain?identity=laptop-9")
	if p.Status != http.StatusNotFound || !strings.Contains(p.Body, `id="explain-error" role="alert">No identity has the id or name &#34;laptop-9&#34;.</p>`) ||
		!strings.Contains(p.Body, `name="identity" value="laptop-9"`) {
		t.Fatalf("explain of a name no identity has: %d\n%s", p.Status, p.Body)
	}
	// hr is granted to no one: the select keeps it chosen, and crm too.
	selected := regexp.MustCompile(`<option value="([^"]+)" selected>([^<]*)</option>`)
	p = b.get("/console/explain?identity=" + st.identity + "&service=" + hr)
	if m := selected.FindAllStringSubmatch(p.Body, -1); len(m) != 1 || m[0][1] != hr || m[0][2] != "hr (not granted to this identity)" {
		t.Fatalf("explain of a service not granted: %d, selected %q\n%s", p.Status, m, p.Body)
	}
	p = b.get("/console/explain?identity=" + st.identity + "&service=" + st.service)
	if m := selected.FindAllStringSubmatch(p.Body, -1); len(m) != 1 || m[0][1] != st.service || m[0][2] != "crm" {
		t.Fatalf("explain of crm: selected %q", m)
	}
	// The service by its name, as the identity: answered, and asked again
	// by id; the choice lists crm once.
	p = b.get("/console/explain?identity=laptop-1&service=crm")
	if m := selected.FindAllStringSubmatch(p.Body, -1); p.Status != http.StatusOK || !strings.Contains(p.Body, "Decision: <strong>granted</strong>") ||
		len(m) != 1 || m[0][1] != st.service || m[0][2] != "crm" || strings.Count(p.Body, ">crm") != 1 || strings.Contains(p.Body, "no such service") {
		t.Fatalf("explain of the service crm by name: %d, selected %q\n%s", p.Status, m, p.Body)
	}
	// A name no service has: said, with what was asked kept.
	p = b.get("/console/explain?identity=laptop-1&service=payroll")
	if p.Status != http.StatusNotFound || !strings.Contains(p.Body, `No service has the id or name &#34;payroll&#34; now`) ||
		!regexp.MustCompile(`<option value="payroll" selected>payroll \(no service has this id or name now\)</option>`).MatchString(p.Body) ||
		strings.Contains(p.Body, "ids, not names") {
		t.Fatalf("explain of a service nobody has: %d\n%s", p.Status, p.Body)
	}
	// Before the identity existed: said in words, with its creation (asked
	// by its name, which no identity had as its id).
	laptop, err := n.store.Identity(st.identity)
	if err != nil {
		t.Fatal(err)
	}
	before := laptop.CreatedAt.Add(-time.Hour).UTC().Truncate(time.Second)
	p = b.get("/console/explain?identity=laptop-1&service=crm&at=" + url.QueryEscape(before.Format(time.RFC3339)))
	want := "No identity had the id &#34;laptop-1&#34; at " + before.Format("2006-01-02T15:04:05") + ".999Z, and the identity named laptop-1 (id " +
		st.identity + ") was created later, at " + laptop.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z") + "."
	if p.Status != http.StatusNotFound || !strings.Contains(p.Body, want) || strings.Contains(p.Body, "ids, not names") || strings.Contains(p.Body, `id="resolved"`) {
		t.Fatalf("explain before laptop-1 existed: %d, want %q\n%s", p.Status, want, p.Body)
	}
	// The second it was created in, written whole, is the end of that
	// second, as on the command line and the API: it existed then.
	created := laptop.CreatedAt.UTC().Truncate(time.Second)
	p = b.get("/console/explain?identity=laptop-1&service=crm&at=" + url.QueryEscape(created.Format(time.RFC3339)))
	if p.Status != http.StatusOK || strings.Contains(p.Body, "did not exist") || !strings.Contains(p.Body, created.Format("2006-01-02T15:04:05")+".999Z") {
		t.Fatalf("explain at the second laptop-1 was created in: %d\n%s", p.Status, p.Body)
	}
	// Bind, where only Dial is granted: the decision in words.
	p = b.get("/console/explain?identity=laptop-1&service=crm&type=Bind")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "Decision: <strong>no-permission</strong>") ||
		!strings.Contains(p.Body, "No Bind service policy granted laptop-1 the service crm at that moment") ||
		!strings.Contains(p.Body, `id="other-type"`) {
		t.Fatalf("explain Bind: %d\n%s", p.Status, p.Body)
	}
}

// TestConsoleFleetByName finds identities on the fleet page by their name:
// an exact name, the beginning of names (in name order, at most a page,
// saying when there are more), and a name nobody has; the search is said
// back, escaped.
func TestConsoleFleetByName(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	ids := map[string]string{}
	for i := range 55 {
		name := fmt.Sprintf("kiosk-%02d", i)
		ids[name] = n.create(t, admin, "identities", map[string]any{"name": name, "type": "Device"})
	}
	ids["kiosk"] = n.create(t, admin, "identities", map[string]any{"name": "kiosk", "type": "Device"})
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}
	if p := b.get("/console/fleet"); p.Status != http.StatusOK || !strings.Contains(p.Body, `<input name="name" id="name-search"`) {
		t.Fatalf("the fleet page has no name search: %d\n%s", p.Status, p.Body)
	}
	listed := func(body string) []string {
		table := regexp.MustCompile(`(?s)<table id="identities">.*?</table>`).FindString(body)
		var out []string
		for _, m := range regexp.MustCompile(`<a href="/console/identities/([^"]+)">([^<]+)</a>`).FindAllStringSubmatch(table, -1) {
			if ids[m[2]] != "" && ids[m[2]] != m[1] {
				t.Errorf("%s links to %s, not its id %s", m[2], m[1], ids[m[2]])
			}
			out = append(out, m[2])
		}
		return out
	}
	// A beginning: the names that start with it, in name order.
	p := b.get("/console/fleet?name=kiosk-1")
	if got := strings.Join(listed(p.Body), " "); p.Status != http.StatusOK || got != "kiosk-10 kiosk-11 kiosk-12 kiosk-13 kiosk-14 kiosk-15 kiosk-16 kiosk-17 kiosk-18 kiosk-19" ||
		!strings.Contains(p.Body, `10 identities whose name is or starts with <q>kiosk-1</q>`) || !strings.Contains(p.Body, `value="kiosk-1"`) ||
		strings.Contains(p.Body, `id="next-page"`) {
		t.Fatalf("kiosk-1: %d %q\n%s", p.Status, got, p.Body)
	}
	// An exact name that others start with: it first.
	p = b.get("/console/fleet?name=kiosk")
	if got := listed(p.Body); len(got) != 50 || got[0] != "kiosk" || got[1] != "kiosk-00" || got[49] != "kiosk-48" ||
		!strings.Contains(p.Body, "The first 50 identities whose name is or starts with <q>kiosk</q>") || !strings.Contains(p.Body, "there are more") {
		t.Fatalf("kiosk: %d %q\n%s", p.Status, got, p.Body)
	}
	if p := b.get("/console/fleet?name=admin"); strings.Join(listed(p.Body), " ") != "admin" || !strings.Contains(p.Body, "1 identity whose name") {
		t.Fatalf("admin: %d\n%s", p.Status, p.Body)
	}
	// Nobody: said, escaped, and no table.
	p = b.get("/console/fleet?name=" + url.QueryEscape("<b>nobody"))
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "No identity's name is or starts with <q>&lt;b&gt;nobody</q>") ||
		strings.Contains(p.Body, `<table id="identities">`) || strings.Contains(p.Body, "<b>nobody") {
		t.Fatalf("nobody: %d\n%s", p.Status, p.Body)
	}
	// Without a search, the fleet's pages list every identity once, in
	// name order (admin, kiosk, kiosk-00 ... kiosk-54).
	var all []string
	next := "/console/fleet"
	for pages := 0; next != ""; pages++ {
		p := b.get(next)
		all = append(all, listed(p.Body)...)
		next = ""
		if m := regexp.MustCompile(`<a id="next-page" href="([^"]+)">`).FindStringSubmatch(p.Body); m != nil {
			next = html.UnescapeString(m[1])
		}
		if pages > 3 {
			t.Fatal("more pages than identities")
		}
	}
	if len(all) != 57 || all[0] != "admin" || all[1] != "kiosk" || all[2] != "kiosk-00" || all[56] != "kiosk-54" || !slices.IsSorted(all) {
		t.Fatalf("the fleet's pages: %q", all)
	}
}

// graceStory runs a node on a fake clock where laptop-1, with an MFA check
// that prompts on wake, passed MFA, woke a minute later and is a minute
// into its 5-minute grace window; it returns the node, laptop-1 and when it
// woke.
func graceStory(t *testing.T) (*testNode, endpoint, time.Time) {
	t.Helper()
	cfg := defaultTestConfig(t.TempDir())
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	cfg.clock = clk
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	svc := n.create(t, admin, "services", map[string]any{"name": "woken"})
	onWake := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-wake", "promptOnWake": true})
	n.create(t, admin, "service-policies", map[string]any{"name": "woken", "type": "Dial", "identityRoles": []string{"#laptops"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + onWake}})
	ep := n.endpoint(t, admin, "laptop-1", "laptops")
	if _, err := n.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	woke := clk.Now()
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "ENDPOINT_STATE", "id": "0", "woken": true}); r.Status != http.StatusCreated {
		t.Fatalf("wake: %d %s", r.Status, r.Body)
	}
	clk.Advance(time.Minute)
	if err := n.store.WaitFor(t.Context(), n.lastSeq(t)); err != nil {
		t.Fatal(err)
	}
	return n, ep, woke
}

// TestConsoleRunningGrace: an API session woken after its MFA pass is in a
// grace window until its deadline (the fleet page lists it); the identity's
// timeline draws that running grace from the wake to now, marked running,
// before the deadline passes.
func TestConsoleRunningGrace(t *testing.T) {
	n, ep, woke := graceStory(t)
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}
	until := woke.Add(5 * time.Minute).UTC()
	if p := b.get("/console/fleet"); !strings.Contains(p.Body, `<td><a href="/console/identities/`+ep.id+`">laptop-1</a></td><td>`+ep.apiSessionID+`</td><td><time datetime="`+until.Format(time.RFC3339Nano)+`" title="`+until.Format(time.RFC3339Nano)+`">`+until.Format("2006-01-02T15:04:05.000Z")+"</time></td>") {
		t.Fatalf("the fleet page does not list laptop-1 in a grace window until %s:\n%s", until, p.Body)
	}
	p := b.get("/console/identities/" + ep.id)
	running := regexp.MustCompile(`<rect class="seg grace running" x="(\d+)" y="\d+" width="(\d+)" height="16"><title>([^<]*)</title>`).FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || running == nil {
		t.Fatalf("no running grace on the timeline: %d\n%s", p.Status, p.Body)
	}
	if want := "endpoint woken: grace running, until " + until.Format("2006-01-02T15:04:05.000Z"); !strings.Contains(running[3], want) {
		t.Errorf("running grace titled %q, want %q", running[3], want)
	}
	if w, _ := strconv.Atoi(running[2]); w <= 2 {
		t.Errorf("the running grace is not drawn to now: width %d", w)
	}
}

// TestConsoleFreshNode: on a node without checks or policies the checks
// page says there are none and how to create one (not that every check
// enforces), and the fleet's posture summary says it has nothing yet
// instead of an empty table.
func TestConsoleFreshNode(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}
	p := b.get("/console/checks")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `<p id="no-checks">There are no posture checks yet.`) ||
		!strings.Contains(p.Body, "POST /edge/management/v1/posture-checks") ||
		strings.Contains(p.Body, "Every check enforces") || strings.Contains(p.Body, `<table id="checks">`) {
		t.Fatalf("checks on a fresh node: %d\n%s", p.Status, p.Body)
	}
	p = b.get("/console/fleet")
	if p.Status != http.StatusOK || !strings.Contains(p.Body, `<p id="no-summary">Nothing to summarize yet`) || strings.Contains(p.Body, `<table id="summary">`) {
		t.Fatalf("fleet on a fresh node: %d\n%s", p.Status, p.Body)
	}
}

// TestConsoleIdentityQuiet: the identity page's default window is the 24
// hours up to the identity's last event, not to now, when that event is
// long ago.
func TestConsoleIdentityQuiet(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	cfg.clock = clk
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	ep := n.endpoint(t, admin, "laptop-quiet", "laptops")
	if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"id": "x", "typeId": "OS", "type": "Windows", "version": "10.0.19045"}); r.Status != http.StatusCreated {
		t.Fatalf("posture: %d %s", r.Status, r.Body)
	}
	// Its API session ends, so that nothing happens to it later.
	if r := n.do(t, http.MethodDelete, clientAPI+"/current-api-session", ep.token, nil); r.Status/100 != 2 {
		t.Fatalf("sign out: %d %s", r.Status, r.Body)
	}
	if err := n.store.WaitFor(t.Context(), n.lastSeq(t)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(72 * time.Hour)
	b := newConsoleBrowser(t, n, consoleServer(t, n))
	if p := b.signIn("admin", testAdminPassword); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in: %d %s", p.Status, p.Body)
	}
	p := b.get("/console/identities/" + ep.id)
	if p.Status != http.StatusOK || strings.Contains(p.Body, `id="no-events"`) || !strings.Contains(p.Body, "Windows 10.0.19045") ||
		!strings.Contains(p.Body, `<svg id="timeline"`) || !strings.Contains(p.Body, `class="mark fact"`) {
		t.Fatalf("the page of an identity quiet for 3 days: %d\n%s", p.Status, p.Body)
	}
}
