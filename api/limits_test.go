package api_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestVisible: what a new name may not hold, and what it may where
// scripts and emoji need it.
func TestVisible(t *testing.T) {
	for name, want := range map[string]bool{
		"payroll": true, "café": true, "my service": true, "👩": true, "❤️": true, "❤︎": true, "1️⃣": true, "#️⃣": true,
		"👩\u200d💻": true, "🏳️\u200d🌈": true, "👍🏽": true, "می\u200cخواهم": true, "क्\u200dष": true, "東京": true, "Ελλάδα": true,

		"a\x00": false, "a\n": false, "a\x1b": false, "a\u0085": false, "a\u2028": false, "a\u2029": false,
		"a\u202eb": false, "a\u2066": false, "a\u200bb": false, "\ufeffa": false,
		"a\u034f": false, "a\u115f": false, "a\u3164": false, "a\uffa0": false, "a\U000E0001": false,
		"crm\ufe00": false, "crm\U000E0100": false, "crm\u180b": false, "crm\u180f": false, "crm\u2800": false,
		"crm\ufe0f": false, "crm1\ufe0f": false, "\ufe0fcrm": false,
		"svc\u200d": false, "s\u200dvc": false, "\u200dsvc": false, "s\u200cvc": false, "👩\u200d": false,
		"my\u00a0service": false, "my\u3000service": false, "my\u2003service": false, "a\tb": false,

		"renée": true, "ℹ️": true, "↔️": true, "‼️": true, "❤️\u200d🔥": true, "🐈\u200d⬛": true, "a b": true,
		"carol ": false, " carol": false, "ca  rol": false, "rene\u0301e": false,
		"用户\u200d名": false, "用户\u200c名": false, "acme°\u200d°": false, "★\u200d★": false, "carol°\ufe0e": false,
		"\u09B0\u200d\u09CD\u09AF\u09BE\u09AC": true, "\u0645\u0650\u200c\u06CC": true,
		"\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F": true,
		"admi\u0307n": false, "adm\u0131\u0307n": false, "\u0645\u200d\u062D\u0645\u062F": false,
		"\u062F\u0627\u200c\u0648\u062F": false, "\u0621\u200c\u0628": false, "\u0930\u093E\u092E\u094D\u200c": false,
		"a\U000E0067": false, "\U0001F3F4\u200d\U000E0067": false,
		"a\U00016FE4": false, "a\U0001D159": false, "a\ue000": false, "a\u0378": false, "a\uffff": false, "a\U000F0000": false,
	} {
		if api.Visible(name) != want {
			t.Errorf("Visible(%+q) = %v, want %v", name, !want, want)
		}
	}
}

// TestCheckText: a message may hold any space, not an override.
func TestCheckText(t *testing.T) {
	for text, ok := range map[string]bool{
		"Update Windows before 1 December": true, "Mise à jour\u00a0: avant décembre": true, "👩\u200d💻 ask IT": true,
		"install fix\u202eexe.pdf": false, "line\nbreak": false, "a\u2028b": false, "a\u200bb": false,
	} {
		if err := api.CheckText("message", text); (err == nil) != ok {
			t.Errorf("CheckText(%+q) = %v, want ok %v", text, err, ok)
		}
	}
}

// TestCheckVisibleSaysWhy: the refusal names the rule a name broke.
func TestCheckVisibleSaysWhy(t *testing.T) {
	for name, why := range map[string]string{
		"rene\u0301e": "composed form (NFC)", "carol ": "begin or end with a space", "ca  rol": "two in a row", "a\u200bb": "invisible formatting",
	} {
		err := api.CheckVisible("name", name)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != posture.CodeCouldNotValidate || !strings.Contains(pe.Reason, why) {
			t.Errorf("CheckVisible(%+q) = %v, want a refusal saying %q", name, err, why)
		}
	}
}

// A username in compatibility characters is refused with its plain form;
// plain usernames of any script, and names (not usernames), pass.
func TestCheckUsername(t *testing.T) {
	for name, plain := range map[string]string{"ａｄｍｉｎ": "admin", "oﬃce": "office", "admin²": "admin2", "Ⅸ-ops": "IX-ops"} {
		err := api.CheckUsername("username", name)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Field != "username" || !strings.Contains(pe.Reason, fmt.Sprintf("%q", plain)) {
			t.Errorf("CheckUsername(%q) = %v, want a refusal naming %q", name, err, plain)
		}
		if err := api.CheckVisible("name", name); err != nil {
			t.Errorf("CheckVisible(%q) = %v: only usernames are held to NFKC", name, err)
		}
	}
	for _, name := range []string{"admin", "Admin", "café", "東京-ops", "Ελλάδα", "laptop-01"} {
		if err := api.CheckUsername("username", name); err != nil {
			t.Errorf("CheckUsername(%q) = %v", name, err)
		}
	}
	if err := api.CheckUsername("username", "a\u200bb"); err == nil {
		t.Error("an invisible character passes CheckUsername")
	}
	// Letters of two scripts that are not one writing system are refused
	// (a Cyrillic а or Greek ο in a Latin name); Japanese, Chinese and
	// Korean with Latin pass.
	for _, name := range []string{"\u0430dmin", "r\u03bfot", "\u0430\u0434\u043c\u0438\u043d-ops-x"} {
		err := api.CheckUsername("username", name)
		var pe *posture.Error
		if !errors.As(err, &pe) || !strings.Contains(pe.Reason, "must not mix the letters of") {
			t.Errorf("CheckUsername(%q) = %v, want a refusal of mixed scripts", name, err)
		}
	}
	for _, name := range []string{"\u0430\u0434\u043c\u0438\u043d", "\u3059\u3057-tokyo", "\u6771\u4eac\u30bf\u30ef\u30fc-2", "\ud55c\uad6dadmin", "\u5317\u4eac\u3105"} {
		if err := api.CheckUsername("username", name); err != nil {
			t.Errorf("CheckUsername(%q) = %v", name, err)
		}
	}
}
