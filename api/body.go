package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
)

// MaxBody bounds request bodies.
const MaxBody = 1 << 20

// ReadBody reads the request body up to MaxBody.
func ReadBody(c echo.Context) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(c.Request().Body, MaxBody+1))
	if err != nil {
		return nil, &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body could not be read", Err: err}
	}
	if len(data) > MaxBody {
		return nil, &posture.Error{Code: posture.CodeRequestEntityTooLarge}
	}
	return data, nil
}

// Decode reads a JSON body into v. An empty body leaves v as it is (the
// caller's validation decides whether that is acceptable); anything that is
// not JSON of v's shape is COULD_NOT_PARSE_BODY with the reason.
func Decode(c echo.Context, v any) error {
	data, err := ReadBody(c)
	if err != nil {
		return err
	}
	return DecodeBytes(data, v)
}

// DecodeBytes is Decode for a body already read.
func DecodeBytes(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: parseMessage(err)}
	}
	if dec.More() {
		return &posture.Error{Code: posture.CodeCouldNotParseBody, Message: "the body holds more than one JSON value"}
	}
	return nil
}

func parseMessage(err error) string {
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
