package filter

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	posture "github.com/seed-0809debe/posture"
)

// Options restricts what a filter or sort may refer to.
type Options struct {
	// Fields, when not nil, lists the field names that a filter or sort may
	// use; any other name is an error (INVALID_FILTER from ParseWith,
	// INVALID_SORT_IDENTIFIER from ParseSortWith). An entry ending in ".*",
	// such as "tags.*", admits every dotted path below that prefix
	// ("tags.env"). Nil admits every name; an empty non-nil slice admits none.
	Fields []string
	// Refs lists the fields that hold a reference to another entity: an
	// object with an "id" (such as {id, name, entity, _links}), or an
	// array of them. As in OpenZiti, where such a field is a foreign key,
	// a condition, isEmpty or sort on the field itself reads the
	// reference's id (`identity = "x"` is `identity.id = "x"`, and a
	// reference without an id is null); the paths below it (identity.name)
	// read the object as any other.
	Refs []string
	// Aliases maps a name a filter or sort may use to the field of the
	// records it stands for, such as "type" for a config's "configType"
	// (type.name is then configType.name). An alias is admitted when its
	// field is.
	Aliases map[string]string
}

// resolve is the field of the records that name stands for: name with
// its longest aliased prefix (a whole name or the names before a dot)
// replaced.
func (o *Options) resolve(name string) string {
	best := ""
	for a := range o.Aliases {
		if len(a) > len(best) && (name == a || strings.HasPrefix(name, a+".")) {
			best = a
		}
	}
	if best == "" {
		return name
	}
	return o.Aliases[best] + name[len(best):]
}

// path is the path name reads in the records.
func (o *Options) path(name string) path {
	field := o.resolve(name)
	p := path{name: name, parts: strings.Split(field, ".")}
	p.ref = slices.Contains(o.Refs, field)
	return p
}

// allows reports whether name is admitted by o.Fields, itself or as the
// alias of an admitted field.
func (o *Options) allows(name string) bool {
	if o.Fields == nil {
		return true
	}
	if o.admits(name) {
		return true
	}
	field := o.resolve(name)
	return field != name && o.admits(field)
}

// admits reports whether o.Fields names name or a pattern it matches.
func (o *Options) admits(name string) bool {
	for _, f := range o.Fields {
		if f == name {
			return true
		}
		if prefix, ok := strings.CutSuffix(f, "*"); ok && strings.HasSuffix(prefix, ".") &&
			strings.HasPrefix(name, prefix) && len(name) > len(prefix) {
			return true
		}
	}
	return false
}

// maxDepth bounds the nesting of parentheses and "not", so that a hostile
// filter cannot exhaust the stack.
const maxDepth = 100

// Parse parses a filter with no restriction on field names. An empty (or
// all-blank) filter yields a Query that matches everything. Every error is a
// *posture.Error with Code posture.CodeInvalidFilter whose Message says what
// is wrong and at which 1-based character position.
func Parse(s string) (*Query, error) { return ParseWith(s, Options{}) }

// ParseWith is Parse with options; a field not admitted by opts.Fields, in
// the predicate or in the sort by clause, is an INVALID_FILTER error.
func ParseWith(s string, opts Options) (*Query, error) {
	p, err := newParser(s, opts, posture.CodeInvalidFilter, "filter")
	if err != nil {
		return nil, err
	}
	q, serr := p.query()
	if serr != nil {
		return nil, p.error(serr)
	}
	return q, nil
}

// parser is a recursive-descent parser over the tokens of src.
type parser struct {
	src   string
	what  string // "filter" or "sort", for messages
	code  string // the posture error code of every error
	opts  Options
	toks  []token
	i     int
	depth int
}

func newParser(src string, opts Options, code, what string) (*parser, error) {
	p := &parser{src: src, what: what, code: code, opts: opts}
	toks, err := lex(src)
	if err != nil {
		return nil, p.error(err)
	}
	p.toks = toks
	return p, nil
}

// error turns a syntax error into the package's error.
func (p *parser) error(e *syntaxError) error {
	return &posture.Error{
		Code:    p.code,
		Message: fmt.Sprintf("invalid %s at position %d: %s", p.what, p.col(e.pos), e.msg),
	}
}

// col is the 1-based character position of byte offset pos.
func (p *parser) col(pos int) int { return utf8.RuneCountInString(p.src[:pos]) + 1 }

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

// unexpected reports that t was found where want was expected.
func (p *parser) unexpected(t token, want string) *syntaxError {
	msg := fmt.Sprintf("expected %s, found %s", want, t.describe(p.what))
	if t.kind >= tAnd && strings.Contains(want, "field") {
		msg += fmt.Sprintf(" (%q is a keyword and cannot be a field name)", t.text)
	}
	return errAt(t.pos, "%s", msg)
}

// enter counts one level of nesting at t.
func (p *parser) enter(t token) *syntaxError {
	p.depth++
	if p.depth > maxDepth {
		return errAt(t.pos, "the expression is nested more than %d levels deep", maxDepth)
	}
	return nil
}

// field checks the field name t against the options.
func (p *parser) field(t token) (path, *syntaxError) {
	if !p.opts.allows(t.text) {
		msg := fmt.Sprintf("unknown field %q", short(t.text))
		if n := len(p.opts.Fields); n > 0 && n <= 40 {
			valid := slices.Clone(p.opts.Fields)
			for a := range p.opts.Aliases {
				if !slices.Contains(valid, a) && p.opts.allows(a) {
					valid = append(valid, a)
				}
			}
			slices.Sort(valid)
			msg += "; valid fields are " + strings.Join(valid, ", ")
		}
		return path{}, errAt(t.pos, "%s", msg)
	}
	return p.opts.path(t.text), nil
}

// query = [ orExpr ] { clause } .
func (p *parser) query() (*Query, *syntaxError) {
	q := &Query{}
	switch p.peek().kind {
	case tEOF, tSort, tSkip, tLimit:
	default:
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		q.pred = n
	}
	clauses := 0
	for {
		t := p.next()
		switch t.kind {
		case tEOF:
			return q, nil
		case tSort:
			if q.Sort != nil {
				return nil, errAt(t.pos, `the filter has more than one "sort by" clause`)
			}
			if b := p.next(); b.kind != tBy {
				return nil, p.unexpected(b, `"by" after "sort"`)
			}
			fields, err := p.sortFields()
			if err != nil {
				return nil, err
			}
			q.Sort = fields
		case tSkip:
			if q.Skip != nil {
				return nil, errAt(t.pos, `the filter has more than one "skip" clause`)
			}
			n, err := p.count(`a non-negative integer after "skip"`)
			if err != nil {
				return nil, err
			}
			q.Skip = &n
		case tLimit:
			if q.Limit != nil {
				return nil, errAt(t.pos, `the filter has more than one "limit" clause`)
			}
			n := int64(LimitNone)
			if p.peek().kind == tNone {
				p.next()
			} else {
				var err *syntaxError
				n, err = p.count(`a non-negative integer or "none" after "limit"`)
				if err != nil {
					return nil, err
				}
			}
			q.Limit = &n
		case tRParen:
			return nil, errAt(t.pos, `unexpected ")" without a matching "("`)
		default:
			if q.pred != nil && clauses == 0 {
				return nil, p.unexpected(t, `"and", "or", "sort by", "skip", "limit" or the end of the filter`)
			}
			return nil, p.unexpected(t, `"sort by", "skip", "limit" or the end of the filter`)
		}
		clauses++
	}
}

// count reads the integer of a skip or limit clause.
func (p *parser) count(want string) (int64, *syntaxError) {
	t := p.next()
	if t.kind != tNumber {
		return 0, p.unexpected(t, want)
	}
	for i := 0; i < len(t.text); i++ {
		if !isDigit(t.text[i]) {
			return 0, p.unexpected(t, want)
		}
	}
	// Too large for 64 bits is the largest: lists cut a large skip or
	// limit to what they allow anyway.
	n, _ := strconv.ParseInt(t.text, 10, 64)
	return n, nil
}

// sortFields = sortField { "," sortField } .
func (p *parser) sortFields() ([]SortField, *syntaxError) {
	var out []SortField
	for {
		t := p.next()
		if t.kind != tIdent {
			return nil, p.unexpected(t, "a field name to sort by")
		}
		if _, err := p.field(t); err != nil {
			return nil, err
		}
		f := SortField{Field: t.text}
		switch p.peek().kind {
		case tAsc:
			p.next()
		case tDesc:
			p.next()
			f.Desc = true
		}
		out = append(out, f)
		if p.peek().kind != tComma {
			return out, nil
		}
		p.next()
	}
}

// orExpr = andExpr { "or" andExpr } .
func (p *parser) or() (node, *syntaxError) {
	x, err := p.and()
	if err != nil || p.peek().kind != tOr {
		return x, err
	}
	var out orNode
	add := func(x node) {
		if o, ok := x.(orNode); ok {
			out = append(out, o...)
		} else {
			out = append(out, x)
		}
	}
	add(x)
	for p.peek().kind == tOr {
		p.next()
		y, err := p.and()
		if err != nil {
			return nil, err
		}
		add(y)
	}
	return out, nil
}

// andExpr = notExpr { "and" notExpr } .
func (p *parser) and() (node, *syntaxError) {
	x, err := p.not()
	if err != nil || p.peek().kind != tAnd {
		return x, err
	}
	var out andNode
	add := func(x node) {
		if a, ok := x.(andNode); ok {
			out = append(out, a...)
		} else {
			out = append(out, x)
		}
	}
	add(x)
	for p.peek().kind == tAnd {
		p.next()
		y, err := p.not()
		if err != nil {
			return nil, err
		}
		add(y)
	}
	return out, nil
}

// notExpr = "not" notExpr | primary .
func (p *parser) not() (node, *syntaxError) {
	if p.peek().kind != tNot {
		return p.primary()
	}
	t := p.next()
	if err := p.enter(t); err != nil {
		return nil, err
	}
	x, err := p.not()
	p.depth--
	if err != nil {
		return nil, err
	}
	return notNode{x}, nil
}

// primary = "(" orExpr ")" | "true" | "false" | "isEmpty" "(" field ")"
//
//	| subject condition .
func (p *parser) primary() (node, *syntaxError) {
	t := p.next()
	switch t.kind {
	case tLParen:
		if err := p.enter(t); err != nil {
			return nil, err
		}
		x, err := p.or()
		p.depth--
		if err != nil {
			return nil, err
		}
		if c := p.next(); c.kind != tRParen {
			return nil, p.unexpected(c, fmt.Sprintf(`"and", "or" or ")" to close the "(" at position %d`, p.col(t.pos)))
		}
		return x, nil
	case tTrue:
		return boolNode(true), nil
	case tFalse:
		return boolNode(false), nil
	case tIsEmpty:
		f, err := p.funcArg(t)
		if err != nil {
			return nil, err
		}
		return emptyNode{f}, nil
	case tAnyOf, tAllOf:
		f, err := p.funcArg(t)
		if err != nil {
			return nil, err
		}
		set := setAny
		if t.kind == tAllOf {
			set = setAll
		}
		return p.condition(f, set, fmt.Sprintf("%s(%s)", t.text, short(f.name)))
	case tIdent:
		f, err := p.field(t)
		if err != nil {
			return nil, err
		}
		return p.condition(f, setNone, strconv.Quote(short(t.text)))
	}
	return nil, p.unexpected(t, `a condition (a field such as name = "x", anyOf(...), allOf(...), isEmpty(...)), "(", "not", "true" or "false"`)
}

// funcArg reads the "(" field ")" after the set function fn.
func (p *parser) funcArg(fn token) (path, *syntaxError) {
	if t := p.next(); t.kind != tLParen {
		return path{}, p.unexpected(t, fmt.Sprintf(`"(" after %q`, fn.text))
	}
	t := p.next()
	if t.kind != tIdent {
		return path{}, p.unexpected(t, fmt.Sprintf("a field name in %s(...)", fn.text))
	}
	f, err := p.field(t)
	if err != nil {
		return path{}, err
	}
	if c := p.next(); c.kind != tRParen {
		return path{}, p.unexpected(c, fmt.Sprintf(`")" after %s(%s`, fn.text, short(t.text)))
	}
	return f, nil
}

var cmpOps = map[tokKind]op{tEq: opEq, tNe: opNe, tLt: opLt, tLe: opLe, tGt: opGt, tGe: opGe}

// condition reads the operator and operands after the subject f.
func (p *parser) condition(f path, set setFunc, subject string) (node, *syntaxError) {
	c := &condNode{field: f, set: set}
	t := p.next()
	if t.kind == tNot {
		n := p.next()
		switch n.kind {
		case tContains, tIContains, tIn, tBetween:
			c.neg, t = true, n
		default:
			return nil, p.unexpected(n, `"contains", "icontains", "in" or "between" after "not"`)
		}
	}
	switch t.kind {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		c.op = cmpOps[t.kind]
		v, vt, err := p.value(t)
		if err != nil {
			return nil, err
		}
		if c.op >= opLt && !orderable(v.kind) {
			return nil, errAt(vt.pos, "%q compares only with a string, number or datetime, not %s", t.text, v.kind)
		}
		c.vals = []literal{v}
	case tContains, tIContains:
		c.op = opContains
		if t.kind == tIContains {
			c.op = opIContains
		}
		v, vt, err := p.value(t)
		if err != nil {
			return nil, err
		}
		if v.kind != kString {
			return nil, errAt(vt.pos, "%q needs a string, not %s", strings.ToLower(t.text), v.kind)
		}
		c.vals = []literal{v}
		c.lower = strings.ToLower(v.s)
	case tIn:
		c.op = opIn
		vals, err := p.list(t)
		if err != nil {
			return nil, err
		}
		c.vals = vals
	case tBetween:
		c.op = opBetween
		lo, lt, err := p.value(t)
		if err != nil {
			return nil, err
		}
		if a := p.next(); a.kind != tAnd {
			return nil, p.unexpected(a, `"and" between the bounds of "between"`)
		}
		hi, ht, err := p.value(t)
		if err != nil {
			return nil, err
		}
		switch {
		case !orderable(lo.kind):
			return nil, errAt(lt.pos, `"between" needs a string, number or datetime bound, not %s`, lo.kind)
		case !orderable(hi.kind):
			return nil, errAt(ht.pos, `"between" needs a string, number or datetime bound, not %s`, hi.kind)
		case lo.kind != hi.kind:
			return nil, errAt(ht.pos, `the bounds of "between" must have the same type, found %s and %s`, lo.kind, hi.kind)
		}
		c.vals = []literal{lo, hi}
	default:
		return nil, p.unexpected(t, "an operator (=, !=, <, <=, >, >=, contains, icontains, in, between) after "+subject)
	}
	return c, nil
}

func orderable(k litKind) bool { return k == kString || k == kNumber || k == kTime }

// value reads the literal operand of the operator token after.
func (p *parser) value(after token) (literal, token, *syntaxError) {
	t := p.next()
	var l literal
	switch t.kind {
	case tString:
		l = literal{kind: kString, s: t.str}
	case tNumber:
		l = literal{kind: kNumber, n: t.num}
	case tTrue, tFalse:
		l = literal{kind: kBool, b: t.kind == tTrue}
	case tNull:
		l = literal{kind: kNull}
	case tDatetime:
		l = literal{kind: kTime, t: t.time}
	default:
		return l, t, p.unexpected(t, fmt.Sprintf(`a value (a "string", number, true, false, null or datetime(...)) after %q`, strings.ToLower(after.text)))
	}
	return l, t, nil
}

// list reads the "[" value { "," value } "]" after in.
func (p *parser) list(in token) ([]literal, *syntaxError) {
	open := p.next()
	if open.kind != tLBracket {
		return nil, p.unexpected(open, fmt.Sprintf(`"[" after %q`, strings.ToLower(in.text)))
	}
	if t := p.peek(); t.kind == tRBracket {
		return nil, errAt(t.pos, `the list after "in" is empty; it needs at least one value`)
	}
	var vals []literal
	for {
		v, _, err := p.value(in)
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		switch t := p.next(); t.kind {
		case tComma:
		case tRBracket:
			return vals, nil
		default:
			return nil, p.unexpected(t, fmt.Sprintf(`"," or "]" in the list opened at position %d`, p.col(open.pos)))
		}
	}
}
