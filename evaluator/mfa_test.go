package evaluator

import (
	"testing"
	"time"

	posture "github.com/seed-0809debe/posture"
)

func at(s string) *time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &t
}

func TestMFATimeout(t *testing.T) {
	for _, tt := range []struct {
		check posture.Check
		want  int64
	}{
		{posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: 3600}, 3600},
		{posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: 1}, 1},
		{posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: 0}, -1},
		{posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: -1}, -1},
		{posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: -7}, -1},
		{posture.Check{TypeID: posture.CheckOS, TimeoutSeconds: 3600}, -1},
	} {
		if got := MFATimeout(tt.check); got != tt.want {
			t.Errorf("MFATimeout(%s, %d) = %d, want %d", tt.check.TypeID, tt.check.TimeoutSeconds, got, tt.want)
		}
	}
}

func TestMFATimeoutRemaining(t *testing.T) {
	const (
		passed = "2024-06-01T12:00:00Z"
		hour   = 3600
	)
	cSDK := &posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.26.1"}
	mfa := func(timeout int64, wake, unlock, ignoreLegacy bool) posture.Check {
		return posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: timeout,
			PromptOnWake: wake, PromptOnUnlock: unlock, IgnoreLegacyEndpoints: ignoreLegacy}
	}
	session := func(passedAt, woken, unlocked *time.Time, sdk *posture.SDKInfo) posture.SessionPosture {
		return posture.SessionPosture{APISessionID: "s1", MFAPassedAt: passedAt, WokenAt: woken, UnlockedAt: unlocked, SDKInfo: sdk}
	}
	for _, tt := range []struct {
		name    string
		check   posture.Check
		session posture.SessionPosture
		grace   time.Duration
		now     string
		want    int64
	}{
		{"not an MFA check", posture.Check{TypeID: posture.CheckMAC, TimeoutSeconds: hour}, session(at(passed), nil, nil, cSDK), DefaultMFAGrace, passed, -1},
		{"no timeout (-1)", mfa(-1, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, passed, -1},
		{"no timeout (0)", mfa(0, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, passed, -1},
		{"no timeout, wake grace running: still -1", mfa(-1, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:11:00Z", -1},
		{"never passed", mfa(hour, false, false, false), session(nil, nil, nil, cSDK), DefaultMFAGrace, passed, 0},
		{"never passed beats legacy", mfa(hour, false, false, true), session(nil, nil, nil, nil), DefaultMFAGrace, passed, 0},
		{"at the TOTP", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, passed, hour},
		{"T-1", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2024-06-01T12:59:59Z", 1},
		{"T-0.5s rounds up to 1", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2024-06-01T12:59:59.5Z", 1},
		{"T", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2024-06-01T13:00:00Z", 0},
		{"T+1 floored at 0", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2024-06-01T13:00:01Z", 0},
		{"long after", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2025-06-01T13:00:01Z", 0},
		{"TOTP in the future: capped at T", mfa(hour, false, false, false), session(at(passed), nil, nil, cSDK), DefaultMFAGrace, "2024-06-01T11:00:00Z", hour},
		{"legacy: no sdkInfo", mfa(hour, false, false, true), session(at(passed), nil, nil, nil), DefaultMFAGrace, "2024-06-01T12:30:00Z", -1},
		{"legacy: other SDK", mfa(hour, false, false, true), session(at(passed), nil, nil, &posture.SDKInfo{Type: "ziti-sdk-golang", Version: "1.0.0"}), DefaultMFAGrace, "2024-06-01T12:30:00Z", -1},
		{"legacy: old C SDK", mfa(hour, false, false, true), session(at(passed), nil, nil, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.24.9"}), DefaultMFAGrace, "2024-06-01T12:30:00Z", -1},
		{"legacy: C SDK 0.25.0 pre-release", mfa(hour, false, false, true), session(at(passed), nil, nil, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.25.0-rc1"}), DefaultMFAGrace, "2024-06-01T12:30:00Z", -1},
		{"legacy: unparsable C SDK version", mfa(hour, false, false, true), session(at(passed), nil, nil, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "v0.26"}), DefaultMFAGrace, "2024-06-01T12:30:00Z", -1},
		{"not legacy: C SDK 0.25.0", mfa(hour, false, false, true), session(at(passed), nil, nil, &posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.25.0"}), DefaultMFAGrace, "2024-06-01T12:30:00Z", 1800},
		{"legacy ignored without the flag", mfa(hour, false, false, false), session(at(passed), nil, nil, nil), DefaultMFAGrace, "2024-06-01T12:30:00Z", 1800},
		{"wake lowers to the grace left", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:11:00Z", 240},
		{"wake+grace-1s", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:14:59Z", 1},
		{"wake+grace-0.5s rounds up to 1", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:14:59.5Z", 1},
		{"wake+grace", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:15:00Z", 0},
		{"wake+grace+1s", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:15:01Z", 0},
		{"wake ignored without promptOnWake", mfa(hour, false, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:11:00Z", 2940},
		{"wake before the TOTP ignored", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T11:59:59Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:11:00Z", 2940},
		{"wake at the TOTP counts", mfa(hour, true, false, false), session(at(passed), at(passed), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:01:00Z", 240},
		{"grace longer than the timeout left", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:58:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:58:30Z", 90},
		{"wake in the future: full grace", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:20:00Z"), nil, cSDK), DefaultMFAGrace, "2024-06-01T12:10:00Z", 300},
		{"unlock lowers", mfa(hour, false, true, false), session(at(passed), nil, at("2024-06-01T12:10:00Z"), cSDK), DefaultMFAGrace, "2024-06-01T12:12:00Z", 180},
		{"unlock ignored without promptOnUnlock", mfa(hour, true, false, false), session(at(passed), nil, at("2024-06-01T12:10:00Z"), cSDK), DefaultMFAGrace, "2024-06-01T12:12:00Z", 2880},
		{"both: the smaller grace left wins", mfa(hour, true, true, false), session(at(passed), at("2024-06-01T12:10:00Z"), at("2024-06-01T12:12:00Z"), cSDK), DefaultMFAGrace, "2024-06-01T12:13:00Z", 120},
		{"custom grace 90s", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), 90 * time.Second, "2024-06-01T12:10:30Z", 60},
		{"negative grace counts as 0", mfa(hour, true, false, false), session(at(passed), at("2024-06-01T12:10:00Z"), nil, cSDK), -time.Minute, "2024-06-01T12:10:00Z", 0},
		{"legacy beats the grace", mfa(hour, true, false, true), session(at(passed), at("2024-06-01T12:10:00Z"), nil, nil), DefaultMFAGrace, "2024-06-01T12:11:00Z", -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Data{Session: tt.session, MFAGrace: tt.grace}
			if got := MFATimeoutRemaining(tt.check, d, *at(tt.now)); got != tt.want {
				t.Errorf("MFATimeoutRemaining at %s = %d, want %d", tt.now, got, tt.want)
			}
		})
	}
}

func TestIsLegacyEndpoint(t *testing.T) {
	for _, tt := range []struct {
		info *posture.SDKInfo
		want bool
	}{
		{nil, true},
		{&posture.SDKInfo{}, true},
		{&posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.25.0"}, false},
		{&posture.SDKInfo{Type: "ziti-sdk-c", Version: "1.3.7"}, false},
		{&posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.24.99"}, true},
		{&posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.25.0-rc1"}, true},
		{&posture.SDKInfo{Type: "ziti-sdk-c", Version: "0.25"}, true},
		{&posture.SDKInfo{Type: "ZITI-SDK-C", Version: "1.0.0"}, true},
		{&posture.SDKInfo{Type: "ziti-sdk-golang", Version: "1.0.0"}, true},
	} {
		if got := IsLegacyEndpoint(tt.info); got != tt.want {
			t.Errorf("IsLegacyEndpoint(%+v) = %t, want %t", tt.info, got, tt.want)
		}
	}
}

// TestMFATimedOutIsSticky: once the projection found the timeout elapsed,
// an MFA check fails whatever its timeout, with 0 seconds remaining, until
// MFA is passed again.
func TestMFATimedOutIsSticky(t *testing.T) {
	now := *at("2026-01-01T12:00:00Z")
	timedOut := posture.SessionPosture{MFAPassedAt: at("2026-01-01T11:00:00Z"), MFATimedOutAt: at("2026-01-01T11:01:00Z")}
	passedAgain := timedOut
	passedAgain.MFAPassedAt = at("2026-01-01T11:59:00Z")
	for _, timeout := range []int64{7200, -1} {
		c := posture.Check{TypeID: posture.CheckMFA, TimeoutSeconds: timeout}
		v := Evaluate(c, Data{Session: timedOut}, now)
		if a, _ := v.Actual.(MFAValue); v.Pass || !a.TimedOut || !a.PassedMFA {
			t.Errorf("timeout %d after a timeout found: %+v", timeout, v)
		}
		if r := MFATimeoutRemaining(c, Data{Session: timedOut}, now); r != min(timeout, 0) {
			t.Errorf("timeout %d after a timeout found: %d remaining", timeout, r)
		}
		if v := Evaluate(c, Data{Session: passedAgain}, now); !v.Pass {
			t.Errorf("timeout %d, MFA passed again: %+v", timeout, v)
		}
	}
}
