package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// MaxBody bounds request bodies.
const MaxBody = 1 << 20

// bodyKey holds a request's body once read, for the next reader;
// checkedKey says that jsonBody checked it (CheckJSON).
const (
	bodyKey    = "api.body"
	checkedKey = "api.body.checked"
)

// ReadBody reads the request body up to MaxBody. A body already read for
// the request (jsonBody checks every JSON body before the operation runs)
// is answered again.
func ReadBody(c echo.Context) ([]byte, error) {
	if data, ok := c.Get(bodyKey).([]byte); ok {
		return data, nil
	}
	data, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxBody+1))
	if err != nil {
		return nil, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body could not be read", Err: err}
	}
	if len(data) > MaxBody {
		return nil, &posture.Error{Code: posture.CodeRequestEntityTooLarge}
	}
	c.Set(bodyKey, data)
	return data, nil
}

// Decode reads a JSON body into v. An empty body leaves v as it is (the
// caller's validation decides whether that is acceptable); anything that is
// not JSON of v's shape is COULD_NOT_PARSE_BODY with the reason. A body
// jsonBody has checked is only decoded.
func Decode(c echo.Context, v any) error {
	data, err := ReadBody(c)
	if err != nil {
		return err
	}
	if c.Get(checkedKey) == nil {
		return DecodeBytes(data, v)
	}
	return unmarshal(data, v)
}

// DecodeBytes is Decode for a body already read: CheckJSON, then decoded
// into v.
func DecodeBytes(data []byte, v any) error {
	if err := CheckJSON(data); err != nil {
		return err
	}
	return unmarshal(data, v)
}

// unmarshal decodes a body that is not nested too deep or other than
// UTF-8; an empty one leaves v as it is.
func unmarshal(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	// Most bodies are valid: json.Unmarshal reads them without copying.
	// One that is not is read again by a decoder, whose errors say more.
	if json.Unmarshal(data, v) == nil {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: ParseMessage(err)}
	}
	return Rest(dec, data)
}

// CheckJSON refuses data that DecodeBytes refuses whatever value it
// decodes into (not UTF-8, not JSON, nested too deep or with a key twice),
// without decoding it. Broken JSON is said as the decoder says it, before
// its shape is looked at.
func CheckJSON(data []byte) error {
	if err := CheckUTF8(data); err != nil {
		return err
	}
	if !json.Valid(data) {
		return unmarshal(data, new(json.RawMessage)) // nil for an empty body; the decoder's reason otherwise
	}
	return CheckShape(data)
}

// CheckUTF8 refuses a body that is not UTF-8, or whose strings hold an
// escaped half of a surrogate pair (\ud800 alone): a decoder replaces
// either with U+FFFD, which would change a name instead of refusing it.
func CheckUTF8(data []byte) error {
	bad := func(why string) error {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body is not valid: " + why}
	}
	if !utf8.Valid(data) {
		return bad("it is not UTF-8")
	}
	surrogate := func(i int) (rune, bool) { // the \uXXXX at data[i:], if one
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		return rune(n), err == nil
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' || i+1 >= len(data) {
			continue
		}
		r, ok := surrogate(i)
		if !ok {
			i++ // another escape: its character is not a backslash's start
			continue
		}
		switch {
		case r >= 0xd800 && r < 0xdc00:
			if low, ok := surrogate(i + 6); !ok || low < 0xdc00 || low > 0xdfff {
				return bad("a string holds half of a surrogate pair (\\u" + string(data[i+2:i+6]) + ")")
			}
			i += 11
		case r >= 0xdc00 && r <= 0xdfff:
			return bad("a string holds half of a surrogate pair (\\u" + string(data[i+2:i+6]) + ")")
		default:
			i += 5
		}
	}
	return nil
}

// MaxDepth is the deepest nesting of arrays and objects a body may have.
// Free-form values (a config's data, a config type's schema) are stored
// inside an event a few levels deeper, and an event must always decode:
// the decoder's own limit is 10,000.
const MaxDepth = 100

// foldKey is key with each rune replaced by the least of those it equals
// without regard to case (its simple case folding orbit: K, k and the
// Kelvin sign): two keys fold alike exactly when strings.EqualFold, and
// the decoder, take them as one.
func foldKey(key string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, key)
}

// freeMembers are the members whose objects are free-form maps, in which
// keys that differ only in case are distinct (a tag "Env" beside "env").
var freeMembers = [][]byte{[]byte("tags"), []byte("appData"), []byte("data"), []byte("schema")}

// idKeyed are the members whose objects are keyed by ids, which are
// case-sensitive: "AbcDefGhij" and "abcdefghij" are two ids.
var idKeyed = [][]byte{[]byte("serviceHostingCosts"), []byte("serviceHostingPrecedences"), []byte("update")}

// shapeFrame is an object or array CheckShape is in.
type shapeFrame struct {
	object, free bool
	exact        bool // keys are ids: only the same name is twice
	expectKey    bool
	first        int               // its keys are keys[first:]
	seen         map[string]string // past a few keys: folded (or, free or exact, as is) key -> key
	// Where it is, for the error: the member it is the value of, or
	// (inArray) its index in its array; n counts an array's values.
	name     []byte
	inArray  bool
	index, n int
}

// shapeKeys is how many keys of an object CheckShape compares one by one
// before it keeps them in a map.
const shapeKeys = 16

// CheckShape refuses a JSON document nested deeper than MaxDepth, or with
// an object that has a key twice: the same name (which I-JSON, RFC 7493,
// forbids), or names that differ only in case outside free-form members
// (tags, appData, a config's data, a schema) and maps keyed by ids. The
// decoder takes either as one field and keeps the last value, where another
// reader of the request (a proxy, an OpenAPI validator, an audit tool) may
// keep the first. It reads the body once and, for the bodies clients send,
// allocates nothing: keys are views of data (but an escaped one).
func CheckShape(data []byte) error {
	var stackBuf [8]shapeFrame
	var keysBuf [32][]byte
	stack, keys := stackBuf[:0], keysBuf[:0]
	var lastKey []byte
	keyStart := -1
	inString, escaped := false, false
	norm := func(f *shapeFrame, key []byte) string {
		if f.free || f.exact {
			return string(key)
		}
		return foldKey(string(key))
	}
	dup := func(f *shapeFrame, key []byte) ([]byte, bool) {
		if f.seen != nil {
			n := norm(f, key)
			other, ok := f.seen[n]
			f.seen[n] = string(key)
			return []byte(other), ok
		}
		for _, k := range keys[f.first:] {
			if bytes.Equal(k, key) || !f.free && !f.exact && bytes.EqualFold(k, key) {
				return k, true
			}
		}
		if keys = append(keys, key); len(keys)-f.first > shapeKeys {
			f.seen = make(map[string]string, 4*shapeKeys)
			for _, k := range keys[f.first:] {
				f.seen[norm(f, k)] = string(k)
			}
			keys = keys[:f.first]
		}
		return nil, false
	}
	member := func(names [][]byte) bool {
		return slices.ContainsFunc(names, func(m []byte) bool { return bytes.EqualFold(m, lastKey) })
	}
	for i, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
				if keyStart < 0 {
					break
				}
				raw := data[keyStart : i+1]
				key := raw[1 : len(raw)-1]
				if bytes.IndexByte(raw, '\\') >= 0 {
					var s string
					if json.Unmarshal(raw, &s) != nil {
						return nil // not JSON: its decoding says why
					}
					key = []byte(s)
				}
				keyStart, lastKey = -1, key
				if other, ok := dup(&stack[len(stack)-1], key); ok {
					return duplicateKey(stack, other, key)
				}
			}
		case b == '"':
			inString = true
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				keyStart, stack[n-1].expectKey = i, false
			}
		case b == '[' || b == '{':
			if len(stack) >= MaxDepth {
				return &posture.Error{Code: posture.CodeCouldNotParseBody,
					Message: fmt.Sprintf("the body is nested deeper than %d levels of arrays and objects", MaxDepth)}
			}
			f := shapeFrame{object: b == '{', expectKey: b == '{', first: len(keys)}
			if n := len(stack); n > 0 {
				parent := &stack[n-1]
				if parent.object {
					f.free, f.exact, f.name = parent.free || member(freeMembers), member(idKeyed), lastKey
				} else {
					f.free, f.inArray, f.index = parent.free, true, parent.n
				}
			}
			stack = append(stack, f)
		case b == ']' || b == '}':
			if n := len(stack); n > 0 {
				keys = keys[:stack[n-1].first]
				stack = stack[:n-1]
			}
		case b == ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expectKey = true
			} else if n > 0 {
				stack[n-1].n++
			}
		}
	}
	return nil
}

// duplicateKey is CheckShape's error for key, which is twice in the
// innermost object of stack, first as other.
func duplicateKey(stack []shapeFrame, other, key []byte) error {
	why := ""
	if !bytes.Equal(other, key) {
		why = fmt.Sprintf(" (%q and %q: keys are matched without regard to case)", other, key)
	}
	var at strings.Builder
	for _, f := range stack[1:] {
		switch {
		case f.inArray:
			fmt.Fprintf(&at, "[%d]", f.index)
		case at.Len() > 0:
			at.WriteString("." + string(f.name))
		default:
			at.Write(f.name)
		}
	}
	if at.Len() > 0 {
		why += ", in " + at.String()
	}
	return &posture.Error{Code: posture.CodeCouldNotParseBody,
		Message: fmt.Sprintf("the body is not valid: an object has the key %q twice%s", key, why)}
}

// Rest refuses anything but white space after the value dec decoded from
// data ("{...}]" is not JSON).
func Rest(dec *json.Decoder, data []byte) error {
	if len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body is not valid JSON: more after the value"}
	}
	return nil
}

// ParseMessage says what of a body did not decode: a value of the wrong
// type, named by its field, or JSON that does not parse.
func ParseMessage(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Sprintf("%s: expected %s, got a JSON %s", field, jsonKind(te.Type), te.Value)
	}
	return "the body is not valid JSON: " + err.Error()
}

// jsonKind names what JSON value a Go type decodes from ("an object", not
// "management.enforcementIn").
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.String()
}
