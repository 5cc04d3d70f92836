package filter

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// showTokens renders tokens compactly: kind:text, with decoded values of
// strings, numbers and datetimes, and the byte offset.
func showTokens(toks []token) []string {
	var out []string
	for _, t := range toks {
		var s string
		switch t.kind {
		case tEOF:
			s = "EOF"
		case tIdent:
			s = "ident:" + t.text
		case tString:
			s = "string:" + strconv.Quote(t.str)
		case tNumber:
			s = "number:" + strconv.FormatFloat(t.num, 'g', -1, 64)
		case tDatetime:
			s = "datetime:" + t.time.Format(time.RFC3339Nano)
		default:
			s = "tok:" + strings.ToLower(t.text)
		}
		out = append(out, fmt.Sprintf("%s@%d", s, t.pos))
	}
	return out
}

func TestLex(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{"EOF@0"}},
		{"  \t\r\n", []string{"EOF@5"}},
		{`name="x"`, []string{"ident:name@0", "tok:=@4", `string:"x"@5`, "EOF@8"}},
		{"a != 1 and b<=2 or c>=-3.5e2", []string{
			"ident:a@0", "tok:!=@2", "number:1@5", "tok:and@7", "ident:b@11", "tok:<=@12", "number:2@14",
			"tok:or@16", "ident:c@19", "tok:>=@20", "number:-350@22", "EOF@28"}},
		{"a<1 b>2", []string{"ident:a@0", "tok:<@1", "number:1@2", "ident:b@4", "tok:>@5", "number:2@6", "EOF@7"}},
		{"tags.env", []string{"ident:tags.env@0", "EOF@8"}},
		{"a_1.B_2._c", []string{"ident:a_1.B_2._c@0", "EOF@10"}},
		// A dotted name is never a keyword; a lone one always is.
		{"tags.limit LIMIT Not", []string{"ident:tags.limit@0", "tok:limit@11", "tok:not@17", "EOF@20"}},
		{"AnyOf(x) ALLOF isEMPTY ICONTAINS contains BeTwEeN in", []string{
			"tok:anyof@0", "tok:(@5", "ident:x@6", "tok:)@7", "tok:allof@9", "tok:isempty@15", "tok:icontains@23",
			"tok:contains@33", "tok:between@42", "tok:in@50", "EOF@52"}},
		{"[1, 2]", []string{"tok:[@0", "number:1@1", "tok:,@2", "number:2@4", "tok:]@5", "EOF@6"}},
		{"true FALSE Null sort BY asc DESC skip none", []string{
			"tok:true@0", "tok:false@5", "tok:null@11", "tok:sort@16", "tok:by@21", "tok:asc@24", "tok:desc@28",
			"tok:skip@33", "tok:none@38", "EOF@42"}},
		{`"a\"b\\c\/d\n\t\r\b\f"`, []string{`string:"a\"b\\c/d\n\t\r\b\f"@0`, "EOF@22"}},
		{`"\u00e9\u20AC\ud83d\ude00"`, []string{`string:"é€😀"@0`, "EOF@26"}},
		{`"héllo wörld"`, []string{`string:"héllo wörld"@0`, "EOF@15"}},
		{`""`, []string{`string:""@0`, "EOF@2"}},
		{"0 -0 12.25 1e3 1E-2 1e+06", []string{
			"number:0@0", "number:-0@2", "number:12.25@5", "number:1000@11", "number:0.01@15", "number:1e+06@20", "EOF@25"}},
		{"datetime(2024-01-02T03:04:05Z)", []string{"datetime:2024-01-02T03:04:05Z@0", "EOF@30"}},
		{`DateTime ( "2024-01-02T03:04:05.123+02:00" )`, []string{"datetime:2024-01-02T03:04:05.123+02:00@0", "EOF@44"}},
	}
	for _, tt := range tests {
		toks, err := lex(tt.in)
		if err != nil {
			t.Errorf("lex(%q): %v", tt.in, err.msg)
			continue
		}
		if diff := cmp.Diff(tt.want, showTokens(toks)); diff != "" {
			t.Errorf("lex(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestLexErrors(t *testing.T) {
	tests := []struct {
		in  string
		pos int
		msg string
	}{
		{`a ! b`, 2, `unexpected "!" (the only operator with "!" is "!=")`},
		{`a == b`, -1, ""}, // lexes fine; the parser rejects it
		{`a = "abc`, 4, `unterminated string: missing closing "`},
		{`a = "abc\`, 4, `unterminated string: missing closing "`},
		{`"a\qb"`, 2, `invalid escape "\q" in string (valid: \" \\ \/ \b \f \n \r \t \uXXXX)`},
		{`"\u12"`, 1, `invalid escape in string: \u must be followed by four hex digits`},
		{`"\uD83D"`, 1, `invalid escape in string: \uD83D is half of a surrogate pair without its other half`},
		{`"\uDE00"`, 1, `invalid escape in string: \uDE00 is half of a surrogate pair without its other half`},
		{"\"a\nb\"", 2, `control character '\n' in string; write it as an escape such as \n or \u0009`},
		{"a = -x", 4, `"-" must be followed by a digit`},
		{"a = 1.", 4, `invalid number "1.": a digit must follow the decimal point`},
		{"a = 1e", 4, `invalid number "1e": the exponent needs digits`},
		{"a = 12abc", 4, `invalid number "12abc"`},
		{"a = 1.5.6", 4, `invalid number "1.5.6"`},
		{"a = 1e999", 4, "number 1e999 is out of range"},
		{"tags.", 5, `expected a name after "tags." in field name`},
		{"tags..x", 5, `expected a name after "tags." in field name`},
		{"a.1", 2, `expected a name after "a." in field name`},
		{"a = $", 4, `unexpected character '$'`},
		{"a = é", 4, `unexpected character 'é'`},
		{"a = \xff", 4, "the text is not valid UTF-8"},
		{"datetime", 0, `expected "(" after datetime; write datetime(2024-01-02T03:04:05Z)`},
		{"datetime(2024", 8, `unterminated datetime(...): missing ")"`},
		{"datetime(2024-13-01T00:00:00Z)", 9, `invalid datetime "2024-13-01T00:00:00Z": expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z`},
		{"datetime(2024-01-02)", 9, `invalid datetime "2024-01-02": expected an RFC 3339 date-time such as 2024-01-02T03:04:05Z`},
	}
	for _, tt := range tests {
		_, err := lex(tt.in)
		if tt.pos < 0 {
			if err != nil {
				t.Errorf("lex(%q): unexpected error %q", tt.in, err.msg)
			}
			continue
		}
		if err == nil {
			t.Errorf("lex(%q): no error, want %q", tt.in, tt.msg)
			continue
		}
		if err.pos != tt.pos || err.msg != tt.msg {
			t.Errorf("lex(%q) = error at %d %q, want at %d %q", tt.in, err.pos, err.msg, tt.pos, tt.msg)
		}
	}
}
