package eventlog_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/eventlog"
)

// The log's decoder reads every event type as encoding/json does, field
// for field, with every field set (and again with none set).
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.UTC)
	for _, typ := range posture.EventTypes() {
		zero, err := posture.Event{Type: typ, Data: []byte("{}")}.Decode()
		if err != nil {
			t.Fatal(err)
		}
		full := reflect.New(reflect.TypeOf(zero)).Elem()
		fill(full, 0)
		for name, p := range map[string]posture.Payload{"zero": zero, "full": full.Interface().(posture.Payload)} {
			t.Run(typ+"/"+name, func(t *testing.T) {
				e := posture.MustEvent(p, at)
				e.Actor, e.RequestID = "actor \"é\"", "req <1>"
				data, err := eventlog.EncodeForTest(e)
				if err != nil {
					t.Fatal(err)
				}
				got, err := eventlog.DecodeForTest(data, 42)
				if err != nil {
					t.Fatal(err)
				}
				var want posture.Event
				if err := json.Unmarshal(data, &want); err != nil {
					t.Fatal(err)
				}
				want.Seq = 42
				gotP, err := got.Decode()
				if err != nil {
					t.Fatal(err)
				}
				wantP, err := want.Decode()
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(wantP, gotP); diff != "" {
					t.Errorf("payload (-encoding/json +log):\n%s", diff)
				}
				if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(posture.Event{})); diff != "" {
					t.Errorf("envelope (-encoding/json +log):\n%s", diff)
				}
			})
		}
	}
}

// fill sets every field of v to a value that is not its zero value: strings
// with characters JSON escapes, two elements in slices and maps.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d \"q\" \\ <&> é 世 \u2028", depth))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(-7 - depth))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(7 + depth))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // []byte, json.RawMessage
			v.SetBytes([]byte(`{"raw":[1,"x"]}`))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), depth+1)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for i := range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, depth+1+i)
			fill(e, depth+1)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC).Add(time.Duration(depth) * time.Hour)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}
