package projections_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
)

var rewriteEvents = flag.Bool("rewrite-events", false, "regenerate the recorded event files in testdata")

// The foundation scenario (testdata/foundation.events.jsonl, regenerated
// with -rewrite-events, then the dump with -rewrite) has identities,
// authenticators and API sessions, a service, OS and MFA checks, policies
// with and without checks, posture responses, an MFA enrollment and pass, a
// wake, sessions created, denied and deleted, a deadline that removes a
// session, and a configuration change: a change to evaluation shows up as a
// diff of testdata/foundation.dump.

// scenario builds a recorded event sequence with fixed ids and times.
type scenario struct {
	t      time.Time
	events []posture.Event
}

func (s *scenario) add(p posture.Payload, after time.Duration) {
	s.t = s.t.Add(after)
	e := posture.MustEvent(p, s.t)
	e.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", len(s.events)+1)
	e.Seq = uint64(len(s.events) + 1)
	s.events = append(s.events, e)
}

func (s *scenario) write(t *testing.T, name string) {
	f, err := os.Create(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, e := range s.events {
		rec := struct {
			posture.Event
			Seq uint64 `json:"seq"`
		}{e, e.Seq}
		line, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "%s\n", line)
	}
}

func TestGenerateFoundationEvents(t *testing.T) {
	if !*rewriteEvents {
		t.Skip("run with -rewrite-events to regenerate testdata/foundation.events.jsonl")
	}
	s := &scenario{t: time.Date(2026, 1, 2, 10, 0, 0, 0, time.UTC)}
	at := func() time.Time { return s.t }
	s.add(posture.ConfigChanged{MFAGraceSeconds: 300, APISessionTimeoutSeconds: 1800}, 0)
	admin := posture.Identity{ID: "admin00001", Name: "admin", Type: posture.IdentityUser, IsAdmin: true, IsDefaultAdmin: true, RoleAttributes: []string{}, CreatedAt: at(), UpdatedAt: at()}
	s.add(posture.Created[posture.Identity]{Entity: admin}, 0)
	s.add(posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: "auth000001", IdentityID: admin.ID, Method: posture.MethodPassword, Username: "admin", PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2g", CreatedAt: at(), UpdatedAt: at()}}, 0)
	for i := 1; i <= 5; i++ {
		id := posture.Identity{ID: fmt.Sprintf("ident%05d", i), Name: fmt.Sprintf("laptop-%d", i), Type: posture.IdentityDevice, RoleAttributes: []string{"laptops", fmt.Sprintf("team-%d", i%2)}, Tags: posture.Tags{"owner": fmt.Sprintf("user%d", i)}, CreatedAt: s.t, UpdatedAt: s.t}
		s.add(posture.Created[posture.Identity]{Entity: id}, time.Second)
		s.add(posture.Created[posture.Authenticator]{Entity: posture.Authenticator{ID: fmt.Sprintf("auth%06d", i+1), IdentityID: id.ID, Method: posture.MethodPassword, Username: fmt.Sprintf("user%d", i), PasswordHash: "$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA", CreatedAt: s.t, UpdatedAt: s.t}}, 0)
		sess := posture.APISession{ID: fmt.Sprintf("apis%06d", i), TokenHash: fmt.Sprintf("%064d", i), IdentityID: id.ID, AuthenticatorID: fmt.Sprintf("auth%06d", i+1), AuthMethod: "password", IPAddress: "127.0.0.1", ConfigTypes: []string{}, CreatedAt: s.t, LastActivityAt: s.t}
		s.add(posture.APISessionCreated{APISession: sess}, time.Second)
	}
	s.add(posture.APISessionTouched{ID: "apis000002", IdentityID: "ident00002", At: s.t.Add(time.Minute)}, time.Minute)
	renamed := posture.Identity{ID: "ident00003", Name: "laptop-3-renamed", Type: posture.IdentityDevice, RoleAttributes: []string{"laptops"}, CreatedAt: time.Date(2026, 1, 2, 10, 0, 5, 0, time.UTC), UpdatedAt: s.t.Add(time.Second)}
	s.add(posture.Updated[posture.Identity]{Entity: renamed}, time.Second)
	s.add(posture.APISessionDeleted{ID: "apis000001", IdentityID: "ident00001", Reason: posture.EndLogout}, time.Second)
	s.add(posture.Deleted[posture.Identity]{ID: "ident00004"}, time.Second)
	s.add(posture.Deleted[posture.Authenticator]{ID: "auth000006"}, time.Second)
	s.add(posture.APISessionDeleted{ID: "apis000005", IdentityID: "ident00005", Reason: posture.EndExpired}, time.Second)

	// Evaluation: a service, an OS check and an MFA check (60 s timeout,
	// re-prompt on wake), a Dial policy that requires both, and posture
	// that passes for laptop-2 and fails for laptop-3.
	s.add(posture.Created[posture.Service]{Entity: posture.Service{ID: "svc0000001", Name: "crm", RoleAttributes: []string{"crm"}, Configs: []string{}, TerminatorStrategy: "smartrouting", CreatedAt: at(), UpdatedAt: at()}}, time.Second)
	osCheck := posture.Check{ID: "chk0000001", Name: "windows-10", TypeID: posture.CheckOS, RoleAttributes: []string{"os"}, CreatedAt: at(), UpdatedAt: at(),
		OperatingSystems: []posture.OperatingSystem{{Type: "Windows", Versions: []string{">=10.0.19000 <11.0.0"}}}}
	s.add(posture.Created[posture.Check]{Entity: osCheck}, time.Second)
	mfaCheck := posture.Check{ID: "chk0000002", Name: "mfa-60s", TypeID: posture.CheckMFA, RoleAttributes: []string{"mfa"}, CreatedAt: at(), UpdatedAt: at(),
		TimeoutSeconds: 60, PromptOnWake: true}
	s.add(posture.Created[posture.Check]{Entity: mfaCheck}, time.Second)
	s.add(posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: "pol0000001", Name: "crm-dial", Type: "Dial", Semantic: "AnyOf",
		IdentityRoles: []string{"#laptops"}, ServiceRoles: []string{"#crm"}, PostureCheckRoles: []string{"#os", "#mfa"}, CreatedAt: at(), UpdatedAt: at()}}, time.Second)
	s.add(posture.Created[posture.ServicePolicy]{Entity: posture.ServicePolicy{ID: "pol0000002", Name: "crm-bind", Type: "Bind", Semantic: "AnyOf",
		IdentityRoles: []string{"@ident00003"}, ServiceRoles: []string{"@svc0000001"}, PostureCheckRoles: []string{}, CreatedAt: at(), UpdatedAt: at()}}, time.Second)
	s.add(posture.PostureRecorded{IdentityID: "ident00002", APISessionID: "apis000002", Responses: []posture.PostureResponse{
		{ID: osCheck.ID, TypeID: string(posture.CheckOS), Type: "Windows", Version: "10.0.19045"}}}, time.Second)
	s.add(posture.MFAEnrolled{MFA: posture.MFA{ID: "mfa0000001", IdentityID: "ident00002", SecretSealed: "sealed:v1:test", Issuer: "postured", Account: "laptop-2",
		RecoveryNonceSealed: "sealed:v1:nonce", RecoveryCodes: []string{"h2:00", "h2:01"}, CreatedAt: at(), UpdatedAt: at()}}, time.Second)
	s.add(posture.MFAVerified{IdentityID: "ident00002", Used: posture.MFACode{Counter: 59_000_000}}, time.Second)
	s.add(posture.MFAPassed{IdentityID: "ident00002", APISessionID: "apis000002"}, 0)
	mfaPassed := at()
	s.add(posture.SessionCreated{Session: posture.Session{ID: "sess000001", TokenSealed: "sealed:v1:jwt", IdentityID: "ident00002", APISessionID: "apis000002",
		ServiceID: "svc0000001", Type: "Dial", Tags: posture.Tags{}, CreatedAt: at()}, Policies: []string{"pol0000001"}}, time.Second)
	s.add(posture.PostureRecorded{IdentityID: "ident00003", APISessionID: "apis000003", Responses: []posture.PostureResponse{
		{ID: osCheck.ID, TypeID: string(posture.CheckOS), Type: "Windows", Version: "6.1.7601"}}}, time.Second)
	s.add(posture.SessionDenied{IdentityID: "ident00003", APISessionID: "apis000003", ServiceID: "svc0000001", ServiceName: "crm", Type: "Dial",
		PolicyFailures: []posture.PolicyFailure{{PolicyID: "pol0000001", PolicyName: "crm-dial", Checks: []posture.CheckFailure{
			{PostureCheckID: osCheck.ID, PostureCheckName: osCheck.Name, PostureCheckType: posture.CheckOS,
				ActualValue: json.RawMessage(`{"type":"Windows","version":"6.1.7601"}`), ExpectedValue: json.RawMessage(`[{"type":"Windows","versions":[">=10.0.19000 <11.0.0"]}]`)},
			{PostureCheckID: mfaCheck.ID, PostureCheckName: mfaCheck.Name, PostureCheckType: posture.CheckMFA,
				ActualValue: json.RawMessage(`{"passedMfa":false}`), ExpectedValue: json.RawMessage(`{"passedMfa":true}`)}}}}}, 0)
	s.add(posture.SessionCreated{Session: posture.Session{ID: "sess000002", TokenSealed: "sealed:v1:jwt2", IdentityID: "ident00003", APISessionID: "apis000003",
		ServiceID: "svc0000001", Type: "Bind", Tags: posture.Tags{}, CreatedAt: at()}, Policies: []string{"pol0000002"}}, time.Second)
	s.add(posture.SessionDeleted{ID: "sess000002", IdentityID: "ident00003"}, time.Second)
	// laptop-2 wakes (its MFA check prompts on wake: the grace starts), then
	// its MFA timeout passes: the deadline removes its Dial session.
	s.add(posture.PostureRecorded{IdentityID: "ident00002", APISessionID: "apis000002", Responses: []posture.PostureResponse{
		{ID: "endpoint-state", TypeID: posture.ResponseEndpointState, Woken: true}}}, 10*time.Second)
	deadline := mfaPassed.Add(60 * time.Second)
	s.add(posture.DeadlineReached{IdentityID: "ident00002", APISessionID: "apis000002", Deadline: deadline}, deadline.Add(time.Millisecond).Sub(at()))
	s.add(posture.ConfigChanged{MFAGraceSeconds: 120, APISessionTimeoutSeconds: 1800}, time.Second)
	s.write(t, "foundation.events.jsonl")
}
