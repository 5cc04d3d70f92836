package filter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tNumber
	tDatetime
	tLParen
	tRParen
	tLBracket
	tRBracket
	tComma
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	// Keywords.
	tAnd
	tOr
	tNot
	tIn
	tBetween
	tContains
	tIContains
	tTrue
	tFalse
	tNull
	tAnyOf
	tAllOf
	tIsEmpty
	tSort
	tBy
	tAsc
	tDesc
	tSkip
	tLimit
	tNone
)

// keywords maps the lower-case spelling of each keyword to its kind.
// "datetime" is lexed separately because its argument is not a token.
var keywords = map[string]tokKind{
	"and":       tAnd,
	"or":        tOr,
	"not":       tNot,
	"in":        tIn,
	"between":   tBetween,
	"contains":  tContains,
	"icontains": tIContains,
	"true":      tTrue,
	"false":     tFalse,
	"null":      tNull,
	"anyof":     tAnyOf,
	"allof":     tAllOf,
	"isempty":   tIsEmpty,
	"sort":      tSort,
	"by":        tBy,
	"asc":       tAsc,
	"desc":      tDesc,
	"skip":      tSkip,
	"limit":     tLimit,
	"none":      tNone,
}

// token is one lexical token. pos is the byte offset of its first byte in
// the source; text is its source spelling.
type token struct {
	kind tokKind
	pos  int
	text string
	str  string    // decoded value of a tString
	num  float64   // value of a tNumber
	time time.Time // value of a tDatetime
}

// syntaxError is an error at a byte offset of the source. The parser turns
// it into a *posture.Error.
type syntaxError struct {
	pos int
	msg string
}

func errAt(pos int, format string, args ...any) *syntaxError {
	return &syntaxError{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// lex splits src into tokens, ending with a tEOF token at len(src).
func lex(src string) ([]token, *syntaxError) {
	if !utf8.ValidString(src) {
		for i := 0; i < len(src); {
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				return nil, errAt(i, "the text is not valid UTF-8")
			}
			i += n
		}
	}
	var toks []token
	i := 0
	for {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i == len(src) {
			return append(toks, token{kind: tEOF, pos: i}), nil
		}
		start := i
		c := src[i]
		var t token
		switch {
		case c == '(':
			t, i = token{kind: tLParen}, i+1
		case c == ')':
			t, i = token{kind: tRParen}, i+1
		case c == '[':
			t, i = token{kind: tLBracket}, i+1
		case c == ']':
			t, i = token{kind: tRBracket}, i+1
		case c == ',':
			t, i = token{kind: tComma}, i+1
		case c == '=':
			t, i = token{kind: tEq}, i+1
		case c == '!':
			if i+1 < len(src) && src[i+1] == '=' {
				t, i = token{kind: tNe}, i+2
			} else {
				return nil, errAt(i, `unexpected "!" (the only operator with "!" is "!=")`)
			}
		case c == '<':
			if i+1 < len(src) && src[i+1] == '=' {
				t, i = token{kind: tLe}, i+2
			} else {
				t, i = token{kind: tLt}, i+1
			}
		case c == '>':
			if i+1 < len(src) && src[i+1] == '=' {
				t, i = token{kind: tGe}, i+2
			} else {
				t, i = token{kind: tGt}, i+1
			}
		case c == '"':
			var err *syntaxError
			t, i, err = lexString(src, i)
			if err != nil {
				return nil, err
			}
		case c == '-' || isDigit(c):
			var err *syntaxError
			t, i, err = lexNumber(src, i)
			if err != nil {
				return nil, err
			}
		case isNameStart(c):
			var err *syntaxError
			t, i, err = lexWord(src, i)
			if err != nil {
				return nil, err
			}
		default:
			r, _ := utf8.DecodeRuneInString(src[i:])
			return nil, errAt(i, "unexpected character %q", r)
		}
		t.pos = start
		t.text = src[start:i]
		toks = append(toks, t)
	}
}

func isSpace(c byte) bool     { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool     { return '0' <= c && c <= '9' }
func isNameStart(c byte) bool { return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isNameChar(c byte) bool  { return isNameStart(c) || isDigit(c) }

// lexString lexes the double-quoted string starting at src[i].
func lexString(src string, i int) (token, int, *syntaxError) {
	start := i
	i++ // opening quote
	var b strings.Builder
	for {
		if i >= len(src) {
			return token{}, 0, errAt(start, "unterminated string: missing closing \"")
		}
		c := src[i]
		switch {
		case c == '"':
			return token{kind: tString, str: b.String()}, i + 1, nil
		case c < 0x20:
			return token{}, 0, errAt(i, "control character %q in string; write it as an escape such as \\n or \\u0009", c)
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		// An escape.
		if i+1 >= len(src) {
			return token{}, 0, errAt(start, "unterminated string: missing closing \"")
		}
		esc := src[i+1]
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, n, err := lexUnicodeEscape(src, i)
			if err != nil {
				return token{}, 0, err
			}
			b.WriteRune(r)
			i += n
			continue
		default:
			r, _ := utf8.DecodeRuneInString(src[i+1:])
			return token{}, 0, errAt(i, `invalid escape "\%c" in string (valid: \" \\ \/ \b \f \n \r \t \uXXXX)`, r)
		}
		i += 2
	}
}

// lexUnicodeEscape decodes \uXXXX at src[i], joining a UTF-16 surrogate pair
// \uD8xx\uDCxx into one rune. It returns the rune and the bytes consumed.
func lexUnicodeEscape(src string, i int) (rune, int, *syntaxError) {
	hex4 := func(j int) (rune, bool) {
		if j+6 > len(src) || src[j] != '\\' || src[j+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(src[j+2:j+6], 16, 16)
		if err != nil {
			return 0, false
		}
		return rune(v), true
	}
	r, ok := hex4(i)
	if !ok {
		return 0, 0, errAt(i, `invalid escape in string: \u must be followed by four hex digits`)
	}
	switch {
	case 0xD800 <= r && r < 0xDC00:
		lo, ok := hex4(i + 6)
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, 0, errAt(i, `invalid escape in string: \u%04X is half of a surrogate pair without its other half`, r)
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, nil
	case 0xDC00 <= r && r <= 0xDFFF:
		return 0, 0, errAt(i, `invalid escape in string: \u%04X is half of a surrogate pair without its other half`, r)
	}
	return r, 6, nil
}

// lexNumber lexes the number starting at src[i].
func lexNumber(src string, i int) (token, int, *syntaxError) {
	start := i
	digits := func() bool {
		j := i
		for i < len(src) && isDigit(src[i]) {
			i++
		}
		return i > j
	}
	if src[i] == '-' {
		i++
	}
	if !digits() {
		return token{}, 0, errAt(start, `"-" must be followed by a digit`)
	}
	if i < len(src) && src[i] == '.' {
		i++
		if !digits() {
			return token{}, 0, errAt(start, "invalid number %q: a digit must follow the decimal point", short(src[start:i]))
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if !digits() {
			return token{}, 0, errAt(start, "invalid number %q: the exponent needs digits", short(src[start:i]))
		}
	}
	if i < len(src) && (isNameChar(src[i]) || src[i] == '.') {
		j := i
		for j < len(src) && (isNameChar(src[j]) || src[j] == '.') {
			j++
		}
		return token{}, 0, errAt(start, "invalid number %q", short(src[start:j]))
	}
	f, err := strconv.ParseFloat(src[start:i], 64)
	if err != nil {
		return token{}, 0, errAt(start, "number %s is out of range", short(src[start:i]))
	}
	return token{kind: tNumber, num: f}, i, nil
}

// lexWord lexes a keyword, a (possibly dotted) field name, or a
// datetime(...) literal starting at src[i].
func lexWord(src string, i int) (token, int, *syntaxError) {
	start := i
	dotted := false
	for {
		for i < len(src) && isNameChar(src[i]) {
			i++
		}
		if i >= len(src) || src[i] != '.' {
			break
		}
		dotted = true
		i++
		if i >= len(src) || !isNameStart(src[i]) {
			return token{}, 0, errAt(i, "expected a name after %q in field name", short(src[start:i]))
		}
	}
	if dotted {
		return token{kind: tIdent}, i, nil
	}
	lower := strings.ToLower(src[start:i])
	if lower == "datetime" {
		return lexDatetime(src, start, i)
	}
	if k, ok := keywords[lower]; ok {
		return token{kind: k}, i, nil
	}
	return token{kind: tIdent}, i, nil
}

// lexDatetime lexes the argument of datetime(...); the keyword spans
// src[start:i]. The argument may be quoted.
func lexDatetime(src string, start, i int) (token, int, *syntaxError) {
	for i < len(src) && isSpace(src[i]) {
		i++
	}
	if i >= len(src) || src[i] != '(' {
		return token{}, 0, errAt(start, `expected "(" after datetime; write datetime(2024-01-02T03:04:05Z)`)
	}
	open := i
	end := strings.IndexByte(src[open:], ')')
	if end < 0 {
		return token{}, 0, errAt(open, `unterminated datetime(...): missing ")"`)
	}
	end += open
	arg := strings.Trim(src[open+1:end], " \t\r\n")
	if len(arg) >= 2 && arg[0] == '"' && arg[len(arg)-1] == '"' {
		arg = arg[1 : len(arg)-1]
	}
	t, err := time.Parse(time.RFC3339Nano, arg)
	if err != nil {
		return token{}, 0, errAt(open+1, "invalid datetime %q: expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z", short(arg))
	}
	return token{kind: tDatetime, time: t}, end + 1, nil
}

// describe names a token for an error message.
func (t token) describe(what string) string {
	if t.kind == tEOF {
		return "end of " + what
	}
	return strconv.Quote(short(t.text))
}

// short truncates user text quoted in an error message.
func short(s string) string {
	const maxRunes = 32
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	return string([]rune(s)[:maxRunes]) + "..."
}
