package evaluator

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// allowedImports are the only packages the evaluator may import: it is pure
// (no I/O, no clock, no mutable globals) and depends only on the standard
// library, the root package and semver. Adding to this list is a design
// decision, not a convenience.
var allowedImports = []string{
	"errors", "fmt", "slices", "strconv", "strings", "time",
	"github.com/Masterminds/semver/v3",
	"github.com/seed-0809debe/posture",
}

// clockFuncs are the functions of package time that read the clock or wait.
var clockFuncs = []string{"Now", "Since", "Until", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker"}

// TestPurity checks the package's non-test files: allowed imports only, no
// package-level variables and no reading of the clock.
func TestPurity(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(allowedImports, path) {
				t.Errorf("%s imports %q, which the evaluator may not use", fset.Position(imp.Pos()), path)
			}
		}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
				t.Errorf("%s: package-level variable; the evaluator keeps no state", fset.Position(g.Pos()))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && slices.Contains(clockFuncs, sel.Sel.Name) {
				t.Errorf("%s: time.%s reads the clock; use the now argument", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
}
