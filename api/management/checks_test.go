package management

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
)

// TestCheckHandlers: the posture check resource (create, read, update,
// patch, delete) and the check types, with the bad inputs each refuses
// without appending anything. Unknown fields are ignored, as on the
// OpenZiti controller.
func TestCheckHandlers(t *testing.T) {
	const checks = "/posture-checks"
	runManagement(t, []apitest.Case{
		{Name: "createCheck: an OS check", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"linux","roleAttributes":["recent-os"],"operatingSystems":[{"type":"linux","versions":[">=5.10.0"]}]}`,
			Status: http.StatusCreated, Appended: []string{created[posture.Check]()},
			Check: func(t *testing.T, r apitest.Response, log *apitest.Log) {
				c := payload[posture.Created[posture.Check]](t, log).Entity
				if c.ID == "" || dataOf(t, r)["id"] != c.ID || c.Name != "linux" || c.OperatingSystems[0].Type != posture.OSLinux || !c.CreatedAt.Equal(handlerNow) {
					t.Fatalf("created %+v, answered %s", c, r.Data)
				}
			}},
		{Name: "createCheck: an MFA check without a name is named after its id", Method: http.MethodPost, Path: checks,
			Body: `{"typeId":"mfa","timeoutSeconds":0,"promptOnWake":true}`, Status: http.StatusCreated, Appended: []string{created[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				c := payload[posture.Created[posture.Check]](t, log).Entity
				if c.Name != "MFA check "+c.ID || c.TimeoutSeconds != -1 || !c.PromptOnWake || c.TypeID != posture.CheckMFA {
					t.Fatalf("created %+v", c)
				}
			}},
		{Name: "createCheck: an MFA timeout beyond 10 years", Method: http.MethodPost, Path: checks,
			Body: `{"typeId":"MFA","name":"mfa-huge","timeoutSeconds":9223372036854775807}`, Status: http.StatusBadRequest,
			Code: posture.CodeCouldNotValidate, Field: "timeoutSeconds"},
		{Name: "createCheck: unknown fields are ignored", Method: http.MethodPost, Path: checks,
			Body: `{"typeId":"DOMAIN","name":"corp","domains":["corp.example"],"colour":"blue"}`, Status: http.StatusCreated, Appended: []string{created[posture.Check]()}},
		{Name: "createCheck: both spellings of a DOMAIN check's domains, alike", Method: http.MethodPost, Path: checks,
			Body: `{"typeId":"DOMAIN","name":"corp","domains":["corp.example"],"macAddresses":["corp.example"]}`, Status: http.StatusCreated, Appended: []string{created[posture.Check]()}},
		{Name: "createCheck: both spellings of a DOMAIN check's domains, differing", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"DOMAIN","name":"corp","domains":["corp.example"],"macAddresses":["other.example"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "domains"},
		{Name: "createCheck: both spellings of roleAttributes, differing", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"DOMAIN","name":"corp","domains":["corp.example"],"roleAttributes":["a"],"attributes":["b"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "roleAttributes"},
		{Name: "createCheck: malformed JSON", Method: http.MethodPost, Path: checks, Body: `{"typeId":`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createCheck: not an object", Method: http.MethodPost, Path: checks, Body: `["OS"]`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createCheck: a name of the wrong type", Method: http.MethodPost, Path: checks, Body: `{"typeId":"OS","name":7}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createCheck: typeId missing", Method: http.MethodPost, Path: checks, Body: `{"name":"x"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "typeId"},
		{Name: "createCheck: typeId unknown", Method: http.MethodPost, Path: checks, Body: `{"typeId":"FIREWALL","name":"x"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "typeId"},
		{Name: "createCheck: a version that is no semver range", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Windows","versions":["ten"]}]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "operatingSystems[0].versions[0]"},
		{Name: "createCheck: a negated wildcard, which would match every version", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Linux","versions":[">=5.0.0","!*"]}]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "operatingSystems[0].versions[1]"},
		{Name: "createCheck: the controller's == and ! operators", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Linux","versions":["==6.1.0","!5.15.0"]}]}`,
			Status: http.StatusCreated, Appended: []string{created[posture.Check]()}},
		{Name: "createCheck: an OS type unknown", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"BeOS","versions":[]}]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "operatingSystems[0].type"},
		{Name: "createCheck: a MAC address that is none", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"MAC","name":"x","macAddresses":["00:11:22"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "macAddresses[0]"},
		{Name: "createCheck: a process's os and signerFingerprint, the seed's spellings", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"PROCESS","name":"x","process":{"os":"Windows","path":"C:\\a.exe","signerFingerprint":"0123456789abcdef0123456789abcdef01234567"}}`,
			Status: http.StatusCreated, Appended: []string{created[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if p := payload[posture.Created[posture.Check]](t, log).Entity.Process; p.OSType != "Windows" || !slices.Equal(p.SignerFingerprints, []string{"0123456789abcdef0123456789abcdef01234567"}) {
					t.Fatalf("created %+v", p)
				}
			}},
		{Name: "createCheck: a bad signerFingerprint is named as sent", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"PROCESS","name":"x","process":{"osType":"Windows","path":"C:\\a.exe","signerFingerprint":"abc"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "process.signerFingerprint"},
		{Name: "createCheck: both spellings of a process's signer fingerprints, differing", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"PROCESS","name":"x","process":{"osType":"Windows","path":"C:\\a.exe","signerFingerprint":"0123456789abcdef0123456789abcdef01234567","signerFingerprints":["fedcba9876543210fedcba9876543210fedcba98"]}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "process.signerFingerprint"},
		{Name: "createCheck: both spellings of a process's OS, differing", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"PROCESS","name":"x","process":{"osType":"Windows","os":"Linux","path":"/bin/a"}}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "process.os"},
		{Name: "createCheck: a PROCESS check without its process", Method: http.MethodPost, Path: checks,
			Body: `{"typeId":"PROCESS","name":"x"}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "process"},
		{Name: "createCheck: the name is taken", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"windows","operatingSystems":[{"type":"Windows","versions":[]}]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createCheck: a negative maxAgeSeconds", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Windows","versions":[]}],"maxAgeSeconds":-1}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "maxAgeSeconds"},
		{Name: "createCheck: onStale unknown", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Windows","versions":[]}],"maxAgeSeconds":60,"onStale":"maybe"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "onStale"},
		{Name: "createCheck: a role attribute that is a role", Method: http.MethodPost, Path: checks,
			Body:   `{"typeId":"MFA","name":"x","roleAttributes":["#mfa"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "roleAttributes"},

		{Name: "listChecks", Method: http.MethodGet, Path: checks, Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				l := listOf(t, r)
				if len(l) != 1 || l[0]["name"] != "windows" || r.Meta.Pagination == nil || r.Meta.Pagination.TotalCount != 1 {
					t.Fatalf("list %s meta %+v", r.Data, r.Meta)
				}
			}},
		{Name: "listChecks: a filter that does not parse", Method: http.MethodGet, Path: checks + `?filter=name%20%3D%3D`,
			Status: http.StatusBadRequest, Code: posture.CodeInvalidFilter},
		{Name: "listChecks: a limit that is no number", Method: http.MethodGet, Path: checks + "?limit=ten",
			Status: http.StatusBadRequest, Code: posture.CodeInvalidPagination},
		{Name: "detailCheck", Method: http.MethodGet, Path: checks + "/chk1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if d := dataOf(t, r); d["id"] != "chk1" || d["typeId"] != "OS" {
					t.Fatalf("check %s", r.Data)
				}
			}},
		{Name: "detailCheck: unknown id", Method: http.MethodGet, Path: checks + "/chk9", Status: http.StatusNotFound, Code: posture.CodeNotFound},

		{Name: "updateCheck: its type cannot change", Method: http.MethodPut, Path: checks + "/chk1", Body: `{"typeId":"MAC","name":"windows","macAddresses":["001122334455"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "typeId"},
		{Name: "updateCheck: unknown id", Method: http.MethodPut, Path: checks + "/chk9", Body: `{"typeId":"OS","name":"x","operatingSystems":[{"type":"Windows","versions":[]}]}`,
			Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "updateCheck: malformed JSON", Method: http.MethodPut, Path: checks + "/chk1", Body: `{`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "patchCheck: a new name keeps the rest", Method: http.MethodPatch, Path: checks + "/chk1", Body: `{"name":"windows-20h1"}`,
			Status: http.StatusOK, Appended: []string{updated[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				c := payload[posture.Updated[posture.Check]](t, log).Entity
				if c.ID != "chk1" || c.Name != "windows-20h1" || len(c.OperatingSystems) != 1 || c.OperatingSystems[0].Versions[0] != ">=10.0.19041" ||
					!c.CreatedAt.Equal(osCheck.CreatedAt) || c.RoleAttributes[0] != "recent-os" {
					t.Fatalf("updated %+v", c)
				}
			}},
		{Name: "patchCheck: a field named in another case replaces it, as in an update", Method: http.MethodPatch, Path: checks + "/chk1", Body: `{"NAME":"windows-21h2"}`,
			Status: http.StatusOK, Appended: []string{updated[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if c := payload[posture.Updated[posture.Check]](t, log).Entity; c.Name != "windows-21h2" || len(c.OperatingSystems) != 1 {
					t.Fatalf("updated %+v", c)
				}
			}},
		{Name: "patchCheck: one spelling of roleAttributes replaces the other", Method: http.MethodPatch, Path: checks + "/chk1", Body: `{"attributes":["new-os"]}`,
			Status: http.StatusOK, Appended: []string{updated[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if c := payload[posture.Updated[posture.Check]](t, log).Entity; !slices.Equal(c.RoleAttributes, []string{"new-os"}) {
					t.Fatalf("updated %+v", c)
				}
			}},
		{Name: "patchCheck: both spellings of roleAttributes, differing, as in a create", Method: http.MethodPatch, Path: checks + "/chk1",
			Body: `{"roleAttributes":["a"],"attributes":["b"]}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "roleAttributes"},
		{Name: "patchCheck: a field of the wrong type", Method: http.MethodPatch, Path: checks + "/chk1", Body: `{"operatingSystems":"Windows"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "patchCheck: unknown id", Method: http.MethodPatch, Path: checks + "/chk9", Body: `{"name":"x"}`,
			Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "deleteCheck", Method: http.MethodDelete, Path: checks + "/chk1", Status: http.StatusOK, Appended: []string{deleted[posture.Check]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if d := payload[posture.Deleted[posture.Check]](t, log); d.ID != "chk1" {
					t.Fatalf("deleted %+v", d)
				}
			}},
		{Name: "deleteCheck: unknown id", Method: http.MethodDelete, Path: checks + "/chk9", Status: http.StatusNotFound, Code: posture.CodeNotFound},

		{Name: "listCheckTypes", Method: http.MethodGet, Path: "/posture-check-types?limit=100", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if n := len(listOf(t, r)); n != len(posture.CheckTypes) {
					t.Fatalf("%d check types, want %d", n, len(posture.CheckTypes))
				}
			}},
		{Name: "detailCheckType: any case", Method: http.MethodGet, Path: "/posture-check-types/os", Status: http.StatusOK},
		{Name: "detailCheckType: unknown", Method: http.MethodGet, Path: "/posture-check-types/FIREWALL", Status: http.StatusNotFound, Code: posture.CodeNotFound},
	}, laptop, osCheck)
}

// TestEnforcementMessageVisible: a new or changed message must show as it
// reads (no control characters or bidirectional overrides); a message
// stored before that rule survives the check's updates unchanged.
func TestEnforcementMessageVisible(t *testing.T) {
	now := time.Now()
	hidden := "install fix\u202eexe.pdf"
	if _, err := enforcement(&enforcementIn{Mode: "report", Message: hidden}, nil, now); posture.CodeOf(err) != posture.CodeCouldNotValidate {
		t.Fatalf("a new message with an override: %v", err)
	}
	old := &posture.Enforcement{Mode: posture.ReportMode, Message: hidden}
	if _, err := enforcement(&enforcementIn{Mode: "report", Message: hidden}, old, now); err != nil {
		t.Fatalf("an older message kept as it is: %v", err)
	}
	if _, err := enforcement(&enforcementIn{Mode: "report", Message: hidden + "!"}, old, now); posture.CodeOf(err) != posture.CodeCouldNotValidate {
		t.Fatalf("an older message changed: %v", err)
	}
	if e, err := enforcement(&enforcementIn{Mode: "report", Message: "Update to 20H1 \u2014 see https://it.example/win"}, nil, now); err != nil || e.Message == "" {
		t.Fatalf("a plain message: %v %v", e, err)
	}
}

func TestMACAddresses(t *testing.T) {
	for in, ok := range map[string]bool{
		"aa:bb:cc:dd:ee:ff": true, "AABB.CCDD.EEFF": true, "00:11:22:33:44:55:66:77": true, "0011-2233-4455-6677": true,
		"aa:bb:cc:dd:ee": false, "00:11:22": false, "aa:bb:cc:dd:ee:ff:00": false, "gg:bb:cc:dd:ee:ff": false, "": false,
	} {
		if _, err := macAddresses([]string{in}); (err == nil) != ok {
			t.Errorf("macAddresses(%q): %v, want accepted %v", in, err, ok)
		}
	}
}
