package api

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/seed-0809debe/posture"
)

// Bounds of fields that have no business being large. Every event must fit
// the log's message limit (1 MiB on a default NATS server), and JSON
// escaping can make an event up to six times larger than the text it
// carries ("<" is written \u003c): a request under the body limit is not
// enough. What these bounds do not catch (many fields near their bounds at
// once) is refused as a whole with 413 REQUEST_ENTITY_TOO_LARGE by the log.
const (
	// MaxLabel bounds short strings: sdkInfo and envInfo fields, role
	// attributes, tag keys, posture response ids, OS types and versions,
	// domains, hashes, config type names.
	MaxLabel = 255
	// MaxPath bounds a process path in a posture response.
	MaxPath = 4096
	// MaxTagValue bounds one tag's string value.
	MaxTagValue = 4096
	// MaxTagsJSON bounds a tag map, as JSON with escaping.
	MaxTagsJSON = 64 << 10
	// MaxList bounds lists of labels: role attributes, roles of a policy,
	// MAC addresses, signer fingerprints, config types.
	MaxList = 500
	// MaxBulk bounds the posture responses of one bulk request.
	MaxBulk = 1000
	// MaxSigners bounds the signer fingerprints of one process's posture
	// response (a binary has one signer, or a few).
	MaxSigners = 32
	// MaxMAC bounds one address of a MAC posture response: 20 bytes
	// (InfiniBand's) written with separators take 59 characters.
	MaxMAC = 64
	// MaxConfigTypes bounds the config types a client names at login (it
	// needs a few); an API session keeps them while it lasts.
	MaxConfigTypes = 64
)

// CheckMax fails when v has more than max characters. The error names the
// field and, instead of echoing a long value, its length.
func CheckMax(field, v string, max int) error {
	if n := utf8.RuneCountInString(v); n > max {
		return posture.Invalid(field, fmt.Sprintf("must be at most %d characters", max), fmt.Sprintf("(%d characters)", n))
	}
	return nil
}

// CheckLabels bounds a list of labels: at most MaxList entries of at most
// MaxLabel characters each.
func CheckLabels(field string, l []string) error { return CheckList(field, l, MaxList, MaxLabel) }

// CheckList bounds a list of strings: at most entries of at most chars
// characters each.
func CheckList(field string, l []string, entries, chars int) error {
	if len(l) > entries {
		return posture.Invalid(fmt.Sprintf("%s[%d]", field, entries), fmt.Sprintf("at most %d entries", entries), fmt.Sprintf("(%d entries)", len(l)))
	}
	for i, s := range l {
		if err := CheckMax(fmt.Sprintf("%s[%d]", field, i), s, chars); err != nil {
			return err
		}
	}
	return nil
}

// CheckSDKInfo bounds what a client says of its SDK at login.
func CheckSDKInfo(s *posture.SDKInfo) error {
	if s == nil {
		return nil
	}
	return checkFields("sdkInfo", map[string]string{"type": s.Type, "version": s.Version, "branch": s.Branch,
		"revision": s.Revision, "appId": s.AppID, "appVersion": s.AppVersion})
}

// CheckEnvInfo bounds what a client says of its environment at login.
func CheckEnvInfo(e *posture.EnvInfo) error {
	if e == nil {
		return nil
	}
	return checkFields("envInfo", map[string]string{"os": e.OS, "arch": e.Arch, "osRelease": e.OSRelease,
		"osVersion": e.OSVersion, "domain": e.Domain, "hostname": e.Hostname})
}

func checkFields(prefix string, fields map[string]string) error {
	for name, v := range fields {
		if err := CheckMax(prefix+"."+name, v, MaxLabel); err != nil {
			return err
		}
	}
	return nil
}

// Visible reports whether a name shows as it reads, so that two names that
// look alike are alike: it holds no control character, line or paragraph
// separator, space other than U+0020, blank (U+2800), formatting character
// or other default-ignorable code point (a Hangul filler, a combining
// grapheme joiner, a variation selector), which make "payroll" and
// "payroll\u034f" look alike. What scripts and emoji need is kept where
// they need it: the emoji variation selectors (U+FE0E, U+FE0F) after a
// symbol, or after a digit, '#' or '*' of a keycap; the zero-width joiner
// between emoji, or after a letter or mark of a script other than Latin,
// Greek and Cyrillic (as after a virama); the zero-width non-joiner there
// too.
func Visible(name string) bool {
	rs := []rune(name)
	for i, r := range rs {
		prev, next := rune(-1), rune(-1)
		if i > 0 {
			prev = rs[i-1]
		}
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		if !shows(r, prev, next) {
			return false
		}
	}
	return true
}

// shows is Visible's rule for one rune between its neighbours (-1: none).
func shows(r, prev, next rune) bool {
	switch {
	case r == '\uFE0E' || r == '\uFE0F':
		keycap := prev == '#' || prev == '*' || '0' <= prev && prev <= '9'
		return unicode.Is(unicode.So, prev) || keycap && next == '\u20E3'
	case r == '\u200D':
		emoji := unicode.In(prev, unicode.So, unicode.Sk) || prev == '\uFE0F'
		return emoji && unicode.Is(unicode.So, next) || otherScript(prev) && unicode.IsLetter(next)
	case r == '\u200C':
		return otherScript(prev) && unicode.IsLetter(next)
	case r == ' ':
		return true
	}
	return !(unicode.IsControl(r) || unicode.IsSpace(r) || r == '\u2800' ||
		unicode.In(r, unicode.Zl, unicode.Zp, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector))
}

// CheckText refuses a new text shown to users (a message) that holds a
// control character, a line or paragraph separator or a formatting
// character other than the joiners, such as a bidirectional override that
// shows "exe.pdf" for "fdp.exe". Unlike a name it may hold any space.
func CheckText(field, s string) error {
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Cf, r) && r != '\u200C' && r != '\u200D' {
			return posture.Invalid(field, "must not contain control characters, line separators or invisible formatting characters", s)
		}
	}
	return nil
}

// otherScript reports whether a rune is a letter or mark of a script other
// than Latin, Greek and Cyrillic (the scripts whose letters spoof one
// another), where joiners shape the text.
func otherScript(r rune) bool {
	return (unicode.IsLetter(r) || unicode.IsMark(r)) &&
		!unicode.In(r, unicode.Latin, unicode.Greek, unicode.Cyrillic, unicode.Common, unicode.Inherited)
}

// CheckVisible refuses a new username (or name) that does not show as it
// reads (see Visible).
func CheckVisible(field, s string) error {
	if !Visible(s) {
		return posture.Invalid(field, "must not contain control characters, line separators, spaces other than U+0020 or invisible formatting characters", s)
	}
	return nil
}
