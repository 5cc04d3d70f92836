package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/seed-0809debe/posture/api"
)

// FuzzPostureCheckBody posts arbitrary bodies to the posture check create:
// the node never panics, answers 201 or a 400 envelope, and a 400 appends
// nothing to the log.
func FuzzPostureCheckBody(f *testing.F) {
	seeds := []string{
		`{"typeId":"OS","name":"a","operatingSystems":[{"type":"Windows","versions":[">=10.0.0"]}]}`,
		`{"typeId":"MAC","name":"b","macAddresses":["00:11:22:33:44:55"]}`,
		`{"typeId":"DOMAIN","name":"c","domains":["corp"]}`,
		`{"typeId":"MFA","timeoutSeconds":30,"promptOnWake":true}`,
		`{"typeId":"PROCESS","name":"d","process":{"osType":"Linux","path":"/x","hashes":["` + hashA + `"]}}`,
		`{"typeId":"PROCESS_MULTI","name":"e","semantic":"OneOf","processes":[{"os":"WINDOWS","path":"c:\\x"}]}`,
		`{"typeId":"OS","operatingSystems":[{"type":null,"versions":[1]}]}`,
		`{"typeId":"OS","name":"f","operatingSystems":[{"type":"Linux","versions":["~>1.x || <<2"]}]}`,
		`{"typeId":"MAC","name":"g","macAddresses":[null,""]}`,
		`{"tags":{"a":[1]}}`, `[]`, `null`, `"x"`, ``, `{`, `{"typeId":5}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	n := startTestNode(f, defaultTestConfig(f.TempDir()))
	tok := n.adminToken(f)
	f.Fuzz(func(t *testing.T, body string) {
		before, err := n.elog.LastSeq(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, mgmt+"/posture-checks", bytes.NewBufferString(body))
		req.Header.Set(api.HeaderSession, tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		n.handler.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusCreated:
			return
		case http.StatusBadRequest:
			var env api.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Error.Code == "" || env.Error.RequestID == "" {
				t.Fatalf("400 without an error envelope: %s", rec.Body)
			}
			after, err := n.elog.LastSeq(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			// Activity touches may land; model events may not.
			if after != before && n.store.LastModelSeq() > before {
				t.Fatalf("a rejected body changed the model: %s", body)
			}
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
	})
}
