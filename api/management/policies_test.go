package management

import (
	"net/http"
	"testing"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api/apitest"
)

// TestServicePolicyHandlers: the service policy resource, its roles shown
// with names, and what it refuses.
func TestServicePolicyHandlers(t *testing.T) {
	const policies = "/service-policies"
	valid := `{"name":"crm-bind","type":"Bind","semantic":"AnyOf","identityRoles":["#servers"],"serviceRoles":["@svc1"],"postureCheckRoles":[]}`
	runManagement(t, []apitest.Case{
		{Name: "createServicePolicy", Method: http.MethodPost, Path: policies, Body: valid,
			Status: http.StatusCreated, Appended: []string{created[posture.ServicePolicy]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				p := payload[posture.Created[posture.ServicePolicy]](t, log).Entity
				if p.Type != posture.Bind || p.Semantic != posture.AnyOf || p.ServiceRoles[0] != "@svc1" || p.PostureCheckRoles == nil {
					t.Fatalf("created %+v", p)
				}
			}},
		{Name: "createServicePolicy: type in any case, semantic AllOf by default", Method: http.MethodPost, Path: policies,
			Body: `{"name":"p2","type":"dial","identityRoles":["#all"]}`, Status: http.StatusCreated, Appended: []string{created[posture.ServicePolicy]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				if p := payload[posture.Created[posture.ServicePolicy]](t, log).Entity; p.Type != posture.Dial || p.Semantic != posture.AllOf {
					t.Fatalf("created %+v", p)
				}
			}},
		{Name: "createServicePolicy: type missing", Method: http.MethodPost, Path: policies, Body: `{"name":"p2"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "type"},
		{Name: "createServicePolicy: type unknown", Method: http.MethodPost, Path: policies, Body: `{"name":"p2","type":"Host"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "type"},
		{Name: "createServicePolicy: semantic unknown", Method: http.MethodPost, Path: policies, Body: `{"name":"p2","type":"Dial","semantic":"Most"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "semantic"},
		{Name: "createServicePolicy: a role without # or @", Method: http.MethodPost, Path: policies, Body: `{"name":"p2","type":"Dial","serviceRoles":["crm"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "serviceRoles"},
		{Name: "createServicePolicy: #all beside another role", Method: http.MethodPost, Path: policies, Body: `{"name":"p2","type":"Dial","identityRoles":["#all","#x"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "identityRoles"},
		{Name: "createServicePolicy: roles that are not a list", Method: http.MethodPost, Path: policies, Body: `{"name":"p2","type":"Dial","identityRoles":"#all"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "createServicePolicy: name missing", Method: http.MethodPost, Path: policies, Body: `{"type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createServicePolicy: name blank", Method: http.MethodPost, Path: policies, Body: `{"name":"  ","type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createServicePolicy: a name with a control character", Method: http.MethodPost, Path: policies, Body: `{"name":"crm\u0000dial","type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createServicePolicy: a name with a bidirectional override", Method: http.MethodPost, Path: policies, Body: `{"name":"crm\u202edial","type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createServicePolicy: the name is taken", Method: http.MethodPost, Path: policies, Body: `{"name":"crm-dial","type":"Dial"}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "createServicePolicy: empty body", Method: http.MethodPost, Path: policies, Body: ``,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "name"},
		{Name: "detailServicePolicy: roles by id show names", Method: http.MethodGet, Path: policies + "/pol1", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				var p struct {
					ServiceRolesDisplay []RoleDisplay `json:"serviceRolesDisplay"`
				}
				r.DataInto(t, &p)
				if len(p.ServiceRolesDisplay) != 1 || p.ServiceRolesDisplay[0] != (RoleDisplay{Role: "@svc1", Name: "@crm"}) {
					t.Fatalf("policy %s", r.Data)
				}
			}},
		{Name: "detailServicePolicy: unknown id", Method: http.MethodGet, Path: policies + "/pol9", Status: http.StatusNotFound, Code: posture.CodeNotFound},
		{Name: "updateServicePolicy: keeps its id and creation time", Method: http.MethodPut, Path: policies + "/pol1", Body: valid,
			Status: http.StatusOK, Appended: []string{updated[posture.ServicePolicy]()},
			Check: func(t *testing.T, _ apitest.Response, log *apitest.Log) {
				p := payload[posture.Updated[posture.ServicePolicy]](t, log).Entity
				if p.ID != "pol1" || p.Name != "crm-bind" || !p.CreatedAt.Equal(crmPolicy.CreatedAt) || !p.UpdatedAt.Equal(handlerNow) {
					t.Fatalf("updated %+v", p)
				}
			}},
		{Name: "patchServicePolicy: a bad role changes nothing", Method: http.MethodPatch, Path: policies + "/pol1", Body: `{"postureCheckRoles":["@"]}`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "postureCheckRoles"},
		{Name: "deleteServicePolicy", Method: http.MethodDelete, Path: policies + "/pol1", Status: http.StatusOK, Appended: []string{deleted[posture.ServicePolicy]()}},
		{Name: "deleteServicePolicy: unknown id", Method: http.MethodDelete, Path: policies + "/pol9", Status: http.StatusNotFound, Code: posture.CodeNotFound},
	}, crm, crmPolicy)
}

// TestEdgeRouterPolicyHandlers: the router policies share one validation.
func TestEdgeRouterPolicyHandlers(t *testing.T) {
	runManagement(t, []apitest.Case{
		{Name: "createEdgeRouterPolicy", Method: http.MethodPost, Path: "/edge-router-policies",
			Body: `{"name":"all","identityRoles":["#all"],"edgeRouterRoles":["#all"]}`, Status: http.StatusCreated, Appended: []string{created[posture.EdgeRouterPolicy]()}},
		{Name: "createEdgeRouterPolicy: a bad edge router role", Method: http.MethodPost, Path: "/edge-router-policies",
			Body: `{"name":"all","identityRoles":["#all"],"edgeRouterRoles":["all"]}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "edgeRouterRoles"},
		{Name: "createServiceEdgeRouterPolicy: semantic unknown", Method: http.MethodPost, Path: "/service-edge-router-policies",
			Body: `{"name":"all","semantic":"Some","serviceRoles":["#all"],"edgeRouterRoles":["#all"]}`, Status: http.StatusBadRequest, Code: posture.CodeCouldNotValidate, Field: "semantic"},
		{Name: "createEdgeRouter: malformed JSON", Method: http.MethodPost, Path: "/edge-routers", Body: `{"name":"er1"`,
			Status: http.StatusBadRequest, Code: posture.CodeCouldNotParseBody},
		{Name: "listEdgeRouters: none", Method: http.MethodGet, Path: "/edge-routers", Status: http.StatusOK,
			Check: func(t *testing.T, r apitest.Response, _ *apitest.Log) {
				if string(r.Data) != "[]" {
					t.Fatalf("routers %s", r.Data)
				}
			}},
	})
}
