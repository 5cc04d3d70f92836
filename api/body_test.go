package api_test

import (
	"errors"
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
