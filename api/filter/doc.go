// Package filter is the list filter language of the management and client
// APIs, in the style of OpenZiti's ZitiQL: the `filter` query parameter of a
// list request, its trailing `sort by`, `skip` and `limit` clauses, and the
// separate `sort` query parameter.
//
// It is a hand-written lexer and recursive-descent parser plus an evaluator
// over records in their JSON-decoded form (map[string]any holding string,
// float64 or json.Number, bool, nil, []any and map[string]any). It imports the
// standard library and the root package only; every error it returns is a
// *posture.Error (INVALID_FILTER from Parse, INVALID_SORT_IDENTIFIER from
// ParseSort) whose message names what is wrong and the 1-based character
// position where it was found.
//
// # Grammar
//
// Keywords are matched case-insensitively; field names are case-sensitive.
// Whitespace (space, tab, CR, LF) separates tokens and is otherwise ignored.
//
//	query      = [ orExpr ] { clause } .          (each clause at most once, any order)
//	orExpr     = andExpr { "or" andExpr } .
//	andExpr    = notExpr { "and" notExpr } .
//	notExpr    = "not" notExpr | primary .
//	primary    = "(" orExpr ")" | "true" | "false"
//	           | "isEmpty" "(" field ")"
//	           | subject condition .
//	subject    = field | ( "anyOf" | "allOf" ) "(" field ")" .
//	condition  = cmpOp value
//	           | [ "not" ] ( "contains" | "icontains" ) string
//	           | [ "not" ] "in" "[" value { "," value } "]"
//	           | [ "not" ] "between" value "and" value .
//	cmpOp      = "=" | "!=" | "<" | "<=" | ">" | ">=" .
//	value      = string | number | "true" | "false" | "null" | datetime .
//	clause     = "sort" "by" sortField { "," sortField }
//	           | "skip" integer
//	           | "limit" ( integer | "none" ) .
//	sortField  = field [ "asc" | "desc" ] .
//	field      = name { "." name } .              (a lone keyword is not a field)
//	name       = ( letter | "_" ) { letter | digit | "_" } .
//	string     = `"` { char | escape } `"` .      (escapes: \" \\ \/ \b \f \n \r \t \uXXXX)
//	number     = [ "-" ] digits [ "." digits ] [ ( "e" | "E" ) [ "+" | "-" ] digits ] .
//	datetime   = "datetime" "(" RFC3339 ")" .     (e.g. datetime(2024-01-02T03:04:05Z))
//	integer    = digits .
//
// The separate sort parameter (ParseSort) is `sortField { "," sortField }`.
//
// Types are checked where the literal alone decides: <, <=, >, >= and between
// take a string, number or datetime (both between bounds of the same type);
// contains and icontains take a string; in takes a non-empty list. Nesting of
// parentheses and "not" is limited to 100 levels.
//
// # Evaluation
//
// A field is looked up in the record by its dotted path (tags.env is
// rec["tags"]["env"]); a missing field, or a path through a non-object, is
// null. Values compare only with literals of their own type: strings
// byte-wise, numbers (float64, json.Number, Go integers) numerically, booleans
// by equality, and a datetime literal with a field holding an RFC 3339 string
// (or a time.Time) as instants. Any other pairing is simply false, never an
// error: `age != "x"` is false when age is a number or missing.
//
//   - `f = null` matches a missing or null field; `f != null` matches any other.
//   - `f in [a, b]` is `f = a or f = b`; `f not in [a, b]` is `f != a and f != b`.
//   - `f between a and b` is `f >= a and f <= b`; `f not between a and b` is
//     `f < a or f > b`. Neither matches a field of another type.
//   - contains and icontains (case-insensitive) test substrings of a string
//     field. On an array field they test whether any string element contains
//     the substring; `not contains` is the negation of that, and is false for a
//     field that is neither string nor array.
//   - anyOf(f) <condition> holds when some element of the array f satisfies
//     the condition; allOf(f) <condition> when f has at least one element and
//     every element does (an empty or missing array matches neither). A
//     non-array value counts as a set of one element.
//   - isEmpty(f) holds when f is missing, null, an empty array or an empty
//     object.
//   - A field Options.Refs names a reference (an object with an "id", or an
//     array of them) and reads as its id, as a foreign key does in OpenZiti:
//     `identity = "x"`, `identity in [...]`, `isEmpty(identity)` and `sort by
//     identity` see the id (null for a reference without one), while
//     identity.name reads the object. A name Options.Aliases maps to a field
//     reads that field.
//   - Other conditions on an array field without anyOf/allOf are false, except
//     the null tests.
//
// A query without a predicate matches every record. Clamping limit and skip
// to the API's defaults and maxima, and choosing between a filter's clauses and
// the sort, limit and offset query parameters, is left to the caller.
//
// # Not implemented
//
// ZitiQL's count(...) and noneOf(...) set functions, isEmpty(from <entity>
// where ...) sub-queries, and single-quoted identifiers.
package filter
