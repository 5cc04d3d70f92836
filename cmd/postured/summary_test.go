package main

import (
	"net/http"
	"testing"
)

// TestPostureSummary: the fleet view over HTTPS counts per policy and
// check, shows who is in a grace window and who loses access soon, and the
// oldest evidence; a bad parameter is a 400 with the field.
func TestPostureSummary(t *testing.T) {
	n := startTestNode(t, defaultTestConfig(t.TempDir()))
	admin := n.adminToken(t)
	linux := []any{map[string]any{"type": "Linux", "versions": []string{">=5.0.0"}}}
	osCheck := n.create(t, admin, "posture-checks", map[string]any{"typeId": "OS", "name": "os", "operatingSystems": linux, "maxAgeSeconds": 600})
	svc := n.create(t, admin, "services", map[string]any{"name": "crm"})
	policy := n.create(t, admin, "service-policies", map[string]any{"name": "crm-linux", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + svc}, "postureCheckRoles": []string{"@" + osCheck}})
	good, bad := n.endpoint(t, admin, "good-laptop"), n.endpoint(t, admin, "bad-laptop")
	for ep, version := range map[endpoint]string{good: "6.1.0", bad: "4.0.0"} {
		if r := n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "OS", "id": osCheck, "type": "Linux", "version": version}); r.Status != http.StatusCreated {
			t.Fatalf("posture: %d %s", r.Status, r.Body)
		}
	}
	var sum struct {
		Policies []struct {
			ID                string
			Name              string
			Pass, Fail, Stale int64
			ReportOnlyFailing int64 `json:"reportOnlyFailing"`
		}
		Checks []struct {
			ID, Name, TypeID  string
			Pass, Fail, Stale int64
		}
		LosingAccess struct {
			Count         int
			WithinMinutes int
			Sessions      []struct{ IdentityID, APISessionID string }
		}
		InGrace        struct{ Count int }
		OldestEvidence []struct {
			IdentityID string
			AgeSeconds int64
		}
	}
	// The admin has an API session and no posture: it fails too.
	n.getJSON(t, mgmt+"/posture-summary?withinMinutes=11", admin, &sum)
	if len(sum.Policies) != 1 || sum.Policies[0].ID != policy || sum.Policies[0].Name != "crm-linux" || sum.Policies[0].Pass != 1 || sum.Policies[0].Fail != 2 {
		t.Fatalf("policies: %+v", sum.Policies)
	}
	if len(sum.Checks) != 1 || sum.Checks[0].ID != osCheck || sum.Checks[0].TypeID != "OS" || sum.Checks[0].Pass != 1 || sum.Checks[0].Fail != 2 {
		t.Fatalf("checks: %+v", sum.Checks)
	}
	// The good laptop's evidence goes stale in 10 minutes: it loses access
	// within 11 unless it reports again.
	if sum.LosingAccess.Count != 1 || sum.LosingAccess.WithinMinutes != 11 || sum.LosingAccess.Sessions[0].IdentityID != good.id || sum.InGrace.Count != 0 {
		t.Fatalf("losing access: %+v, in grace %+v", sum.LosingAccess, sum.InGrace)
	}
	if len(sum.OldestEvidence) != 2 {
		t.Fatalf("oldest evidence: %+v", sum.OldestEvidence)
	}
	n.getJSON(t, mgmt+"/posture-summary?withinMinutes=5", admin, &sum)
	if sum.LosingAccess.Count != 0 {
		t.Fatalf("losing access within 5 minutes: %+v", sum.LosingAccess)
	}
	r := n.do(t, http.MethodGet, mgmt+"/posture-summary?withinMinutes=-1", admin, nil)
	if _, e := r.envelope(t); r.Status != http.StatusBadRequest || e.Code != "COULD_NOT_VALIDATE" {
		t.Fatalf("bad withinMinutes: %d %s", r.Status, r.Body)
	}
}
