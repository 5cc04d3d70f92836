package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var consoleScreenshots = flag.Bool("console-screenshots", false, "write the console browser test's screenshots to docs/")

// chromiumPath is Debian's chromium, or "" when it is not installed. A
// machine without it skips the browser tests, except in CI (CI=true),
// where .ci/run installs it and its absence is a failure.
func chromiumPath(t *testing.T) string {
	for _, p := range []string{"/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install chromium); CI runs the browser tests")
	}
	t.Skip("chromium is not installed: browser tests skipped (apt-get install chromium to run them)")
	return ""
}

// newBrowser starts a headless chromium that trusts the node's server
// certificate (by its public key) and nothing else that is not publicly
// trusted.
func newBrowser(t *testing.T, n *testNode) context.Context {
	leaf, err := x509.ParseCertificate(n.serverCert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, which lives as long as the
	// context of that action: no timeout on it, one on what follows.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancelTimeout)
	return ctx
}

// shot saves a screenshot of the page: to docs/ with -console-screenshots,
// to the test's temporary directory otherwise (taking it still proves the
// page renders).
func shot(dir, name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.FullScreenshot(100)(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644)
	})
}

// browse runs steps in the browser and fails the test with what they were
// for when one fails.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// read returns the text of the first element the CSS selector matches.
func read(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return v
}

// TestConsoleInABrowser is the console's story in a real Chromium: sign
// in, see the fleet, open the identity of a deny-then-grant story and find
// the denial on its timeline at its moment, open explain from it and read
// the failing check's actual and expected values, sign out; a forged CSRF
// token and a non-admin are refused.
func TestConsoleInABrowser(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	st := denyThenGrant(t, n)
	long := longNamedService(t, n, st)
	n.createUser(t, "plain-user", "user-password", false)
	srv := consoleServer(t, n)
	// The browser reaches the node by the name on its certificate.
	base := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	ctx := newBrowser(t, n)
	dir := t.TempDir()
	if *consoleScreenshots {
		dir = filepath.Join("..", "..", "docs")
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	browse(t, ctx, "sign in",
		chromedp.Navigate(base+"/console/fleet"),
		chromedp.WaitVisible(css("#username")),
		shot(dir, "sign-in"),
		chromedp.SendKeys(css("#username"), "admin"),
		chromedp.SendKeys(css("#password"), testAdminPassword),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("#identities")),
		shot(dir, "fleet"),
	)
	if fleet := read(t, ctx, "main"); !strings.Contains(fleet, "laptop-1") || !strings.Contains(fleet, "laptops-dial-crm") {
		t.Fatalf("fleet page: %s", fleet)
	}
	// The fleet's last failed requests hold laptop-1's denial.
	if failures := read(t, ctx, "#failures"); !strings.Contains(failures, "laptop-1") || !strings.Contains(failures, "laptops-dial-crm") || !strings.Contains(failures, "crm (Dial)") {
		t.Fatalf("fleet failures: %s", failures)
	}

	// The identity's timeline shows the denial at its moment; focusing it
	// shows its event.
	browse(t, ctx, "identity page",
		chromedp.Click(chromedp.Search(`//table[@id="identities"]//a[text()="laptop-1"]`)),
		chromedp.WaitVisible(css("#timeline")),
		chromedp.Focus(css("#timeline a.mark.denied")),
		shot(dir, "identity"),
	)
	deniedAt, err := chromedp.Run(ctx, chromedp.AttributeValue(css("#timeline a.mark.denied"), "data-at"))
	if err != nil {
		t.Fatal(err)
	}
	at, err := time.Parse(time.RFC3339Nano, deniedAt.Value)
	if err != nil || at.Truncate(time.Millisecond) != st.deniedAt.Truncate(time.Millisecond) {
		t.Fatalf("denial on the timeline at %q, want %s", deniedAt.Value, st.deniedAt)
	}
	if detail := read(t, ctx, "#event-detail"); !strings.Contains(detail, "denied") {
		t.Fatalf("focusing the denial shows %q", detail)
	}
	// Every mark, whatever its shape, shows that it has the focus; the
	// timeline's links are not hidden from screen readers (as the
	// children of an image are); lane labels end before the plot.
	tl, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Role       string
		Marks      int
		Unringed   []string
		Ringed     []string
		LabelRight float64
		LongTitle  string
	}](`(() => {
		const svg = document.getElementById("timeline");
		const out = {Role: svg.getAttribute("role"), Marks: 0, Unringed: [], Ringed: [], LabelRight: 0, LongTitle: ""};
		const ring = a => { const r = a.querySelector(".ring"); return r ? getComputedStyle(r).stroke : "none"; };
		for (const a of svg.querySelectorAll("a.mark")) {
			out.Marks++;
			a.focus();
			if (document.activeElement !== a || ring(a) === "none") { out.Unringed.push(a.getAttribute("class")); }
			a.blur();
			if (ring(a) !== "none") { out.Ringed.push(a.getAttribute("class")); }
		}
		for (const t of svg.querySelectorAll("text.lanelabel")) {
			const b = t.getBBox();
			out.LabelRight = Math.max(out.LabelRight, b.x + b.width);
			const title = t.querySelector("title");
			if (title) { out.LongTitle = title.textContent; }
		}
		return out;
	})()`))
	if err != nil {
		t.Fatalf("focus each mark: %v", err)
	}
	if tl.Role == "img" || tl.Marks < 4 || len(tl.Unringed) > 0 || len(tl.Ringed) > 0 {
		t.Fatalf("timeline: role %q, %d marks, not shown focused: %v, shown focused without the focus: %v", tl.Role, tl.Marks, tl.Unringed, tl.Ringed)
	}
	if tl.LabelRight > 176 || tl.LongTitle != "Service wiki-with-a-rather-long-service-name-for-layout" {
		t.Fatalf("lane labels end at %.1f (the plot starts at 180); the long one's title: %q", tl.LabelRight, tl.LongTitle)
	}

	// Explain, opened from the denial: the failing check's values.
	browse(t, ctx, "open the denial", chromedp.Click(css("#timeline a.mark.denied")))
	browse(t, ctx, "explain",
		chromedp.WaitVisible(css("#explanation")),
		shot(dir, "explain"),
	)
	decision, actual, expected := read(t, ctx, "#decision"), read(t, ctx, "tr.fail code.actual"), read(t, ctx, "tr.fail code.expected")
	if !strings.Contains(decision, "denied") || !strings.Contains(actual, "6.1.7601") || !strings.Contains(expected, ">=10.0.19041") {
		t.Fatalf("explain: decision %q, actual %q, expected %q", decision, actual, expected)
	}

	// Checks, with a report-only check's impact, then the identity page
	// at a phone's width.
	nic, _ := reportOnlyNIC(t, n)
	browse(t, ctx, "checks and a phone",
		chromedp.Navigate(base+"/console/checks"),
		chromedp.WaitVisible(css("#checks")),
		chromedp.WaitVisible(css("#impact-"+nic+" table.impact-identities")),
		shot(dir, "checks"),
	)
	if impact := read(t, ctx, "#impact-"+nic); !strings.Contains(impact, "laptop-1") || !strings.Contains(impact, "wiki (Dial)") ||
		!strings.Contains(impact, "Register your laptop's network card") {
		t.Fatalf("impact of the report-only check: %s", impact)
	}
	// Backtest a stricter modern-windows from its row: laptop-1's grant
	// would have been denied.
	browse(t, ctx, "backtest form",
		chromedp.Click(chromedp.Search(`//table[@id="checks"]//tr[td[1][text()="modern-windows"]]//a[@class="backtest"]`)),
		chromedp.WaitVisible(css("#candidate")),
	)
	body, err := chromedp.Run(ctx, chromedp.Value(css("#candidate")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, `">=10.0.19041"`) {
		t.Fatalf("the form's body: %s", body)
	}
	browse(t, ctx, "run the backtest",
		chromedp.SetValue(css("#candidate"), strings.Replace(body, ">=10.0.19041", ">=10.0.22000", 1)),
		shot(dir, "backtest"),
		chromedp.Click(css("#run-backtest")),
		chromedp.WaitVisible(css("#changes")),
		shot(dir, "backtest-report"),
	)
	report, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
	if err != nil {
		t.Fatal(err)
	}
	if denied := read(t, ctx, "#newly-denied"); denied != "1" {
		t.Fatalf("newly denied: %q", denied)
	}
	if changes := read(t, ctx, "#changes-table"); !strings.Contains(changes, "laptop-1") || !strings.Contains(changes, "granted") || !strings.Contains(changes, "denied") {
		t.Fatalf("changes: %s", changes)
	}
	// On a phone: no page is wider than the screen; the timeline, wider,
	// opens at its newest end; the checks' action is in view.
	fits := func(what string) {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil || v[0] > v[1] {
			t.Errorf("%s on a phone: %v wide in a %v wide window (%v)", what, v[0], v[1], err)
		}
	}
	// Nor is any table wider than its box (a table that scrolls in its
	// box, at a phone's width, hides what is past the edge).
	fitsTables := func(what string) {
		t.Helper()
		fits(what)
		cut, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("main table")].filter(t => {
			const box = t.closest(".scroll") || t.parentElement;
			return t.getBoundingClientRect().right > box.getBoundingClientRect().right + 0.5;
		}).map(t => t.id || t.className)`))
		if err != nil || len(cut) > 0 {
			t.Errorf("%s on a phone: tables wider than their box: %v (%v)", what, cut, err)
		}
	}
	browse(t, ctx, "a phone",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/console/identities/"+st.identity),
		chromedp.WaitVisible(css("#timeline")),
		shot(dir, "identity-phone"),
	)
	fitsTables("the identity page")
	if ends, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => {
		const box = document.querySelector("div.timeline").getBoundingClientRect(), svg = document.getElementById("timeline").getBoundingClientRect();
		return [svg.width, box.width, svg.right, box.right];
	})()`)); err != nil || ends[0] <= ends[1] || ends[2] > ends[3]+1 {
		t.Errorf("the timeline on a phone (svg width, box width, svg right, box right): %v (%v): not at its newest end", ends, err)
	}
	// Its lane labels stay in view, each beside its lane, over the newest
	// end; the events' API session and summary are in view.
	phone, err := chromedp.Run(ctx, chromedp.Evaluate[struct {
		Lanes   int
		Hidden  []string
		Apart   []float64
		Cells   int
		Outside []string
	}](`(() => {
		const out = {Lanes: 0, Hidden: [], Apart: [], Cells: 0, Outside: []};
		const lanes = [...document.querySelectorAll("#timeline text.lanelabel")];
		const labels = [...document.querySelectorAll("svg.tl-labels text.lanelabel")];
		out.Lanes = lanes.length;
		labels.forEach((t, i) => {
			const b = t.getBoundingClientRect();
			const el = document.elementFromPoint(b.left + Math.min(b.width / 2, 20), b.top + b.height / 2);
			if (b.width === 0 || !el || !el.closest("svg.tl-labels")) { out.Hidden.push(t.textContent); }
			const l = lanes[i] ? lanes[i].getBoundingClientRect() : null;
			const apart = l ? Math.abs((l.top + l.bottom) / 2 - (b.top + b.bottom) / 2) : 999;
			if (apart > 3) { out.Apart.push(apart); }
		});
		if (labels.length !== lanes.length) { out.Hidden.push(labels.length + " labels for " + lanes.length + " lanes"); }
		for (const td of document.querySelectorAll("#events td[data-label]")) {
			const b = td.getBoundingClientRect();
			out.Cells++;
			if (b.width === 0 || b.right > window.innerWidth || b.left < 0) { out.Outside.push(td.textContent); }
		}
		return out;
	})()`))
	if err != nil || phone.Lanes < 5 || len(phone.Hidden) > 0 || len(phone.Apart) > 0 {
		t.Errorf("the timeline's lane labels on a phone: %d lanes, hidden %q, apart from their lanes by %v (%v)", phone.Lanes, phone.Hidden, phone.Apart, err)
	}
	if phone.Cells == 0 || len(phone.Outside) > 0 {
		t.Errorf("the events' session and summary on a phone: %d cells, out of view: %q", phone.Cells, phone.Outside)
	}
	browse(t, ctx, "explain on a phone",
		chromedp.Navigate(base+"/console/explain?identity="+st.identity+"&service="+long),
		chromedp.WaitVisible(css("#decision")),
	)
	fitsTables("explain")
	browse(t, ctx, "explain of the denial on a phone",
		chromedp.Navigate(base+"/console/explain?identity="+st.identity+"&service="+st.service+"&at="+url.QueryEscape(st.deniedAt.UTC().Format(time.RFC3339Nano))),
		chromedp.WaitVisible(css("#decision")),
		shot(dir, "explain-phone"),
	)
	fitsTables("explain of the denial")
	browse(t, ctx, "a backtest report on a phone",
		chromedp.Navigate(report),
		chromedp.WaitVisible(css("#changes")),
		shot(dir, "backtest-report-phone"),
	)
	fitsTables("a backtest report")
	browse(t, ctx, "the fleet on a phone",
		chromedp.Navigate(base+"/console/fleet"),
		chromedp.WaitVisible(css("#failures")),
	)
	fitsTables("the fleet page")
	if right, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.max(...[...document.querySelectorAll("#failures a")].map(a => a.getBoundingClientRect().right))`)); err != nil || right > 390 {
		t.Errorf("the fleet's failed requests' links on a phone end at %v (%v)", right, err)
	}
	browse(t, ctx, "checks on a phone",
		chromedp.Navigate(base+"/console/checks"),
		chromedp.WaitVisible(css("#checks")),
		shot(dir, "checks-phone"),
	)
	fitsTables("the checks page")
	if right, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`Math.max(...[...document.querySelectorAll("a.backtest")].map(a => a.getBoundingClientRect().right))`)); err != nil || right > 390 {
		t.Errorf("the checks' edit and backtest links on a phone end at %v (%v)", right, err)
	}
	browse(t, ctx, "back to a desktop", chromedp.EmulateViewport(1280, 800))

	// Sign out: back to sign-in, and the pages stay closed.
	browse(t, ctx, "sign out",
		chromedp.Navigate(base+"/console/fleet"),
		chromedp.Click(css("#sign-out")),
		chromedp.WaitVisible(css("p.notice")),
	)
	if notice := read(t, ctx, "p.notice"); !strings.Contains(notice, "Signed out") {
		t.Fatalf("sign out: %q", notice)
	}
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.HasSuffix(loc, "/console/sign-in?signed-out=1") {
		t.Fatalf("after sign-out the browser is at %q (%v)", loc, err)
	}
	browse(t, ctx, "fleet after sign-out", chromedp.Navigate(base+"/console/fleet"), chromedp.WaitVisible(css("#username")))
	if loc, err := chromedp.Run(ctx, chromedp.Location()); err != nil || !strings.Contains(loc, "/console/sign-in") {
		t.Fatalf("after sign-out the fleet is at %q (%v)", loc, err)
	}

	// A forged CSRF token is refused.
	browse(t, ctx, "forged CSRF token",
		chromedp.SetValue(css(`input[name="csrf"]`), "forged"),
		chromedp.SendKeys(css("#username"), "admin"),
		chromedp.SendKeys(css("#password"), testAdminPassword),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitNotPresent(css("#username")),
	)
	if body := read(t, ctx, "body"); !strings.Contains(body, "CSRF token is missing or wrong") {
		t.Fatalf("forged CSRF token: page %q", body)
	}

	// A non-admin's right password is refused.
	browse(t, ctx, "non-admin",
		chromedp.Navigate(base+"/console/sign-in"),
		chromedp.SendKeys(css("#username"), "plain-user"),
		chromedp.SendKeys(css("#password"), "user-password"),
		chromedp.Click(css("#sign-in")),
		chromedp.WaitVisible(css("p.error")),
		shot(dir, "refused"),
	)
	if refusal := read(t, ctx, "p.error"); !strings.Contains(refusal, "for administrators") {
		t.Fatalf("non-admin: %q", refusal)
	}
}

// signedInAtFleet opens a browser on the console of n, signs the admin in
// and waits for the fleet's element sel; it returns the browser and the
// console's base URL.
func signedInAtFleet(t *testing.T, n *testNode, sel string) (context.Context, string) {
	t.Helper()
	base := strings.Replace(consoleServer(t, n).URL, "127.0.0.1", "localhost", 1)
	ctx := newBrowser(t, n)
	browse(t, ctx, "sign in",
		chromedp.Navigate(base+"/console/fleet"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
		chromedp.SendKeys(chromedp.CSS("#username"), "admin"),
		chromedp.SendKeys(chromedp.CSS("#password"), testAdminPassword),
		chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS(sel)),
	)
	return ctx, base
}

// TestConsoleTimeLeftCountsDown: the fleet page's "Time left" of a grace
// window counts down in the browser from what the node wrote (4m0s, on
// the node's clock, which is not the browser's).
func TestConsoleTimeLeftCountsDown(t *testing.T) {
	n, _, _ := graceStory(t)
	ctx, _ := signedInAtFleet(t, n, "#grace")
	if left := read(t, ctx, "#grace td[data-left]"); left != "4m0s" {
		t.Fatalf("time left as the page came: %q", left)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`/^3m5[0-9]s$/.test(document.querySelector("#grace td[data-left]").textContent)`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("time left does not count down: %v (now %q)", err, read(t, ctx, "#grace td[data-left]"))
	}
}

// TestConsoleIdlePageSignsOut: the fleet page's live counts keep the API
// session alive only while someone uses the page; left alone for the
// session's idle timeout it stops refreshing, says so, and the session
// ends as any idle one does.
func TestConsoleIdlePageSignsOut(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.APISessionTimeout = 6 * time.Second // more than one refresh (5 s)
	n := startTestNode(t, cfg)
	ctx, base := signedInAtFleet(t, n, "#counts")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`!document.getElementById("counts-paused").hidden`,
		chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("the counts of a page left alone do not pause: %v", err)
	}
	time.Sleep(cfg.APISessionTimeout / 2) // the last refresh was at least one interval before the pause
	browse(t, ctx, "the session ended: a page asks to sign in again",
		chromedp.Navigate(base+"/console/fleet"),
		chromedp.WaitVisible(chromedp.CSS("#username")),
	)
}
