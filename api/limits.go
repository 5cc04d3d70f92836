package api

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

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

// CheckSDKInfo bounds what a client says of its SDK at login, and replaces
// what would not show as it reads (TextOnly).
func CheckSDKInfo(s *posture.SDKInfo) error {
	if s == nil {
		return nil
	}
	for _, f := range []*string{&s.Type, &s.Version, &s.Branch, &s.Revision, &s.AppID, &s.AppVersion} {
		*f = TextOnly(*f)
	}
	return checkFields("sdkInfo", map[string]string{"type": s.Type, "version": s.Version, "branch": s.Branch,
		"revision": s.Revision, "appId": s.AppID, "appVersion": s.AppVersion})
}

// CheckEnvInfo bounds what a client says of its environment at login, and
// replaces what would not show as it reads (TextOnly).
func CheckEnvInfo(e *posture.EnvInfo) error {
	if e == nil {
		return nil
	}
	for _, f := range []*string{&e.OS, &e.Arch, &e.OSRelease, &e.OSVersion, &e.Domain, &e.Hostname} {
		*f = TextOnly(*f)
	}
	return checkFields("envInfo", map[string]string{"os": e.OS, "arch": e.Arch, "osRelease": e.OSRelease,
		"osVersion": e.OSVersion, "domain": e.Domain, "hostname": e.Hostname})
}

// TextOnly is s with each character that does not show as it reads (what
// a name may not hold: controls, formatting, fillers, blanks, private use)
// replaced by U+FFFD, for what a client reports of itself at login: a
// login is not refused for a hostname, but an admin reading it sees what is
// odd in it.
func TextOnly(s string) string {
	rs := []rune(s)
	changed := false
	for i, r := range rs {
		if notText(r) || !shows(rs, i) {
			rs[i], changed = utf8.RuneError, true
		}
	}
	if !changed {
		return s
	}
	return string(rs)
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
// look alike are alike (see invisible).
func Visible(name string) bool { return invisible(name) == "" }

// invisible says why a name does not show as it reads ("": it does). A
// name holds letters, marks, numbers, punctuation, symbols and single
// spaces between them, in Unicode's composed form (NFC: "renée" is one way
// only), and none of what shows as nothing or as something else: control
// characters, line separators, other spaces, formatting characters (a
// bidirectional override), default-ignorable code points (a Hangul filler,
// a combining grapheme joiner, a variation selector), blanks (U+2800),
// private-use, unassigned and noncharacter code points, a mark above a
// dotted i or j (which fonts draw as the dot). What scripts and emoji need
// is kept where they need it: the emoji variation selectors (U+FE0E,
// U+FE0F) after an emoji, or after the digit, '#' or '*' of a keycap; the
// zero-width joiner inside an emoji sequence, and around a virama; the
// zero-width non-joiner after a virama, and after a letter of a joining
// script (Arabic, Syriac, N'Ko, Mongolian) that joins the next; the tags of
// a subdivision flag.
func invisible(name string) string {
	if strings.HasPrefix(name, " ") || strings.HasSuffix(name, " ") || strings.Contains(name, "  ") {
		return "must not begin or end with a space, or hold two in a row"
	}
	if !norm.NFC.IsNormalString(name) {
		return "must be in Unicode's composed form (NFC)"
	}
	rs := []rune(name)
	for i := range rs {
		if !shows(rs, i) {
			return "must not contain control characters, line separators, spaces other than U+0020, invisible formatting or blank characters"
		}
	}
	return ""
}

// shows is Visible's rule for the rune at i among its neighbours.
func shows(rs []rune, i int) bool {
	r, prev, next := rs[i], rune(-1), rune(-1)
	if i > 0 {
		prev = rs[i-1]
	}
	if i+1 < len(rs) {
		next = rs[i+1]
	}
	switch {
	case r == '\uFE0E' || r == '\uFE0F':
		keycap := prev == '#' || prev == '*' || '0' <= prev && prev <= '9'
		return unicode.Is(emoji, prev) || keycap && next == '\u20E3'
	case r == '\u200D':
		inEmoji := (prev == '\uFE0F' || unicode.Is(emoji, prev) && prev >= 0x1F000) && unicode.Is(emoji, next)
		return inEmoji || virama(prev) && unicode.IsLetter(next) || brahmic(prev) && virama(next)
	case r == '\u200C':
		return virama(prev) && unicode.IsLetter(next) || joinsNext(base(rs, i)) && joining(next)
	case 0xE0020 <= r && r <= 0xE007F: // a subdivision flag's tags, after its black flag
		return prev == 0x1F3F4 || 0xE0020 <= prev && prev <= 0xE007E
	case r == ' ':
		return true
	case unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector, blank):
		return false
	case 0x0300 <= r && r <= 0x0314 && strings.ContainsRune("ijıȷ", prev):
		return false
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// base is the last rune before i that is not a mark: the letter the marks
// before i sit on (-1: none).
func base(rs []rune, i int) rune {
	for j := i - 1; j >= 0; j-- {
		if !unicode.IsMark(rs[j]) {
			return rs[j]
		}
	}
	return -1
}

// blank are symbols and marks that show as nothing.
var blank = &unicode.RangeTable{R16: []unicode.Range16{{Lo: 0x2800, Hi: 0x2800, Stride: 1}}, R32: []unicode.Range32{
	{Lo: 0x16FE4, Hi: 0x16FE4, Stride: 1}, // Khitan small script filler
	{Lo: 0x1D159, Hi: 0x1D159, Stride: 1}, // musical symbol null notehead
}}

// emoji are the code points emoji sequences are made of: the emoji blocks
// (U+1F000 on), the older symbols with an emoji form, and those that
// follow a zero-width joiner in a sequence (♀, ♂, ⚕, ❤...).
var emoji = &unicode.RangeTable{R16: []unicode.Range16{
	{Lo: 0x00A9, Hi: 0x00AE, Stride: 5}, {Lo: 0x203C, Hi: 0x203C, Stride: 1}, {Lo: 0x2049, Hi: 0x2049, Stride: 1},
	{Lo: 0x2122, Hi: 0x2122, Stride: 1}, {Lo: 0x2139, Hi: 0x2139, Stride: 1}, {Lo: 0x2194, Hi: 0x2199, Stride: 1},
	{Lo: 0x21A9, Hi: 0x21AA, Stride: 1}, {Lo: 0x231A, Hi: 0x231B, Stride: 1}, {Lo: 0x2328, Hi: 0x2328, Stride: 1},
	{Lo: 0x23CF, Hi: 0x23CF, Stride: 1}, {Lo: 0x23E9, Hi: 0x23F3, Stride: 1}, {Lo: 0x23F8, Hi: 0x23FA, Stride: 1},
	{Lo: 0x24C2, Hi: 0x24C2, Stride: 1}, {Lo: 0x25AA, Hi: 0x25AB, Stride: 1}, {Lo: 0x25B6, Hi: 0x25B6, Stride: 1},
	{Lo: 0x25C0, Hi: 0x25C0, Stride: 1}, {Lo: 0x25FB, Hi: 0x25FE, Stride: 1}, {Lo: 0x2600, Hi: 0x27BF, Stride: 1},
	{Lo: 0x2934, Hi: 0x2935, Stride: 1}, {Lo: 0x2B05, Hi: 0x2B07, Stride: 1}, {Lo: 0x2B1B, Hi: 0x2B1C, Stride: 1},
	{Lo: 0x2B50, Hi: 0x2B50, Stride: 1}, {Lo: 0x2B55, Hi: 0x2B55, Stride: 1}, {Lo: 0x3030, Hi: 0x3030, Stride: 1},
	{Lo: 0x303D, Hi: 0x303D, Stride: 1}, {Lo: 0x3297, Hi: 0x3299, Stride: 2},
}, R32: []unicode.Range32{{Lo: 0x1F000, Hi: 0x1FAFF, Stride: 1}}}

// virama reports whether r is a virama (or a script's equivalent), after
// which the joiners choose a conjunct's form.
func virama(r rune) bool {
	switch r {
	case 0x094D, 0x09CD, 0x0A4D, 0x0ACD, 0x0B4D, 0x0BCD, 0x0C4D, 0x0CCD, 0x0D4D, 0x0DCA, 0x1039, 0x103A, 0x17D2, 0x1B44, 0xA8C4, 0xA9C0, 0x11046, 0x110B9:
		return true
	}
	return false
}

// joining reports whether r is a letter or mark of a script whose letters
// join, where the joiners choose a letter's form.
func joining(r rune) bool {
	return (unicode.IsLetter(r) || unicode.IsMark(r)) && unicode.In(r, unicode.Arabic, unicode.Syriac, unicode.Nko, unicode.Mongolian)
}

// joinsNext reports whether r is a letter of a joining script that joins
// the letter after it, so that a non-joiner after it changes how it is
// drawn: not the Arabic letters that join only the letter before them
// (alef, dal, reh, waw...) nor hamza.
func joinsNext(r rune) bool {
	return unicode.IsLetter(r) && joining(r) && !unicode.Is(rightJoining, r)
}

// rightJoining are the Arabic letters that never join the letter after
// them.
var rightJoining = &unicode.RangeTable{R16: []unicode.Range16{
	{Lo: 0x0621, Hi: 0x0625, Stride: 1}, {Lo: 0x0627, Hi: 0x0627, Stride: 1}, {Lo: 0x0629, Hi: 0x0629, Stride: 1},
	{Lo: 0x062F, Hi: 0x0632, Stride: 1}, {Lo: 0x0648, Hi: 0x0648, Stride: 1}, {Lo: 0x0671, Hi: 0x0673, Stride: 1},
	{Lo: 0x0675, Hi: 0x0677, Stride: 1}, {Lo: 0x0688, Hi: 0x0699, Stride: 1}, {Lo: 0x06C0, Hi: 0x06C0, Stride: 1},
	{Lo: 0x06C3, Hi: 0x06CB, Stride: 1}, {Lo: 0x06CD, Hi: 0x06CD, Stride: 1}, {Lo: 0x06CF, Hi: 0x06CF, Stride: 1},
	{Lo: 0x06D2, Hi: 0x06D3, Stride: 1}, {Lo: 0x06D5, Hi: 0x06D5, Stride: 1}, {Lo: 0x06EE, Hi: 0x06EF, Stride: 1},
}}

// brahmic reports whether r is a letter of a script whose consonants
// combine through a virama.
func brahmic(r rune) bool {
	return unicode.IsLetter(r) && unicode.In(r, unicode.Devanagari, unicode.Bengali, unicode.Gurmukhi, unicode.Gujarati,
		unicode.Oriya, unicode.Tamil, unicode.Telugu, unicode.Kannada, unicode.Malayalam, unicode.Sinhala)
}

// CheckText refuses a new text shown to users (a message) that holds a
// control character, a line or paragraph separator or a formatting
// character other than the joiners, such as a bidirectional override that
// shows "exe.pdf" for "fdp.exe". Unlike a name it may hold any space.
func CheckText(field, s string) error {
	for _, r := range s {
		if notText(r) {
			return posture.Invalid(field, "must not contain control characters, line separators or invisible formatting characters", s)
		}
	}
	return nil
}

// notText is what CheckText refuses.
func notText(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) || unicode.Is(unicode.Cf, r) && r != '\u200C' && r != '\u200D'
}

// CheckUsername refuses a new username that does not show as it reads
// (CheckVisible) or that is not in Unicode's NFKC form: fullwidth letters,
// ligatures and other compatibility characters ("ａｄｍｉｎ") look like
// the plain ones another user may have ("admin"). Such a username is
// refused with its plain form, not changed: a user logs in with what it
// typed.
func CheckUsername(field, s string) error {
	if err := CheckVisible(field, s); err != nil {
		return err
	}
	if plain := norm.NFKC.String(s); plain != s {
		return posture.Invalid(field, fmt.Sprintf("must not use compatibility characters (fullwidth letters, ligatures...) that look like plain ones: write %q", plain), s)
	}
	if a, b, mixed := mixedScripts(s); mixed {
		return posture.Invalid(field, fmt.Sprintf("must not mix the letters of %s and %s, whose look-alikes make one name pass for another (a Cyrillic а in \"admin\")", a, b), s)
	}
	return nil
}

// scriptsOf are the scripts a username's letters and marks are checked in
// (Unicode's Common and Inherited ones, digits and punctuation among them,
// go with any).
var scriptsOf = func() map[string]*unicode.RangeTable {
	out := map[string]*unicode.RangeTable{}
	for name, t := range unicode.Scripts {
		if name != "Common" && name != "Inherited" {
			out[name] = t
		}
	}
	return out
}()

// mixedScripts reports two scripts that s mixes, unless they make up one
// of the writing systems Unicode's highly restrictive profile (UTS #39)
// allows together: Latin with Han and Hiragana and Katakana (Japanese), with
// Han and Bopomofo (Chinese), or with Han and Hangul (Korean).
func mixedScripts(s string) (string, string, bool) {
	seen := map[string]bool{}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsMark(r) {
			continue
		}
		for name, t := range scriptsOf {
			if unicode.Is(t, r) {
				seen[name] = true
				break
			}
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) < 2 {
		return "", "", false
	}
	for _, allowed := range [][]string{{"Han", "Hiragana", "Katakana", "Latin"}, {"Bopomofo", "Han", "Latin"}, {"Han", "Hangul", "Latin"}} {
		if !slices.ContainsFunc(names, func(n string) bool { return !slices.Contains(allowed, n) }) {
			return "", "", false
		}
	}
	return names[0], names[1], true
}

// CheckVisible refuses a new username (or name) that does not show as it
// reads (see Visible).
func CheckVisible(field, s string) error {
	if why := invisible(s); why != "" {
		return posture.Invalid(field, why, s)
	}
	return nil
}
