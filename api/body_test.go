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
		`{"name":"x1"}]`:   "the body is not valid JSON: more after the value",
		`{"name":"x1"}}}`:  "the body is not valid JSON: more after the value",
		`{"name":"x1"} {}`: "the body is not valid JSON: more after the value",
		// Broken JSON is said as the decoder says it, not as a key twice.
		`{"a":1,"a"}`:               "the body is not valid JSON: invalid character '}' after object key",
		`{"\x":1,"\y":2}`:           "the body is not valid JSON: invalid character 'x' in string escape code",
		deep(api.MaxDepth + 1):      "the body is nested deeper than 100 levels of arrays and objects",
		"{\"name\":\"ok\xff\xfe\"}": "the body is not valid: it is not UTF-8",
		`{"name":"sv\ud800x"}`:      `the body is not valid: a string holds half of a surrogate pair (\ud800)`,
		`{"name":"sv\udc00"}`:       `the body is not valid: a string holds half of a surrogate pair (\udc00)`,
		`{"name":"sv\ud800\u0041"}`: `the body is not valid: a string holds half of a surrogate pair (\ud800)`,
		// A key twice in one object: the same name, escaped or not, or
		// the same but for case outside a free-form map.
		`{"name":"a","name":"b"}`:                                        `the body is not valid: an object has the key "name" twice`,
		`{"n\u0061me":"a","name":"b"}`:                                   `the body is not valid: an object has the key "name" twice`,
		`{"name":"a","NAME":"b"}`:                                        `the body is not valid: an object has the key "NAME" twice ("name" and "NAME": keys are matched without regard to case)`,
		`[{"a":1},{"b":{"typeId":"OS","x":[1,{"y":2}],"typeId":"MAC"}}]`: `the body is not valid: an object has the key "typeId" twice, in [1].b`,
		`{"tags":{"env":"a","env":"b"}}`:                                 `the body is not valid: an object has the key "env" twice, in tags`,
		`{"isAdmin":true,"iſAdmin":false}`:                               `the body is not valid: an object has the key "iſAdmin" twice ("isAdmin" and "iſAdmin": keys are matched without regard to case)`,
		`{"serviceHostingCosts":{"a":1,"a":2}}`:                          `the body is not valid: an object has the key "a" twice, in serviceHostingCosts`,
		`{"update":{"x":{"name":"a","NAME":"b"}}}`:                       `the body is not valid: an object has the key "NAME" twice ("name" and "NAME": keys are matched without regard to case), in update.x`,
		`{"k00":0,"k01":1,"k02":2,"k03":3,"k04":4,"k05":5,"k06":6,"k07":7,"k08":8,"k09":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"K03":7}`: `the body is not valid: an object has the key "K03" twice ("k03" and "K03": keys are matched without regard to case)`,
	} {
		var v map[string]any
		err := api.DecodeBytes([]byte(body), &v)
		var pe *posture.Error
		if !errors.As(err, &pe) || pe.Code != posture.CodeCouldNotParseBody || pe.Message != want {
			t.Errorf("%.40s: %v, want %q", body, err, want)
		}
	}
	for _, body := range []string{deep(api.MaxDepth), `{"name":"[[[[{\"\\","more":"]]]"}` + " \n", `{"s":"` + strings.Repeat("[", 2*api.MaxDepth) + `"}`,
		`{"name":"emoji \ud83d\ude00 é \u00e9"}`, `{"name":"a backslash, then u: \\ud800"}`, `{"name":"\ufffd"}`,
		// Keys that differ only in case are distinct in a free-form map,
		// the same key in two objects is not twice, and a string value
		// is not a key.
		`{"name":"x","tags":{"Env":"a","env":"b"},"appData":{"x":{"A":1,"a":2}}}`, `{"list":[{"name":"a"},{"name":"b"}]}`,
		`{"a":{"name":"x"},"b":{"name":"y"},"c":["name","name"],"d":"name"}`,
		// Case as the decoder folds it: I and the dotless ı are two keys,
		// with few keys in the object or many; ids are case-sensitive.
		`{"I":1,"ı":2}`, `{"k00":0,"k01":1,"k02":2,"k03":3,"k04":4,"k05":5,"k06":6,"k07":7,"k08":8,"k09":9,"k10":0,"k11":1,"k12":2,"k13":3,"k14":4,"k15":5,"k16":6,"I":1,"ı":2}`,
		`{"serviceHostingCosts":{"AbcDefGhij":1,"abcdefghij":2}}`} {
		var v map[string]any
		if err := api.DecodeBytes([]byte(body), &v); err != nil {
			t.Errorf("%.40s: %v", body, err)
		}
	}
}

// BenchmarkCheckShape: what every JSON body's check costs, on a posture
// response as clients send it and on a bulk of ten.
//
//	go test -run '^$' -bench CheckShape ./api/
func BenchmarkCheckShape(b *testing.B) {
	one := `{"id":"kJ3mX9sQ2p","typeId":"OS","type":"Windows","version":"10.0.19045","build":"19045"}`
	bulk := "[" + strings.Repeat(one+",", 9) + one + "]"
	for name, body := range map[string][]byte{"one": []byte(one), "bulk": []byte(bulk)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := api.CheckShape(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
