// Package purity holds a decision package to its rule from its own tests: no client, no
// context, no clock, not even through a dependency, so its every behaviour is a table test.
package purity

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Violations lists where the non-test Go files of dir import context, net/http or client-go,
// or read the clock (time.Now, Since, Until: time is an input).
func Violations(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if path == "context" || path == "net/http" || strings.HasPrefix(path, "k8s.io/client-go/") {
				out = append(out, fmt.Sprintf("%s imports %s: I/O belongs in package controller", fset.Position(imp.Pos()), path))
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					out = append(out, fmt.Sprintf("%s reads the clock (time.%s): take the time as an input", fset.Position(sel.Pos()), sel.Sel.Name))
				}
			}
			return true
		})
	}
	return out, nil
}

// Check fails t for each violation of the current directory's package, and for each of its
// dependencies that is client-go or that deny refuses (nil: none more).
func Check(t testing.TB, deny func(dep string) bool) {
	t.Helper()
	found, err := Violations(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range found {
		t.Error(v)
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go/") || deny != nil && deny(dep) {
			t.Errorf("depends on %s", dep)
		}
	}
}
