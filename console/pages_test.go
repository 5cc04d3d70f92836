package console

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

// pagesStore is adminStore with a report-only check, two identities and a
// service.
type pagesStore struct{ adminStore }

func (pagesStore) Identity(id string) (posture.Identity, error) {
	switch id {
	case "i1", "i2":
		return posture.Identity{ID: id, Name: "laptop-" + id[1:]}, nil
	}
	return adminStore{}.Identity(id)
}

func (pagesStore) Checks() ([]posture.Check, error) {
	since := time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC)
	return []posture.Check{{ID: "nic", Name: "registered-nic", TypeID: "MAC", MACAddresses: []string{"aa:bb:cc:dd:ee:ff"},
		Enforcement: &posture.Enforcement{Mode: posture.ReportMode}},
		{ID: "dom", Name: "corp-domain", TypeID: "DOMAIN", Domains: []string{"corp.example"},
			Enforcement: &posture.Enforcement{Mode: posture.ReportMode, EnforceAt: &since}}}, nil
}

func (pagesStore) FleetCounts() ([]posture.FleetCount, error) {
	return []posture.FleetCount{{Kind: "c", ID: "nic", ReportOnlyFailing: 2}}, nil
}

func (pagesStore) Service(id string) (posture.Service, error) {
	if id != "wiki" {
		return posture.Service{}, posture.ErrNotFound
	}
	return posture.Service{ID: id, Name: "wiki"}, nil
}

// impact: i1 would lose the wiki; i2 would lose nothing, which the data
// do not say why (another policy grants it, or it has no access now).
type impact struct{}

func (impact) Impact(checkID, after string, limit int) ([]posture.CheckImpact, bool, error) {
	since := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	return []posture.CheckImpact{
		{IdentityID: "i1", Since: since, Loses: []posture.ServiceAccess{{ServiceID: "wiki", Type: posture.Dial}}, SessionsRemoved: 1},
		{IdentityID: "i2", Since: since},
	}, false, nil
}

func newPagesConsole(t *testing.T) *Console {
	c, err := New(Options{API: fakeAPI(t), ManagementBase: "/m", ClientBase: "/c", Store: pagesStore{}, Impact: impact{}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestChecksImpactLosesNothing: an identity that would lose nothing is not
// said to keep access through another policy, which it may not have.
func TestChecksImpactLosesNothing(t *testing.T) {
	w := get(t, newPagesConsole(t), "/console/checks")
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, "<td>wiki (Dial)</td>") {
		t.Fatalf("checks: %d\n%s", w.Code, body)
	}
	// A check enforced since its enforceAt says when, as every moment.
	if !strings.Contains(body, `<td data-label="Enforcement">enforced since <time datetime="2026-11-21T08:00:00Z" title="2026-11-21T08:00:00Z">2026-11-21T08:00:00.000Z</time></td>`) {
		t.Fatalf("a check enforced since its enforceAt:\n%s", body)
	}
	if strings.Contains(body, "another policy grants it") || !strings.Contains(body, `<td><span class="loses-nothing">nothing it has now</span></td>`) {
		t.Fatalf("an identity that loses nothing:\n%s", body)
	}
}

// TestNotFoundPages: an address under /console/ that is no page is
// answered in the console's layout; a backtest job the node does not know
// is said to be forgotten after an hour or a restart.
func TestNotFoundPages(t *testing.T) {
	c := newPagesConsole(t)
	w := get(t, c, "/console/nope")
	if body := w.Body.String(); w.Code != http.StatusNotFound || !strings.Contains(body, `<a href="/console/checks">Checks</a>`) ||
		!strings.Contains(body, `<p class="error" role="alert">No page at /console/nope.</p>`) {
		t.Fatalf("an unknown page: %d\n%s", w.Code, body)
	}
	w = get(t, c, "/console/backtests/gone")
	if body := w.Body.String(); w.Code != http.StatusNotFound || !strings.Contains(body, "for an hour after it ends, and forgotten when the node restarts") {
		t.Fatalf("an unknown backtest job: %d\n%s", w.Code, body)
	}
	// The console's other addresses are unchanged.
	if w := get(t, c, "/console/"); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/fleet" {
		t.Fatalf("/console/: %d %v", w.Code, w.Header())
	}
	if w := get(t, c, "/console/assets/console.css"); w.Code != http.StatusOK {
		t.Fatalf("an asset: %d", w.Code)
	}
	// The assets' directory is not listed.
	if w := get(t, c, "/console/assets/"); w.Code != http.StatusNotFound || strings.Contains(w.Body.String(), "console.css") {
		t.Fatalf("the assets' directory: %d\n%s", w.Code, w.Body)
	}
}
