package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestMFADeadlinesRemoveSessions: an MFA check with a 2-second timeout and
// one that prompts on wake with a 2-second grace. Both grant sessions after
// an MFA pass; each deadline is appended as a fact the moment it passes (one
// millisecond after the verdict's ValidUntil, not before), and the
// projection removes the session that lost its only policy. The node runs on
// a fake clock that the test moves: no wall-clock wait.
func TestMFADeadlinesRemoveSessions(t *testing.T) {
	cfg := defaultTestConfig(t.TempDir())
	cfg.MFAGrace = 2 * time.Second
	clk := clockwork.NewFakeClockAt(time.Now().UTC().Truncate(time.Second))
	cfg.clock = clk
	n := startTestNode(t, cfg)
	admin := n.adminToken(t)
	timed := n.create(t, admin, "services", map[string]any{"name": "timed"})
	woken := n.create(t, admin, "services", map[string]any{"name": "woken"})
	timeout := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-2s", "timeoutSeconds": 2})
	onWake := n.create(t, admin, "posture-checks", map[string]any{"typeId": "MFA", "name": "mfa-wake", "promptOnWake": true})
	n.create(t, admin, "service-policies", map[string]any{"name": "timed", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + timed}, "postureCheckRoles": []string{"@" + timeout}})
	n.create(t, admin, "service-policies", map[string]any{"name": "woken", "type": "Dial", "identityRoles": []string{"#all"},
		"serviceRoles": []string{"@" + woken}, "postureCheckRoles": []string{"@" + onWake}})
	ep := n.endpoint(t, admin, "mfa-laptop")

	// Without MFA: denied, with the seed's MFA values.
	r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": timed})
	if r.Status != http.StatusConflict {
		t.Fatalf("without MFA: %d %s", r.Status, r.Body)
	}

	// An MFA pass on this API session, at t0.
	t0 := clk.Now()
	if _, err := n.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	start := n.lastSeq(t)
	for _, svc := range []string{timed, woken} {
		if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": svc}); r.Status != http.StatusCreated {
			t.Fatalf("after MFA: %d %s", r.Status, r.Body)
		}
	}

	// A wake at t0+1s: the response names the service whose MFA query now
	// needs a TOTP within the grace.
	clk.Advance(time.Second)
	var before, after map[string]string
	n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &before)
	r = n.do(t, http.MethodPost, clientAPI+"/posture-response", ep.token, map[string]any{"typeId": "ENDPOINT_STATE", "id": "0", "woken": true})
	if r.Status != http.StatusCreated {
		t.Fatalf("wake: %d %s", r.Status, r.Body)
	}
	// Clients that poll service-updates see the re-prompt.
	n.getJSON(t, clientAPI+"/current-api-session/service-updates", ep.token, &after)
	if !later(t, after["lastChangeAt"], before["lastChangeAt"]) {
		t.Fatalf("the wake did not move the service-update indicator: %v -> %v", before, after)
	}
	data, _ := r.envelope(t)
	var wake struct {
		Services []struct {
			ID               string `json:"id"`
			PostureQueryType string `json:"postureQueryType"`
			Timeout          int64  `json:"timeout"`
			TimeoutRemaining int64  `json:"timeoutRemaining"`
		} `json:"services"`
	}
	if err := json.Unmarshal(data, &wake); err != nil {
		t.Fatal(err)
	}
	if len(wake.Services) != 1 || wake.Services[0].ID != woken || wake.Services[0].TimeoutRemaining != 2 || wake.Services[0].PostureQueryType != "MFA" {
		t.Fatalf("wake response: %s", data)
	}

	// at moves the clock to t0+d, runs the deadline loop once (the node's
	// own loop may tick too: the stream keeps one copy) and returns the
	// sessions the endpoint still has.
	at := func(d time.Duration) []string {
		t.Helper()
		clk.Advance(t0.Add(d).Sub(clk.Now()))
		if _, err := n.deadlines.Tick(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := n.store.WaitFor(t.Context(), n.lastSeq(t)); err != nil {
			t.Fatal(err)
		}
		return n.sessionIDs(t, ep.token)
	}
	// The MFA timeout's ValidUntil is t0+2s: the verdict holds through it.
	if ids := at(2 * time.Second); len(ids) != 2 {
		t.Fatalf("sessions at the MFA timeout: %v, want both", ids)
	}
	if ids := at(2*time.Second + time.Millisecond - time.Nanosecond); len(ids) != 2 {
		t.Fatalf("sessions a nanosecond before the timeout's deadline: %v, want both", ids)
	}
	// One millisecond after it, the deadline is a fact: the timed session
	// goes; the wake's grace (until t0+3s) still holds.
	if ids := at(2*time.Second + time.Millisecond); len(ids) != 1 {
		t.Fatalf("sessions once the MFA timeout passed: %v, want the woken one", ids)
	}
	if ids := at(3 * time.Second); len(ids) != 1 {
		t.Fatalf("sessions at the end of the grace: %v, want the woken one", ids)
	}
	if ids := at(3*time.Second + time.Millisecond); len(ids) != 0 {
		t.Fatalf("sessions once the grace passed: %v, want none", ids)
	}

	// Now both are refused, and the failure shows why.
	r = n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": woken})
	if r.Status != http.StatusConflict {
		t.Fatalf("after the grace: %d %s", r.Status, r.Body)
	}
	var failed []posture.FailedServiceRequest
	n.getJSON(t, mgmt+"/identities/"+ep.id+"/failed-service-requests", admin, &failed)
	last := failed[len(failed)-1].PolicyFailures[0].Checks[0]
	var actual, expected map[string]bool
	_ = json.Unmarshal(last.ActualValue, &actual)
	_ = json.Unmarshal(last.ExpectedValue, &expected)
	if !actual["passedMfa"] || actual["passedOnWake"] || !expected["passedMfa"] || !expected["passedOnWake"] {
		t.Fatalf("MFA failure values: actual %s expected %s", last.ActualValue, last.ExpectedValue)
	}

	// One event per deadline, whatever the timer did.
	var deadlines []string
	if err := n.elog.Read(t.Context(), start, 0, func(b []posture.Event) error {
		for _, e := range b {
			if e.Type == posture.TypeDeadlineReached {
				deadlines = append(deadlines, e.ID)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(deadlines) != 2 || len(slices.Compact(slices.Sorted(slices.Values(deadlines)))) != 2 {
		t.Fatalf("deadline events: %v", deadlines)
	}

	// The timeout, once found, is sticky until MFA is passed again: a
	// longer timeout, or none, does not bring the pass back.
	for _, longer := range []int{600, -1} {
		if r := n.do(t, http.MethodPatch, mgmt+"/posture-checks/"+timeout, admin, map[string]any{"typeId": "MFA", "timeoutSeconds": longer}); r.Status != http.StatusOK {
			t.Fatalf("a longer timeout: %d %s", r.Status, r.Body)
		}
		expectError(t, n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": timed}), http.StatusConflict, posture.CodeInvalidPosture, "")
	}
	if _, err := n.writer.AppendContext(t.Context(), api.Stamp{Actor: ep.id}, posture.MFAPassed{IdentityID: ep.id, APISessionID: ep.apiSessionID}); err != nil {
		t.Fatal(err)
	}
	if r := n.do(t, http.MethodPost, clientAPI+"/sessions", ep.token, map[string]any{"serviceId": timed}); r.Status != http.StatusCreated {
		t.Fatalf("after MFA passed again: %d %s", r.Status, r.Body)
	}
}
