package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/seed-0809debe/posture"
	"github.com/seed-0809debe/posture/api"
)

// listed runs list for a request with query and answers the ids of the
// page, its filterableFields, and the error code when it fails.
func listed(t *testing.T, query string, list func(echo.Context) error) (ids, fields []string, code string) {
	t.Helper()
	rec := httptest.NewRecorder()
	ctx := echo.New().NewContext(httptest.NewRequest(http.MethodGet, "/x?"+query, nil), rec)
	if err := list(ctx); err != nil {
		if pe, ok := err.(*posture.Error); ok {
			return nil, nil, pe.Code
		}
		t.Fatalf("%s: %v", query, err)
	}
	var env struct {
		Data []struct {
			ID string `json:"id"`
		}
		Meta api.Meta
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatal(err)
	}
	ids = []string{}
	for _, d := range env.Data {
		ids = append(ids, d.ID)
	}
	return ids, env.Meta.FilterableFields, ""
}

func filterQuery(f string) string { return "filter=" + url.QueryEscape(f) }

// TestListFiltersRefsByID: a filter or sort on a field holding a reference
// to another entity ({id, name, entity, _links}) compares the reference's
// id, as on an OpenZiti controller's foreign keys; its id and name stay
// fields of their own.
func TestListFiltersRefsByID(t *testing.T) {
	auths := []api.AuthenticatorView{
		api.NewAuthenticatorView(posture.Authenticator{ID: "au1", IdentityID: "bob", Method: "updb", Username: "bob"}, "Bob", "authenticators"),
		api.NewAuthenticatorView(posture.Authenticator{ID: "au2", IdentityID: "bob", Method: "cert"}, "Bob", "authenticators"),
		api.NewAuthenticatorView(posture.Authenticator{ID: "au3", IdentityID: "carol", Method: "updb", Username: "carol"}, "Carol", "authenticators"),
	}
	list := func(c echo.Context) error { return api.List(c, auths) }
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{filterQuery(`identity="bob" and method="updb"`), []string{"au1"}},
		{filterQuery(`identity = "bob"`), []string{"au1", "au2"}},
		{filterQuery(`identity.id = "carol"`), []string{"au3"}},
		{filterQuery(`identity.name = "Bob" and method = "cert"`), []string{"au2"}},
		{filterQuery(`identity != "bob"`), []string{"au3"}},
		{filterQuery(`identity in ["carol", "nobody"]`), []string{"au3"}},
		{filterQuery(`not identity = "carol"`), []string{"au1", "au2"}},
		{filterQuery(`isEmpty(identity)`), []string{}},
		{filterQuery(`identity = "Bob"`), []string{}},
		{filterQuery(`true sort by identity desc, id`), []string{"au3", "au1", "au2"}},
		{"sort=" + url.QueryEscape("identity desc, id desc"), []string{"au3", "au2", "au1"}},
	} {
		ids, fields, code := listed(t, tt.query, list)
		if code != "" || !cmp.Equal(ids, tt.want) {
			t.Errorf("%s: %v %s, want %v", tt.query, ids, code, tt.want)
		}
		if !slices.Contains(fields, "identity") || !slices.Contains(fields, "identityId") {
			t.Errorf("%s: filterableFields %v", tt.query, fields)
		}
	}
}

// TestListFiltersMapViewRefs: views held as maps (identities, configs)
// compare their references by id too; an identity's type is a reference
// whose id is the type's name, and a config's type (the controller's name
// for it) is its configType.
func TestListFiltersMapViewRefs(t *testing.T) {
	identities := []any{
		api.IdentityView(posture.Identity{ID: "i1", Name: "laptop", Type: posture.IdentityDefault}, api.IdentityFacts{}, nil),
		api.IdentityView(posture.Identity{ID: "i2", Name: "router", Type: posture.IdentityRouter}, api.IdentityFacts{}, nil),
	}
	byIdentity := func(c echo.Context) error {
		return api.ListOf(c, identities, api.Fields{Of: reflect.TypeFor[posture.Identity]()})
	}
	for _, tt := range []struct {
		filter string
		want   []string
	}{
		{`type = "Default"`, []string{"i1"}},
		{`type.name = "Router"`, []string{"i2"}},
		{`type in ["Router", "User"]`, []string{"i2"}},
		{`typeId = "Default"`, []string{"i1"}},
	} {
		if ids, _, code := listed(t, filterQuery(tt.filter), byIdentity); code != "" || !cmp.Equal(ids, tt.want) {
			t.Errorf("identities %s: %v %s, want %v", tt.filter, ids, code, tt.want)
		}
	}

	configView := func(c posture.Config) any {
		return map[string]any{"id": c.ID, "name": c.Name, "configTypeId": c.ConfigTypeID,
			"configType": api.Ref("config-types", c.ConfigTypeID, "type-"+c.ConfigTypeID), "data": c.Data, "tags": c.Tags}
	}
	configs := []any{
		configView(posture.Config{ID: "c1", Name: "host", ConfigTypeID: "ct1"}),
		configView(posture.Config{ID: "c2", Name: "intercept", ConfigTypeID: "ct2"}),
		configView(posture.Config{ID: "c3", Name: "host-2", ConfigTypeID: "ct1"}),
	}
	fields := api.Fields{Of: reflect.TypeFor[posture.Config](), Sample: func() any { return configView(posture.Config{}) },
		Aliases: map[string]string{"type": "configType"}}
	byConfig := func(items []any) func(echo.Context) error {
		return func(c echo.Context) error { return api.ListOf(c, items, fields) }
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{filterQuery(`type = "ct1"`), []string{"c1", "c3"}},
		{filterQuery(`configType = "ct2"`), []string{"c2"}},
		{filterQuery(`type.name = "type-ct2"`), []string{"c2"}},
		{filterQuery(`type != "ct1"`), []string{"c2"}},
		{filterQuery(`configTypeId = "ct2"`), []string{"c2"}},
		{"sort=" + url.QueryEscape("type desc, name"), []string{"c2", "c1", "c3"}},
	} {
		ids, listedFields, code := listed(t, tt.query, byConfig(configs))
		if code != "" || !cmp.Equal(ids, tt.want) {
			t.Errorf("configs %s: %v %s, want %v", tt.query, ids, code, tt.want)
		}
		if !slices.Contains(listedFields, "type") || !slices.Contains(listedFields, "configType") {
			t.Errorf("configs %s: filterableFields %v lack type and configType", tt.query, listedFields)
		}
	}
	// An empty list takes the same filter.
	if ids, _, code := listed(t, filterQuery(`type = "ct1"`), byConfig(nil)); code != "" || len(ids) != 0 {
		t.Errorf("empty configs: %v %s", ids, code)
	}
	if _, _, code := listed(t, filterQuery(`kind = "ct1"`), byConfig(configs)); code != posture.CodeInvalidFilter {
		t.Errorf("configs kind: %q, want %s", code, posture.CodeInvalidFilter)
	}
}
