package mfacode

import (
	"encoding/base32"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/seed-0809debe/posture"
)

func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCodeCustom(secret, at, totp.ValidateOpts{Period: Period, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCheck: the TOTP window (one period of skew either side), replayed
// counters, recovery codes (only where allowed, once each, legacy hashes
// too) and a missing enrollment, which matches nothing.
func TestCheck(t *testing.T) {
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("0123456789"))
	keys := Keys{Secret: secret, Nonce: "nonce-1"}
	now := time.Date(2026, 5, 1, 12, 0, 15, 0, time.UTC) // mid-period
	step := now.Unix() / Period
	codes := RecoveryCodes(secret, "nonce-1")
	enrollment := func() *posture.MFA {
		m := &posture.MFA{IdentityID: "ident1", LastCounter: step - 5, RecoveryCodes: RecoveryHashes("ident1", secret, codes)}
		m.RecoveryCodes[1] = legacyRecoveryHash("ident1", codes[1]) // an enrollment from an older log
		return m
	}
	for _, tc := range []struct {
		name     string
		m        *posture.MFA
		keys     Keys
		code     string
		recovery bool
		want     posture.MFACode
		ok       bool
	}{
		{"current period", enrollment(), keys, code(t, secret, now), false, posture.MFACode{Counter: step, APISessionID: "as1"}, true},
		{"previous period (skew)", enrollment(), keys, code(t, secret, now.Add(-Period*time.Second)), false, posture.MFACode{Counter: step - 1, APISessionID: "as1"}, true},
		{"next period (skew)", enrollment(), keys, code(t, secret, now.Add(Period*time.Second)), false, posture.MFACode{Counter: step + 1, APISessionID: "as1"}, true},
		{"two periods ago (skew)", enrollment(), keys, code(t, secret, now.Add(-2*Period*time.Second)), false, posture.MFACode{Counter: step - 2, APISessionID: "as1"}, true},
		{"two periods ahead (skew)", enrollment(), keys, code(t, secret, now.Add(2*Period*time.Second)), false, posture.MFACode{Counter: step + 2, APISessionID: "as1"}, true},
		{"three periods ago", enrollment(), keys, code(t, secret, now.Add(-3*Period*time.Second)), false, posture.MFACode{}, false},
		{"three periods ahead", enrollment(), keys, code(t, secret, now.Add(3*Period*time.Second)), false, posture.MFACode{}, false},
		{"replayed counter", func() *posture.MFA { m := enrollment(); m.LastCounter = step; return m }(), keys, code(t, secret, now), false, posture.MFACode{}, false},
		{"earlier than the last accepted", func() *posture.MFA { m := enrollment(); m.LastCounter = step; return m }(), keys, code(t, secret, now.Add(-Period*time.Second)), false, posture.MFACode{}, false},
		{"later than the last accepted", func() *posture.MFA { m := enrollment(); m.LastCounter = step; return m }(), keys, code(t, secret, now.Add(Period*time.Second)), false, posture.MFACode{Counter: step + 1, APISessionID: "as1"}, true},
		{"wrong secret", enrollment(), Keys{Secret: dummySecret}, code(t, secret, now), false, posture.MFACode{}, false},
		{"empty code", enrollment(), keys, "", true, posture.MFACode{}, false},
		{"missing enrollment", nil, NoEnrollment(), code(t, dummySecret, now), true, posture.MFACode{}, false},
		{"missing enrollment, recovery", nil, NoEnrollment(), codes[0], true, posture.MFACode{}, false},
		{"recovery code", enrollment(), keys, codes[0], true, posture.MFACode{RecoveryHash: hashRecoveryCode("ident1", secret, codes[0])}, true},
		{"recovery code, lower case", enrollment(), keys, strings.ToLower(codes[2]), true, posture.MFACode{RecoveryHash: hashRecoveryCode("ident1", secret, codes[2])}, true},
		{"legacy recovery hash", enrollment(), keys, codes[1], true, posture.MFACode{RecoveryHash: legacyRecoveryHash("ident1", codes[1])}, true},
		{"recovery code where only a TOTP is taken", enrollment(), keys, codes[0], false, posture.MFACode{}, false},
		{"used recovery code", func() *posture.MFA { m := enrollment(); m.RecoveryCodes = m.RecoveryCodes[1:]; return m }(), keys, codes[0], true, posture.MFACode{}, false},
		{"another identity's recovery code", enrollment(), keys, RecoveryCodes(secret, "nonce-2")[0], true, posture.MFACode{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Check(tc.m, tc.keys, tc.code, "as1", false, now, tc.recovery)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("Check = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestCheckAgain: the code of the last accepted step is taken again only
// when again is set and by the API session that used it.
func TestCheckAgain(t *testing.T) {
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("0123456789"))
	keys := Keys{Secret: secret}
	now := time.Date(2026, 5, 1, 12, 0, 15, 0, time.UTC)
	step := now.Unix() / Period
	usedBy := func(session string) *posture.MFA {
		return &posture.MFA{IdentityID: "ident1", LastCounter: step, LastCounterAPISession: session}
	}
	for _, tc := range []struct {
		name    string
		m       *posture.MFA
		session string
		again   bool
		code    string
		ok      bool
	}{
		{"again, by the API session that used it", usedBy("as1"), "as1", true, code(t, secret, now), true},
		{"not again, by the API session that used it", usedBy("as1"), "as1", false, code(t, secret, now), false},
		{"again, by another API session", usedBy("as2"), "as1", true, code(t, secret, now), false},
		{"again, no session on either side", usedBy(""), "", true, code(t, secret, now), false},
		{"again, an earlier step, by the API session that used the last", usedBy("as1"), "as1", true, code(t, secret, now.Add(-Period*time.Second)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Check(tc.m, keys, tc.code, tc.session, tc.again, now, false)
			if ok != tc.ok || ok && (got.Counter != step || got.APISessionID != tc.session) {
				t.Fatalf("Check = %+v, %v; want ok %v", got, ok, tc.ok)
			}
		})
	}
}

// TestRecoveryCodes: twenty distinct six-character base32 codes, derived
// (the same secret and nonce give the same codes; a new nonce new ones),
// and Remaining lists the unused ones in order.
func TestRecoveryCodes(t *testing.T) {
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("abcdefghij"))
	codes := RecoveryCodes(secret, "n1")
	if len(codes) != RecoveryCount {
		t.Fatalf("%d codes, want %d", len(codes), RecoveryCount)
	}
	seen := map[string]bool{}
	for _, c := range codes {
		if len(c) != 6 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" || seen[c] {
			t.Fatalf("code %q: want six distinct base32 characters", c)
		}
		seen[c] = true
	}
	if again := RecoveryCodes(secret, "n1"); strings.Join(again, ",") != strings.Join(codes, ",") {
		t.Fatal("the same secret and nonce derived other codes")
	}
	if other := RecoveryCodes(secret, "n2"); other[0] == codes[0] {
		t.Fatal("a new nonce derived the same codes")
	}
	m := posture.MFA{IdentityID: "ident1", RecoveryCodes: RecoveryHashes("ident1", secret, codes)}
	m.RecoveryCodes = append(m.RecoveryCodes[:3:3], m.RecoveryCodes[4:]...) // code 3 used
	left := Remaining(m, Keys{Secret: secret, Nonce: "n1"})
	want := append(append([]string{}, codes[:3]...), codes[4:]...)
	if strings.Join(left, ",") != strings.Join(want, ",") {
		t.Fatalf("Remaining = %v, want %v", left, want)
	}
	for _, h := range m.RecoveryCodes {
		for _, c := range codes {
			if strings.Contains(h, c) {
				t.Fatalf("hash %s shows code %s", h, c)
			}
		}
	}
}

// TestProvisioningURL: the otpauth URL carries the secret, issuer, account
// (the identity id when the enrollment names none) and the parameters.
func TestProvisioningURL(t *testing.T) {
	secret := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString([]byte("0123456789"))
	for _, tc := range []struct {
		m       posture.MFA
		account string
	}{
		{posture.MFA{IdentityID: "ident1", Issuer: "postured", Account: "laptop"}, "laptop"},
		{posture.MFA{IdentityID: "ident1", Issuer: "postured"}, "ident1"},
	} {
		u, err := ProvisioningURL(tc.m, secret)
		if err != nil {
			t.Fatal(err)
		}
		key, err := otp.NewKeyFromURL(u)
		if err != nil {
			t.Fatal(err)
		}
		if key.Secret() != secret || key.Issuer() != "postured" || key.AccountName() != tc.account || key.Period() != Period || key.Digits() != otp.DigitsSix {
			t.Fatalf("URL %s", u)
		}
	}
	if _, err := ProvisioningURL(posture.MFA{IdentityID: "x"}, "not base32!"); err == nil {
		t.Fatal("a secret that is not base32 gave a URL")
	}
}
