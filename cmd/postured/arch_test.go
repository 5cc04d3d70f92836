package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestAdaptersDoNotImportEachOther: the adapters (the APIs, the console,
// the log, the projections, webhook delivery) depend on interfaces they
// declare, and cmd passes in the real parts; none imports another, even
// through a third package.
func TestAdaptersDoNotImportEachOther(t *testing.T) {
	const mod = "github.com/seed-0809debe/posture/"
	adapters := []string{"api", "console", "eventlog", "projections", "webhooks"}
	for _, pkg := range []string{"api", "api/client", "api/management", "api/filter", "console", "eventlog", "projections", "webhooks"} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "../../"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		own := strings.SplitN(pkg, "/", 2)[0]
		for _, dep := range strings.Fields(string(out)) {
			rest, ok := strings.CutPrefix(dep, mod)
			if !ok {
				continue
			}
			if other := strings.SplitN(rest, "/", 2)[0]; other != own && slices.Contains(adapters, other) {
				t.Errorf("%s depends on %s: adapters do not import each other (declare an interface, wire it in cmd)", pkg, dep)
			}
		}
	}
}
