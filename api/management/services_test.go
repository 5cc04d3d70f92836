package management

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
)

// TestServiceHandlers: the service resource with its configs, the config
// types and configs it refers to, and what they refuse.
func TestServiceHandlers(t *testing.T) {
	hostV1 := posture.ConfigType{ID: "ct1", Name: "host.v1", CreatedAt: handlerNow, UpdatedAt: handlerNow, Schema: map[string]any{
		"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "required": []any{"port"},
		"properties": map[string]any{"port": map[string]any{"type": "integer", "minimum": float64(1), "maximum": float64(65535)}}}}
	var interceptSchema map[string]any
	if err := json.Unmarshal([]byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"r":{"type":"object",
		"properties":{"low":{"type":"integer"},"high":{"type":"integer","maximum":65535}}}},"properties":{"portRanges":{"type":"array","items":{"$ref":"#/definitions/r"}}}}`), &interceptSchema); err != nil {
		t.Fatal(err)
	}
	intercept := posture.ConfigType{ID: "ct2", Name: "intercept.v1", Schema: interceptSchema, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	falses := make([]any, 1000)
	for i := range falses {
		falses[i] = false
	}
	booleans := posture.ConfigType{ID: "ct3", Name: "booleans.v1", CreatedAt: handlerNow, UpdatedAt: handlerNow,
		Schema: map[string]any{"properties": map[string]any{"a": map[string]any{"items": map[string]any{"anyOf": falses}}}}}
	hostCfg := posture.Config{ID: "cfg1", Name: "crm-host", ConfigTypeID: "ct1", Data: map[string]any{"port": float64(443)}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	otherCfg := posture.Config{ID: "cfg2", Name: "crm-host-2", ConfigTypeID: "ct1", Data: map[string]any{"port": float64(8443)}, CreatedAt: handlerNow, UpdatedAt: handlerNow}
	runManagement(t, []apitest.Case{
		{Name: "createService: configs by name, encryption required by default", Method: http.MethodPost, Path: "/services",
			Body: `{"name":"erp","roleAttributes":["erp"],"configs":["crm-host"]}`, Status: http.StatusCreated, Appended: []string{created[posture.Service]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				s := payload[posture.Created[posture.Service]](t, log).Entity
				if s.Name != "erp" || len(s.Configs) != 1 || s.Configs[0] != "cfg1" || !s.EncryptionRequired || s.TerminatorStrategy != DefaultTerminatorStrategy {
					t.Fatalf("created %+v", s)
				}
			}},
		{Name: "createService: a config unknown", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp","configs":["nope"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "configs[0]"},
		{Name: "createService: two configs of one type", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp","configs":["cfg1","cfg2"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "configs[1]"},
		{Name: "createService: a negative maxIdleTimeMillis", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp","maxIdleTimeMillis":-5}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "maxIdleTimeMillis"},
		{Name: "createService: encryptionRequired of the wrong type", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp","encryptionRequired":"yes"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createService: the name is taken", Method: http.MethodPost, Path: "/services", Body: `{"name":"crm"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createService: tags that are not an object", Method: http.MethodPost, Path: "/services", Body: `{"name":"erp","tags":["a"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "detailService", Method: http.MethodGet, Path: "/services/svc1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if d := dataOf(t, r); d["name"] != "crm" || d["encryptionRequired"] != true {
					t.Fatalf("service %s", r.Data)
				}
			}},
		{Name: "detailService: unknown id", Method: http.MethodGet, Path: "/services/svc9", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "listServices: a filter", Method: http.MethodGet, Path: `/services?filter=name%3D%22crm%22`, Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if l := listOf(t, r); len(l) != 1 || l[0]["id"] != "svc1" {
					t.Fatalf("services %s", r.Data)
				}
			}},
		{Name: "patchService: encryptionRequired is set at create", Method: http.MethodPatch, Path: "/services/svc1", Body: `{"encryptionRequired":false,"maxIdleTimeMillis":1000}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "encryptionRequired"},
		{Name: "patchService: encryptionRequired as it is", Method: http.MethodPatch, Path: "/services/svc1", Body: `{"encryptionRequired":true,"maxIdleTimeMillis":1000}`,
			Status: http.StatusOK, Appended: []string{updated[posture.Service]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				s := payload[posture.Updated[posture.Service]](t, log).Entity
				if !s.EncryptionRequired || s.MaxIdleTimeMillis != 1000 || s.Name != "crm" {
					t.Fatalf("updated %+v", s)
				}
			}},
		{Name: "patchService: an alias in another case replaces the field", Method: http.MethodPatch, Path: "/services/svc1", Body: `{"ATTRIBUTES":["upper"]}`,
			Status: http.StatusOK, Appended: []string{updated[posture.Service]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if s := payload[posture.Updated[posture.Service]](t, log).Entity; len(s.RoleAttributes) != 1 || s.RoleAttributes[0] != "upper" {
					t.Fatalf("updated %+v", s)
				}
			}},
		{Name: "createService: more after the object, said as it is", Method: http.MethodPost, Path: "/services", Body: `{"name":"x"}]`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(r.Error.Message, "more after the value") {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "deleteService", Method: http.MethodDelete, Path: "/services/svc1", Status: http.StatusOK, Appended: []string{deleted[posture.Service]()}},

		{Name: "createConfig: a config type unknown", Method: http.MethodPost, Path: "/configs", Body: `{"name":"c3","configTypeId":"nope","data":{}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "configTypeId"},
		{Name: "createConfig: data that is not an object", Method: http.MethodPost, Path: "/configs", Body: `{"name":"c3","configTypeId":"ct1","data":[1]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createConfig: data its type's schema accepts", Method: http.MethodPost, Path: "/configs", Body: `{"name":"c3","configTypeId":"ct1","data":{"port":8080}}`,
			Status: http.StatusCreated, Appended: []string{created[posture.Config]()}},
		{Name: "createConfig: data its type's schema refuses", Method: http.MethodPost, Path: "/configs", Body: `{"name":"c3","configTypeId":"host.v1","data":{"port":70000}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(fmt.Sprint(r.Error.Cause), `does not match the schema of config type host.v1: at "/port": maximum`) {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "createConfig: data without what its type's schema requires", Method: http.MethodPost, Path: "/configs", Body: `{"name":"c3","configTypeId":"ct1","data":{"b":1}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data"},
		{Name: "updateConfig: data its type's schema refuses", Method: http.MethodPatch, Path: "/configs/cfg1", Body: `{"data":{"port":"443"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data"},
		{Name: "createConfigType: a schema that is not one", Method: http.MethodPost, Path: "/config-types", Body: `{"name":"x.v1","schema":{"type":"nosuchtype"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: a schema that refers to a file", Method: http.MethodPost, Path: "/config-types", Body: `{"name":"x.v1","schema":{"$ref":"file:///etc/passwd"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if strings.Contains(fmt.Sprint(r.Error), "root:") {
					t.Fatalf("the file was read: %+v", r.Error)
				}
			}},
		{Name: "createConfigType: a schema that refers to a URL", Method: http.MethodPost, Path: "/config-types", Body: `{"name":"x.v1","schema":{"$ref":"https://example.com/s.json"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: a schema that refers to itself", Method: http.MethodPost, Path: "/config-types", Body: `{"name":"x.v1","schema":{"$ref":"#"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: a schema that is exponential once its references are written out", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":` + doubling(22, false) + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(fmt.Sprint(r.Error.Cause), "more than 10000 schemas") {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "createConfigType: the same through anchors", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":` + doubling(22, true) + `}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: doublings inside a schema that changes the base URI, beside decoys at the root", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"$defs":{"L0":{},"L22":{}},"properties":{"x":{"$id":"urn:r",` + strings.TrimPrefix(doubling(22, false), "{") + `}}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: doublings under a property named like a keyword", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"dependentSchemas":{"enum":` + doubling(22, false) + `}}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: a self-reference through a percent-encoded pointer", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"$defs":{"a/b":{},"a":{"b":{"properties":{"x":{"$ref":"#/$defs/a%2Fb"}}}}},"$ref":"#/$defs/a/b"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: a dynamic reference", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"$dynamicAnchor":"a","properties":{"x":{"$dynamicRef":"#a"}}}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "schema"},
		{Name: "createConfigType: fragment ids inside, and a default that looks like a reference", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"$schema":"http://json-schema.org/draft-07/schema#","$id":"http://example.com/root.json","properties":{"x":{"$id":"#/properties/x","type":"string","default":{"$ref":"#/nowhere","id":"elsewhere"}}}}}`,
			Status: http.StatusCreated, Appended: []string{created[posture.ConfigType]()}},
		{Name: "createConfigType: a few doublings", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":` + doubling(4, false) + `}`,
			Status: http.StatusCreated, Appended: []string{created[posture.ConfigType]()}},
		{Name: "createConfigType: a draft-07 schema", Method: http.MethodPost, Path: "/config-types",
			Body:   `{"name":"x.v1","schema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","definitions":{"p":{"type":"integer"}},"properties":{"port":{"$ref":"#/definitions/p"}}}}`,
			Status: http.StatusCreated, Appended: []string{created[posture.ConfigType]()}},
		{Name: "createConfig: data its type's schema refuses through a reference", Method: http.MethodPost, Path: "/configs",
			Body:   `{"name":"c3","configTypeId":"ct2","data":{"portRanges":[{"low":1,"high":70000}]}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if cause := fmt.Sprint(r.Error.Cause); !strings.Contains(cause, `at "/portRanges/0/high": maximum: got 70,000, want 65,535`) || strings.Contains(cause, "file:") {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "createConfig: data against many boolean schemas", Method: http.MethodPost, Path: "/configs",
			Body:   `{"name":"c3","configTypeId":"ct3","data":{"a":[` + strings.Repeat(`1,`, 999) + `1]}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(fmt.Sprint(r.Error.Cause), "too many to check") {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "createConfig: more data than its type's schema can be checked against", Method: http.MethodPost, Path: "/configs",
			Body:   `{"name":"c3","configTypeId":"ct2","data":{"portRanges":[` + strings.Repeat(`{"low":1,"high":2},`, 50_000) + `{"low":1}]}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "data",
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if !strings.Contains(fmt.Sprint(r.Error.Cause), "too many to check") {
					t.Fatalf("error %+v", r.Error)
				}
			}},
		{Name: "detailConfig", Method: http.MethodGet, Path: "/configs/cfg1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if d := dataOf(t, r); d["name"] != "crm-host" || d["configTypeId"] != "ct1" {
					t.Fatalf("config %s", r.Data)
				}
			}},
		{Name: "detailConfigType: unknown id", Method: http.MethodGet, Path: "/config-types/ct9", Status: http.StatusNotFound, Code: posture.CodeNotFound},
	}, crm, hostV1, hostCfg, otherCfg, intercept, booleans)
}

// doubling is a schema whose levels are each anyOf two references to the
// level below (through JSON pointers, or anchors): 2^levels schemas once
// the references are written out.
func doubling(levels int, anchors bool) string {
	ref := func(i int) string { return fmt.Sprintf(`{"$ref":"#/$defs/L%d"}`, i) }
	if anchors {
		ref = func(i int) string { return fmt.Sprintf(`{"$ref":"#l%d"}`, i) }
	}
	defs := []string{`"L0":{"$anchor":"l0","type":"string"}`}
	for i := 1; i <= levels; i++ {
		defs = append(defs, fmt.Sprintf(`"L%d":{"$anchor":"l%d","anyOf":[%s,%s]}`, i, i, ref(i-1), ref(i-1)))
	}
	return fmt.Sprintf(`{"$defs":{%s},"properties":{"a":%s}}`, strings.Join(defs, ","), ref(levels))
}
