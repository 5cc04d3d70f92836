package api

import (
	"fmt"
	"strings"
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
func CheckLabels(field string, l []string) error {
	if len(l) > MaxList {
		return posture.Invalid(fmt.Sprintf("%s[%d]", field, MaxList), fmt.Sprintf("at most %d entries", MaxList), fmt.Sprintf("(%d entries)", len(l)))
	}
	for i, s := range l {
		if err := CheckMax(fmt.Sprintf("%s[%d]", field, i), s, MaxLabel); err != nil {
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

// Hidden reports whether a rune does not show as itself: a control
// character, a line or paragraph separator, a formatting character other
// than the zero-width joiner and non-joiner (which scripts and emoji need),
// or another default-ignorable code point (a Hangul filler, a combining
// grapheme joiner), which makes "payroll" and "payroll\u034f" look alike.
// Variation selectors stay: emoji need them.
func Hidden(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point) ||
		unicode.Is(unicode.Cf, r) && r != '\u200c' && r != '\u200d'
}

// CheckVisible refuses a new username (or name) that does not show as it
// reads (see Hidden).
func CheckVisible(field, s string) error {
	if strings.ContainsFunc(s, Hidden) {
		return posture.Invalid(field, "must not contain control characters, line separators or invisible formatting characters", s)
	}
	return nil
}
