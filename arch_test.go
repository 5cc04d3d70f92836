package posture_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/seed-0809debe/posture"

// layers says, for each package of the module, which other packages of the
// module it may depend on (directly or not). Sibling adapters never import
// each other: cmd is the only place where they meet.
var layers = map[string][]string{
	"":                     {},
	"eventlog":             {""},
	"eventlog/natstest":    {},
	"evaluator":            {""},
	"expiry":               {""},
	"api/client/mfacode":   {""},
	"pki":                  {""},
	"secrets":              {},
	"projections":          {"", "evaluator"},
	"api":                  {"", "api/filter"},
	"api/filter":           {""},
	"api/connlimit":        {},
	"api/apitest":          {"", "api", "api/filter"},
	"api/client":           {"", "api", "api/filter", "evaluator", "api/client/mfacode", "pki"},
	"api/management":       {"", "api", "api/filter", "evaluator", "pki"},
	"webhooks":             {""},
	"console":              {""},
	"projections/backtest": {"", "evaluator", "projections", "expiry"},
}

// rootAllowed is the allow-list of the root package (the shared
// vocabulary): the standard library, minus HTTP, and these modules. doc.go
// says the same.
var rootAllowed = []string{"github.com/google/uuid"}

// rootForbiddenStd are standard packages the root must not reach: status
// codes and transports belong to the HTTP edge.
var rootForbiddenStd = []string{"net/http"}

// forbidden are outside packages that a layer must not reach, by prefix.
var forbidden = map[string][]string{
	"evaluator":            {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"eventlog":             {"github.com/cockroachdb/", "github.com/labstack/"},
	"projections":          {"github.com/nats-io/", "github.com/labstack/"},
	"api":                  {"github.com/nats-io/", "github.com/cockroachdb/"},
	"api/apitest":          {"github.com/nats-io/", "github.com/cockroachdb/"},
	"pki":                  {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"secrets":              {"github.com/"},
	"expiry":               {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"api/client/mfacode":   {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"webhooks":             {"github.com/cockroachdb/", "github.com/labstack/"},
	"console":              {"github.com/nats-io/", "github.com/cockroachdb/", "github.com/labstack/"},
	"projections/backtest": {"github.com/nats-io/", "github.com/labstack/"},
}

func TestImportRules(t *testing.T) {
	out, err := goList(t, "-deps=false", "-json", "./...")
	if err != nil {
		t.Fatal(err)
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
		deps, err := goList(t, "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg.ImportPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(deps), "\n") {
			dep, std, _ := strings.Cut(line, " ")
			if dep == pkg.ImportPath {
				continue
			}
			if rel == "" && !strings.HasPrefix(dep, module) {
				// The root is an allow-list: the standard library (minus
				// HTTP) and rootAllowed's modules and their packages.
				switch {
				case std == "true" && contains(rootForbiddenStd, dep):
					t.Errorf("the root package depends on %s, which belongs at the HTTP edge", dep)
				case std != "true" && !hasAnyPrefix(dep, rootAllowed):
					t.Errorf("the root package depends on %s, which is not in rootAllowed (doc.go lists what it may import)", dep)
				}
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

// goList runs go list and fails with its stderr: an import rule that
// cannot be checked is a failure, not a skip.
func goList(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if s == p || strings.HasPrefix(s, p+"/") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
