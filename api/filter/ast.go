package filter

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// node is a parsed predicate. Nodes are immutable after parsing, so a Query
// may be matched from several goroutines at once.
type node interface {
	// match reports whether rec satisfies the predicate.
	match(rec map[string]any) bool
	// prec is the binding strength of the node's canonical form, used to
	// decide where String needs parentheses.
	prec() int
	// write appends the node's canonical form.
	write(b *strings.Builder)
}

const (
	precOr = iota + 1
	precAnd
	precNot
	precPrimary
)

// writeOperand writes n, in parentheses when it binds less tightly than minPrec.
func writeOperand(b *strings.Builder, n node, minPrec int) {
	if n.prec() < minPrec {
		b.WriteByte('(')
		n.write(b)
		b.WriteByte(')')
		return
	}
	n.write(b)
}

// boolNode is the constant true or false.
type boolNode bool

func (n boolNode) match(map[string]any) bool { return bool(n) }
func (boolNode) prec() int                   { return precPrimary }
func (n boolNode) write(b *strings.Builder) {
	if n {
		b.WriteString("true")
	} else {
		b.WriteString("false")
	}
}

// orNode holds when any of its operands does. Operands are never orNodes.
type orNode []node

func (n orNode) match(rec map[string]any) bool {
	for _, x := range n {
		if x.match(rec) {
			return true
		}
	}
	return false
}
func (orNode) prec() int { return precOr }
func (n orNode) write(b *strings.Builder) {
	for i, x := range n {
		if i > 0 {
			b.WriteString(" or ")
		}
		writeOperand(b, x, precAnd)
	}
}

// andNode holds when all of its operands do. Operands are never andNodes.
type andNode []node

func (n andNode) match(rec map[string]any) bool {
	for _, x := range n {
		if !x.match(rec) {
			return false
		}
	}
	return true
}
func (andNode) prec() int { return precAnd }
func (n andNode) write(b *strings.Builder) {
	for i, x := range n {
		if i > 0 {
			b.WriteString(" and ")
		}
		writeOperand(b, x, precNot)
	}
}

// notNode negates its operand.
type notNode struct{ x node }

func (n notNode) match(rec map[string]any) bool { return !n.x.match(rec) }
func (notNode) prec() int                       { return precNot }
func (n notNode) write(b *strings.Builder) {
	b.WriteString("not ")
	writeOperand(b, n.x, precNot)
}

// path is a field name and the field it reads in the records (the name,
// or what an alias stands for), split at its dots.
type path struct {
	name  string
	parts []string
	ref   bool // a reference: read its id (Options.Refs)
}

// get returns the value at the path, or nil when any step is missing or is
// not an object. The value of a reference is its id.
func (p path) get(rec map[string]any) any {
	m := rec
	last := len(p.parts) - 1
	for i, k := range p.parts {
		v, ok := m[k]
		if !ok || i == last {
			if p.ref {
				return refID(v)
			}
			return v
		}
		next, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return nil
}

// refID is the id of a reference: of an object, its "id" (nil when it has
// none or an empty one); of an array of references, the array of their
// ids; any other value as it is.
func refID(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if id, ok := x["id"]; ok && id != "" {
			return id
		}
		return nil
	case []any:
		ids := make([]any, len(x))
		for i, e := range x {
			ids[i] = refID(e)
		}
		return ids
	}
	return v
}

// litKind is the type of a literal.
type litKind uint8

const (
	kNull litKind = iota
	kString
	kNumber
	kBool
	kTime
)

func (k litKind) String() string {
	return [...]string{"null", "a string", "a number", "a boolean", "a datetime"}[k]
}

// literal is a constant in a condition.
type literal struct {
	kind litKind
	s    string
	n    float64
	b    bool
	t    time.Time
}

func (l literal) write(b *strings.Builder) {
	switch l.kind {
	case kNull:
		b.WriteString("null")
	case kString:
		writeQuoted(b, l.s)
	case kNumber:
		b.WriteString(strconv.FormatFloat(l.n, 'g', -1, 64))
	case kBool:
		b.WriteString(strconv.FormatBool(l.b))
	case kTime:
		b.WriteString("datetime(")
		b.WriteString(l.t.Format(time.RFC3339Nano))
		b.WriteByte(')')
	}
}

// writeQuoted writes s as a string literal that lexString reads back as s.
func writeQuoted(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

// setFunc says how a condition applies to an array field.
type setFunc uint8

const (
	setNone setFunc = iota // the field itself
	setAny                 // anyOf(field)
	setAll                 // allOf(field)
)

// op is the operator of a condition.
type op uint8

const (
	opEq op = iota
	opNe
	opLt
	opLe
	opGt
	opGe
	opContains
	opIContains
	opIn
	opBetween
)

var opNames = [...]string{"=", "!=", "<", "<=", ">", ">=", "contains", "icontains", "in", "between"}

func (o op) String() string { return opNames[o] }

// condNode is a condition on one field: `field op value`, `field in [...]`,
// `field between a and b`, possibly through anyOf/allOf.
type condNode struct {
	field path
	set   setFunc
	op    op
	neg   bool      // "not" before contains, icontains, in, between
	vals  []literal // 1 value; the list of in; the two bounds of between
	lower string    // the lowered needle of icontains
}

func (*condNode) prec() int { return precPrimary }

func (c *condNode) write(b *strings.Builder) {
	switch c.set {
	case setAny:
		b.WriteString("anyOf(" + c.field.name + ")")
	case setAll:
		b.WriteString("allOf(" + c.field.name + ")")
	default:
		b.WriteString(c.field.name)
	}
	b.WriteByte(' ')
	if c.neg {
		b.WriteString("not ")
	}
	b.WriteString(c.op.String())
	b.WriteByte(' ')
	switch c.op {
	case opIn:
		b.WriteByte('[')
		for i, v := range c.vals {
			if i > 0 {
				b.WriteString(", ")
			}
			v.write(b)
		}
		b.WriteByte(']')
	case opBetween:
		c.vals[0].write(b)
		b.WriteString(" and ")
		c.vals[1].write(b)
	default:
		c.vals[0].write(b)
	}
}

func (c *condNode) match(rec map[string]any) bool {
	v := c.field.get(rec)
	switch c.set {
	case setAny:
		found := false
		each(v, func(e any) bool {
			found = c.test(norm(e))
			return !found
		})
		return found
	case setAll:
		n, all := 0, true
		each(v, func(e any) bool {
			n++
			all = c.test(norm(e))
			return all
		})
		return n > 0 && all
	}
	if c.op == opContains || c.op == opIContains {
		switch v.(type) {
		case []any, []string:
			found := false
			each(v, func(e any) bool {
				s, ok := e.(string)
				found = ok && c.contains(s)
				return !found
			})
			return found != c.neg
		}
	}
	return c.test(norm(v))
}

// contains reports whether s contains the needle, ignoring case for
// icontains; it ignores neg.
func (c *condNode) contains(s string) bool {
	if c.op == opIContains {
		return strings.Contains(strings.ToLower(s), c.lower)
	}
	return strings.Contains(s, c.vals[0].s)
}

// test applies the condition to one normalized scalar value.
func (c *condNode) test(v any) bool {
	switch c.op {
	case opContains, opIContains:
		s, ok := v.(string)
		return ok && c.contains(s) != c.neg
	case opIn:
		if c.neg {
			for i := range c.vals {
				if r, ok := compare(v, &c.vals[i]); !ok || r == 0 {
					return false
				}
			}
			return true
		}
		for i := range c.vals {
			if r, ok := compare(v, &c.vals[i]); ok && r == 0 {
				return true
			}
		}
		return false
	case opBetween:
		lo, ok1 := compare(v, &c.vals[0])
		hi, ok2 := compare(v, &c.vals[1])
		if !ok1 || !ok2 {
			return false
		}
		if c.neg {
			return lo < 0 || hi > 0
		}
		return lo >= 0 && hi <= 0
	}
	r, ok := compare(v, &c.vals[0])
	if !ok {
		return false
	}
	switch c.op {
	case opEq:
		return r == 0
	case opNe:
		return r != 0
	case opLt:
		return r < 0
	case opLe:
		return r <= 0
	case opGt:
		return r > 0
	default: // opGe
		return r >= 0
	}
}

// emptyNode is isEmpty(field).
type emptyNode struct{ field path }

func (emptyNode) prec() int { return precPrimary }
func (n emptyNode) write(b *strings.Builder) {
	b.WriteString("isEmpty(" + n.field.name + ")")
}
func (n emptyNode) match(rec map[string]any) bool {
	switch v := n.field.get(rec).(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case []string:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}
