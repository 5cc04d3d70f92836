package projections_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/projections"
)

// An identity keeps what its clients last reported at authenticate, after
// its API sessions end; hasApiSession follows the live sessions; deleting
// the identity drops the report.
func TestClientInfoOutlivesAPISessions(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	id := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	session := func(sid string, env *posture.EnvInfo, sdk *posture.SDKInfo) posture.Payload {
		return posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			AuthMethod: "password", ConfigTypes: []string{}, EnvInfo: env, SDKInfo: sdk, CreatedAt: at, LastActivityAt: at}}
	}
	a := &applier{s: s, at: at, step: time.Second}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	check := func(wantSession bool, wantHost, wantVersion string) {
		t.Helper()
		has, err := s.HasAPISession(id.ID)
		if err != nil || has != wantSession {
			t.Fatalf("HasAPISession: %v %v, want %v", has, err, wantSession)
		}
		info, err := s.ClientInfo(id.ID)
		if err != nil {
			t.Fatal(err)
		}
		var host, version string
		if info.EnvInfo != nil {
			host = info.EnvInfo.Hostname
		}
		if info.SDKInfo != nil {
			version = info.SDKInfo.Version
		}
		if host != wantHost || version != wantVersion {
			t.Fatalf("client info %+v, want host %q version %q", info, wantHost, wantVersion)
		}
	}

	apply(posture.Created[posture.Identity]{Entity: id})
	check(false, "", "")
	apply(session("as1", &posture.EnvInfo{Hostname: "lap-1", OS: "windows"}, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "1.0.0"}))
	check(true, "lap-1", "1.0.0")
	// A later report replaces the part it sends; one without any keeps all.
	apply(session("as2", nil, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "1.1.0"}))
	check(true, "lap-1", "1.1.0")
	apply(session("as3", nil, nil))
	check(true, "lap-1", "1.1.0")
	for _, sid := range []string{"as1", "as2", "as3"} {
		apply(posture.APISessionDeleted{ID: sid, IdentityID: id.ID, Reason: "logout"})
	}
	check(false, "lap-1", "1.1.0")
	apply(posture.Deleted[posture.Identity]{ID: id.ID})
	check(false, "", "")
}

// A disable ends the identity's API sessions; a login that raced it (its
// session event after the disable) starts none, also once the identity is
// enabled again; a timed disable that ended lets sessions start.
func TestDisabledIdentitiesHaveNoSessions(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	id := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	a := &applier{s: s, at: at, step: time.Minute}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	login := func(sid string) {
		t.Helper()
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
	}
	live := func(sid string) bool {
		t.Helper()
		_, err := s.APISessionByTokenHash("h-" + sid)
		return err == nil
	}
	apply(posture.Created[posture.Identity]{Entity: id})
	login("before")
	disabled := id
	disabledAt := at.Add(2 * time.Minute)
	disabled.Disabled, disabled.DisabledAt = true, &disabledAt
	apply(posture.Updated[posture.Identity]{Entity: disabled})
	login("raced")
	apply(posture.Updated[posture.Identity]{Entity: id}) // enabled
	if live("before") || live("raced") {
		t.Fatalf("API sessions of a disabled identity after its enable: before %v, raced %v", live("before"), live("raced"))
	}
	login("after")
	timed := disabled
	until := at.Add(10 * time.Minute) // ends before the next login
	timed.DisabledUntil = &until
	apply(posture.Updated[posture.Identity]{Entity: timed})
	for a.seq < 10 {
		apply(posture.APISessionTouched{ID: "none", IdentityID: id.ID, At: at})
	}
	login("later")
	if live("after") || !live("later") {
		t.Fatalf("a timed disable: the session of before it %v (want ended), one after it ended %v (want live)", live("after"), live("later"))
	}
}

// Deleting an authenticator, or the CA that verified a certificate, ends
// the API sessions that logged in with it, and a login that checked it
// before the delete but is recorded after it starts none; a login without
// an authenticator (an external JWT's) is not concerned.
func TestRevokedCredentialsHaveNoSessions(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	id := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	au := posture.Authenticator{ID: "auth1", IdentityID: id.ID, Method: posture.MethodPassword, Username: "laptop-user", CreatedAt: at, UpdatedAt: at}
	a := &applier{s: s, at: at, step: time.Second}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	login := func(sid, authenticatorID string) {
		t.Helper()
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			AuthenticatorID: authenticatorID, AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
	}
	live := func(sid string) bool {
		t.Helper()
		_, err := s.APISessionByTokenHash("h-" + sid)
		return err == nil
	}
	apply(posture.Created[posture.Identity]{Entity: id})
	apply(posture.Created[posture.Authenticator]{Entity: au})
	login("before", au.ID)
	if !live("before") {
		t.Fatal("a login with an existing authenticator started no session")
	}
	apply(posture.Deleted[posture.Authenticator]{ID: au.ID})
	login("raced", au.ID)
	login("ext-jwt", "")
	if live("before") || live("raced") || !live("ext-jwt") {
		t.Fatalf("after the authenticator's delete: before %v, raced %v (want both ended), ext-jwt %v (want live)",
			live("before"), live("raced"), live("ext-jwt"))
	}

	// A certificate's sessions name the CA that verified its chain: its
	// delete ends them (not those another CA verified), and a login it
	// verified that is recorded after the delete starts none.
	cert := posture.Authenticator{ID: "auth2", IdentityID: id.ID, Method: posture.MethodCert, CertPEM: "(issued by an intermediate)", CreatedAt: at, UpdatedAt: at}
	apply(posture.Created[posture.Authenticator]{Entity: cert})
	for _, ca := range []string{"ca1", "ca2"} {
		apply(posture.Created[posture.CA]{Entity: posture.CA{ID: ca, Name: ca, CertPEM: "(a root)", CreatedAt: at, UpdatedAt: at}})
	}
	certLogin := func(sid, caID string) {
		t.Helper()
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			AuthenticatorID: cert.ID, CAID: caID, AuthMethod: "cert", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
	}
	certLogin("via-ca1", "ca1")
	certLogin("via-ca2", "ca2")
	apply(posture.Deleted[posture.CA]{ID: "ca1"})
	certLogin("raced-ca1", "ca1")
	if live("via-ca1") || live("raced-ca1") || !live("via-ca2") {
		t.Fatalf("after ca1's delete: via ca1 %v, raced %v (want both ended), via ca2 %v (want live)",
			live("via-ca1"), live("raced-ca1"), live("via-ca2"))
	}

	// So do an external JWT signer's, whose delete ends the sessions of the
	// tokens it verified, not another's.
	for _, signer := range []string{"idp1", "idp2"} {
		apply(posture.Created[posture.ExternalJWTSigner]{Entity: posture.ExternalJWTSigner{ID: signer, Name: signer, Issuer: "https://" + signer, CreatedAt: at, UpdatedAt: at}})
	}
	jwtLogin := func(sid, signerID string) {
		t.Helper()
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			SignerID: signerID, AuthMethod: "ext-jwt", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
	}
	jwtLogin("via-idp1", "idp1")
	jwtLogin("via-idp2", "idp2")
	apply(posture.Deleted[posture.ExternalJWTSigner]{ID: "idp1"})
	jwtLogin("raced-idp1", "idp1")
	if live("via-idp1") || live("raced-idp1") || !live("via-idp2") {
		t.Fatalf("after idp1's delete: via idp1 %v, raced %v (want both ended), via idp2 %v (want live)",
			live("via-idp1"), live("raced-idp1"), live("via-idp2"))
	}
}

// A login that read a password since changed, recorded after the change,
// starts no session (one that read the new one does, as do those of old
// logs, which name no credential time); apisession.all-ended ends every
// session the identity has where it lands in the log, not another's.
func TestChangedCredentialsAndAllEnded(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := &applier{s: s, at: at, step: time.Second}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	var aus []posture.Authenticator
	for _, name := range []string{"admin", "other"} {
		id := posture.Identity{ID: "ident-" + name, Name: name, Type: posture.IdentityUser, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
		au := posture.Authenticator{ID: "auth-" + name, IdentityID: id.ID, Method: posture.MethodPassword, Username: name + "-user", CreatedAt: at, UpdatedAt: at}
		apply(posture.Created[posture.Identity]{Entity: id})
		apply(posture.Created[posture.Authenticator]{Entity: au})
		aus = append(aus, au)
	}
	login := func(sid string, au posture.Authenticator, credentialAt time.Time) {
		t.Helper()
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: au.IdentityID,
			AuthenticatorID: au.ID, CredentialAt: credentialAt, AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: at, LastActivityAt: at}})
	}
	live := func(sid string) bool {
		t.Helper()
		_, err := s.APISessionByTokenHash("h-" + sid)
		return err == nil
	}
	admin, other := aus[0], aus[1]
	login("before", admin, admin.UpdatedAt)
	login("other", other, other.UpdatedAt)
	changed := admin
	changed.PasswordHashSealed, changed.UpdatedAt = "(a new one)", at.Add(time.Hour)
	apply(posture.Updated[posture.Authenticator]{Entity: changed})
	login("old-password", admin, admin.UpdatedAt)
	login("new-password", admin, changed.UpdatedAt)
	login("old-log", admin, time.Time{})
	if !live("before") || live("old-password") || !live("new-password") || !live("old-log") {
		t.Fatalf("after the password change: before %v (want live), old password %v (want refused), new password %v, an old log's %v (want live)",
			live("before"), live("old-password"), live("new-password"), live("old-log"))
	}
	apply(posture.APISessionsEnded{IdentityID: admin.IdentityID, Reason: "recovered by an operator"})
	if live("before") || live("new-password") || live("old-log") || !live("other") {
		t.Fatalf("after all ended: before %v, new password %v, old log %v (want all ended), another identity's %v (want live)",
			live("before"), live("new-password"), live("old-log"), live("other"))
	}
	login("after", admin, changed.UpdatedAt)
	if !live("after") {
		t.Fatal("a login after the end of all sessions started none")
	}
}

// An identity keeps at most MaxAPISessions API sessions: a login past them
// ends the least recently used (a touched old one stays), and the count
// never grows past the bound.
func TestAPISessionsPerIdentityAreBounded(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	id := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	a := &applier{s: s, at: at, step: time.Second}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	login := func(i int) {
		t.Helper()
		sid := fmt.Sprintf("as%03d", i)
		when := at.Add(time.Duration(i) * time.Second)
		apply(posture.APISessionCreated{APISession: posture.APISession{ID: sid, TokenHash: "h-" + sid, IdentityID: id.ID,
			AuthMethod: "password", ConfigTypes: []string{}, CreatedAt: when, LastActivityAt: when}})
	}
	live := func(i int) bool {
		_, err := s.APISessionByTokenHash(fmt.Sprintf("h-as%03d", i))
		return err == nil
	}
	apply(posture.Created[posture.Identity]{Entity: id})
	for i := range projections.MaxAPISessions {
		login(i)
	}
	// The first is in use again; the next two logins end the second and
	// the third, the least recently used.
	apply(posture.APISessionTouched{ID: "as000", IdentityID: id.ID, At: at.Add(time.Hour)})
	login(projections.MaxAPISessions)
	login(projections.MaxAPISessions + 1)
	if !live(0) || live(1) || live(2) || !live(3) || !live(projections.MaxAPISessions+1) {
		t.Fatalf("live: as000 %v (want true), as001 %v, as002 %v (want false), as003 %v, the newest %v (want true)",
			live(0), live(1), live(2), live(3), live(projections.MaxAPISessions+1))
	}
	all, err := s.APISessions()
	if err != nil || len(all) != projections.MaxAPISessions || s.Evicted() != 2 {
		t.Fatalf("%d API sessions (%v), want %d; %d evicted, want 2", len(all), err, projections.MaxAPISessions, s.Evicted())
	}
}

// An identity's own service configs are kept as last set, dropped when set
// empty or when the identity is deleted, and ignored for an identity that
// does not exist.
func TestIdentityServiceConfigsFollowTheIdentity(t *testing.T) {
	s := openMem(t, vfs.NewMem())
	defer s.Close()
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	a := &applier{s: s, at: at, step: time.Second}
	apply := func(p posture.Payload) { t.Helper(); a.apply(t, p) }
	check := func(id string, want int) {
		t.Helper()
		got, err := s.IdentityServiceConfigs(id)
		if err != nil || len(got["svc1"]) != want {
			t.Fatalf("service configs of %s: %v %v, want %d", id, got, err, want)
		}
	}
	two := map[string]map[string]string{"svc1": {"type1": "cfg1", "type2": "cfg2"}}
	apply(posture.IdentityServiceConfigsSet{IdentityID: "nobody", Configs: two})
	check("nobody", 0)
	id := posture.Identity{ID: "ident1", Name: "laptop", Type: posture.IdentityDevice, RoleAttributes: []string{}, CreatedAt: at, UpdatedAt: at}
	apply(posture.Created[posture.Identity]{Entity: id})
	apply(posture.IdentityServiceConfigsSet{IdentityID: id.ID, Configs: two})
	check(id.ID, 2)
	apply(posture.IdentityServiceConfigsSet{IdentityID: id.ID, Configs: map[string]map[string]string{}})
	check(id.ID, 0)
	apply(posture.IdentityServiceConfigsSet{IdentityID: id.ID, Configs: two})
	apply(posture.Deleted[posture.Identity]{ID: id.ID})
	check(id.ID, 0)
	if n, err := s.Count(posture.KindIdentityServiceConfigs); n != 0 || err != nil {
		t.Fatalf("records left: %d %v", n, err)
	}
}
