package console

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

// deletedStore is adminStore where the identity 7fQ2kLm9Zx was deleted at
// deletedAt and an identity created since, Imp0ster01, is named
// "7fQ2kLm9Zx"; the service crm exists.
type deletedStore struct{ adminStore }

var (
	deletedCreatedAt = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	deletedAt        = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
)

func (deletedStore) IdentityByName(name string) (posture.Identity, error) {
	if name != "7fQ2kLm9Zx" {
		return posture.Identity{}, posture.ErrNotFound
	}
	return posture.Identity{ID: "Imp0ster01", Name: name, CreatedAt: deletedAt.Add(time.Hour)}, nil
}

func (s deletedStore) Identity(id string) (posture.Identity, error) {
	if id == "Imp0ster01" {
		return s.IdentityByName("7fQ2kLm9Zx")
	}
	return s.adminStore.Identity(id)
}

func (deletedStore) ServicesFor(identityID, typ string) []posture.Grant {
	if identityID == "Imp0ster01" {
		return []posture.Grant{{ServiceID: "crm"}}
	}
	return nil
}

func (deletedStore) Service(id string) (posture.Service, error) {
	if id != "crm" {
		return posture.Service{}, posture.ErrNotFound
	}
	return posture.Service{ID: id, Name: "crm", CreatedAt: deletedCreatedAt}, nil
}

func (deletedStore) ServiceByName(name string) (posture.Service, error) {
	return posture.Service{}, posture.ErrNotFound
}

// deletedExplainer answers as the management API's explainer does over
// deletedStore's history: 7fQ2kLm9Zx, denied crm while it existed, and
// Imp0ster01, granted it since it was created.
type deletedExplainer struct{ asked *int }

func (x deletedExplainer) Explain(_ context.Context, identityID, serviceID, typ string, at time.Time) (posture.Explanation, error) {
	*x.asked++
	if at.IsZero() {
		at = deletedAt.Add(48 * time.Hour)
	}
	e := posture.Explanation{IdentityID: identityID, ServiceID: serviceID, ServiceName: "crm", Type: typ, At: at}
	existed := identityID == "7fQ2kLm9Zx" && !at.Before(deletedCreatedAt) && at.Before(deletedAt) ||
		identityID == "Imp0ster01" && !at.Before(deletedAt.Add(time.Hour))
	switch {
	case !existed:
		return e, &posture.Error{Code: posture.CodeNotFound, Message: "no identity had the id " + identityID + " at " + stamp(at)}
	case serviceID != "crm":
		return e, &posture.Error{Code: posture.CodeNotFound, Message: "no service had the id " + serviceID + " at " + stamp(at)}
	case identityID == "7fQ2kLm9Zx":
		e.Decision = posture.DecisionDenied
	default:
		e.Decision = posture.DecisionGranted
	}
	return e, nil
}

// TestExplainDeletedIdentity: an id that an identity deleted since had at
// the moment asked explains that identity, not one named like the id now;
// an identity found by its name is said with its id.
func TestExplainDeletedIdentity(t *testing.T) {
	asked := 0
	c, err := New(Options{API: fakeAPI(t), ManagementBase: "/m", ClientBase: "/c", Store: deletedStore{}, Explainer: deletedExplainer{&asked},
		Now: func() time.Time { return deletedAt.Add(48 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	explain := func(query string) (int, string) {
		t.Helper()
		asked = 0
		w := get(t, c, "/console/explain?"+query)
		return w.Code, w.Body.String()
	}
	then := url.QueryEscape(deletedAt.Add(-time.Hour).Format(time.RFC3339))

	// While it existed: the deleted identity, by its id, asked once.
	status, body := explain("identity=7fQ2kLm9Zx&service=crm&at=" + then)
	if status != http.StatusOK || !strings.Contains(body, "Decision: <strong>denied</strong>") ||
		!strings.Contains(body, "<h2>identity 7fQ2kLm9Zx (deleted since) → crm (Dial)") ||
		!strings.Contains(body, `name="identity" value="7fQ2kLm9Zx"`) || strings.Contains(body, "Imp0ster01") || asked != 1 {
		t.Fatalf("explain of a deleted identity while it existed: %d, asked %d times\n%s", status, asked, body)
	}
	// Without a service yet: the deleted identity is the one the form asks
	// about, and the service is typed.
	status, body = explain("identity=7fQ2kLm9Zx&at=" + then)
	if status != http.StatusOK || !strings.Contains(body, `name="identity" value="7fQ2kLm9Zx"`) || strings.Contains(body, "Imp0ster01") ||
		!strings.Contains(body, `<label>Service (id or name) <input name="service" value="">`) || !strings.Contains(body, `id="choose-service"`) ||
		strings.Contains(body, `id="explanation"`) {
		t.Fatalf("explain of a deleted identity, without a service: %d\n%s", status, body)
	}

	// Now, and after it was deleted: the identity named so, said with its id.
	for _, tc := range []struct{ at, none string }{
		{"", `&#34;7fQ2kLm9Zx&#34; is not the id of an identity now`},
		// A whole second stands for its end, as on the command line.
		{deletedAt.Add(2 * time.Hour).Format(time.RFC3339), `&#34;7fQ2kLm9Zx&#34; was not the id of an identity at 2026-11-22T02:00:00.999Z`},
	} {
		status, body = explain("identity=7fQ2kLm9Zx&service=crm&at=" + url.QueryEscape(tc.at))
		want := `<p id="resolved" role="status"><strong>` + tc.none + `, so it is taken as a name: explaining the identity named 7fQ2kLm9Zx (id Imp0ster01).</strong></p>`
		if status != http.StatusOK || !strings.Contains(body, "Decision: <strong>granted</strong>") || !strings.Contains(body, want) ||
			!strings.Contains(body, `name="identity" value="Imp0ster01"`) {
			t.Fatalf("explain by name at %q: %d, want %s\n%s", tc.at, status, want, body)
		}
	}
	// By its own id, the identity is not said to be found by name.
	if status, body = explain("identity=Imp0ster01&service=crm"); status != http.StatusOK || strings.Contains(body, `id="resolved"`) {
		t.Fatalf("explain by id: %d\n%s", status, body)
	}
	// Without a service: the services granted are offered, none chosen,
	// and nothing is explained.
	status, body = explain("identity=Imp0ster01")
	if status != http.StatusOK || !strings.Contains(body, `<option value="" selected>choose a service</option><option value="crm">crm</option>`) ||
		!strings.Contains(body, `id="choose-service"`) || strings.Contains(body, `id="explanation"`) || asked != 0 {
		t.Fatalf("explain without a service: %d, asked %d times\n%s", status, asked, body)
	}
	// Before any identity had the id, and before the one named so was
	// created: one message says both.
	before := url.QueryEscape(deletedCreatedAt.Add(-time.Hour).Format(time.RFC3339))
	status, body = explain("identity=7fQ2kLm9Zx&service=crm&at=" + before)
	want := `No identity had the id &#34;7fQ2kLm9Zx&#34; at 2026-11-19T23:00:00.999Z, and the identity named 7fQ2kLm9Zx (id Imp0ster01) was created later, at 2026-11-22T01:00:00.000Z.`
	if status != http.StatusNotFound || !strings.Contains(body, want) || strings.Contains(body, `id="resolved"`) {
		t.Fatalf("explain before the id and the name existed: %d, want %s\n%s", status, want, body)
	}
}
