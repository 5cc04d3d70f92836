package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// TestDecodeNamesJSONKinds: a value of the wrong type is named as a JSON
// kind, never as a Go type of the server.
func TestDecodeNamesJSONKinds(t *testing.T) {
	type inner struct{ Mode string }
	var v struct {
		Enforcement *inner   `json:"enforcement"`
		Names       []string `json:"names"`
		Age         *int64   `json:"age"`
	}
	for body, want := range map[string]string{
		`{"enforcement": "report"}`: `enforcement: expected an object, got a JSON string`,
		`{"names": "a"}`:            `names: expected an array, got a JSON string`,
		`{"age": "old"}`:            `age: expected an integer, got a JSON string`,
		`{"names": [1]}`:            `names: expected a string, got a JSON number`,
	} {
		err := api.DecodeBytes([]byte(body), &v)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != posture.CodeCouldNotParseBody || pe.Message != want {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// TestDecodeRefusesWhatIsNotOneShallowValue: data after the value, and
// nesting beyond MaxDepth (whose event, a few levels deeper, could not be
// read back from the log), are refused; strings holding brackets are not
// nesting.
func TestDecodeRefusesWhatIsNotOneShallowValue(t *testing.T) {
	deep := func(n int) string {
		s := `{"data":`
		for range n - 1 {
			s += "["
		}
		for range n - 1 {
			s += "]"
		}
		return s + "}"
	}
	for body, want := range map[string]string{
		`{"name":"x1"}]`:            "the body is not valid JSON: more after the value",
		`{"name":"x1"}}}`:           "the body is not valid JSON: more after the value",
		`{"name":"x1"} {}`:          "the body is not valid JSON: more after the value",
		deep(api.MaxDepth + 1):      "the body is nested deeper than 100 levels of arrays and objects",
		"{\"name\":\"ok\xff\xfe\"}": "the body is not valid: it is not UTF-8",
		`{"name":"sv\ud800x"}`:      `the body is not valid: a string holds half of a surrogate pair (\ud800)`,
		`{"name":"sv\udc00"}`:       `the body is not valid: a string holds half of a surrogate pair (\udc00)`,
		`{"name":"sv\ud800\u0041"}`: `the body is not valid: a string holds half of a surrogate pair (\ud800)`,
	} {
		var v map[string]any
		err := api.DecodeBytes([]byte(body), &v)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != posture.CodeCouldNotParseBody || pe.Message != want {
			t.Errorf("%.40s: %v, want %q", body, err, want)
		}
	}
	for _, body := range []string{deep(api.MaxDepth), `{"name":"[[[[{\"\\","more":"]]]"}` + " \n", `{"s":"` + strings.Repeat("[", 2*api.MaxDepth) + `"}`,
		`{"name":"emoji \ud83d\ude00 é \u00e9"}`, `{"name":"a backslash, then u: \\ud800"}`, `{"name":"\ufffd"}`} {
		var v map[string]any
		if err := api.DecodeBytes([]byte(body), &v); err != nil {
			t.Errorf("%.40s: %v", body, err)
		}
	}
}
