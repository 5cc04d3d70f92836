package posture_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/seed-0809debe/posture"

// layers says, for each package of the module, which other packages of the
// module it may depend on (directly or not). Sibling adapters never import
// each other: cmd is the only place where they meet.
var layers = map[string][]string{
	"":                  {},
	"eventlog":          {""},
	"eventlog/natstest": {},
	"evaluator":         {""},
	"pki":               {""},
	"secrets":           {},
	"projections":       {"", "evaluator"},
	"api":               {"", "api/filter"},
	"api/filter":        {""},
	"api/connlimit":     {},
	"api/client":        {"", "api", "api/filter", "evaluator", "pki"},
	"api/management":    {"", "api", "api/filter", "evaluator", "pki"},
	"webhooks":          {""},
}

// forbidden are outside packages that a layer must not reach, by prefix.
var forbidden = map[string][]string{
	"":            {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/", "github.com/go-json-experiment/", "github.com/goccy/"},
	"evaluator":   {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"eventlog":    {"github.com/cockroachdb/", "github.com/labstack/"},
	"projections": {"github.com/nats-io/", "github.com/labstack/"},
	"api":         {"github.com/nats-io/", "github.com/cockroachdb/"},
	"pki":         {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"webhooks":    {"github.com/cockroachdb/", "github.com/labstack/"},
	"secrets":     {"github.com/"},
}

func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", "./...").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for dec.More() {
		var pkg struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg.ImportPath, module), "/")
		if strings.HasPrefix(rel, "cmd/") {
			continue
		}
		allowed, ok := layers[rel]
		if !ok {
			t.Errorf("package %q has no import rule: add it to layers", rel)
			continue
		}
		seen[rel] = true
		deps, err := exec.Command("go", "list", "-deps", pkg.ImportPath).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, dep := range strings.Fields(string(deps)) {
			if dep == pkg.ImportPath {
				continue
			}
			if strings.HasPrefix(dep, module) {
				d := strings.TrimPrefix(strings.TrimPrefix(dep, module), "/")
				if !contains(allowed, d) {
					t.Errorf("%s depends on %s, which its layer does not allow", rel, d)
				}
				continue
			}
			for _, f := range forbidden[rel] {
				if dep == f || strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", rel, dep)
				}
			}
		}
	}
	if len(seen) == 0 {
		t.Fatal("go list found no packages")
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
