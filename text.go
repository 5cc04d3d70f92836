package posture

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable is s as a terminal may show it: characters that are not
// printable (control characters such as ESC, CR and new lines, format
// characters such as a right-to-left override, invalid UTF-8) are written
// as Go escapes ("\x1b", "\n", "\u202e"). Values endpoints and admins send
// (names, reported versions, reasons) go through it before a text table
// or report prints them, so that none can forge a line or drive the
// terminal of whoever reads it.
func Printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return !strconv.IsPrint(r) }) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// PrintableLines is Printable for a text of several lines: its new lines
// and tabs are kept.
func PrintableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for j, p := range parts {
			parts[j] = Printable(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

// Count is n with the noun of its number: "1 identity", "2 identities".
func Count[N ~int | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatUint(uint64(n), 10) + " " + many
}
