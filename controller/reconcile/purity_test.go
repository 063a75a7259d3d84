package reconcile

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPure keeps this package a decision: it may not reach a client, take a context or read the
// clock (time is an input: Input.Now), so every behaviour in it is a table test away.
func TestPure(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case path == "context", path == "net/http", strings.HasPrefix(path, "k8s.io/client-go/"):
				t.Errorf("%s imports %s: I/O belongs in package controller", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" && (sel.Sel.Name == "Now" || sel.Sel.Name == "Since" || sel.Sel.Name == "Until") {
					t.Errorf("%s reads the clock (time.%s): take the time as an input", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
	// Nor through a dependency: no client of any kind below this package.
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "k8s.io/client-go/") || strings.HasPrefix(dep, "github.com/example/inferenceservice-operator/") && dep != "github.com/example/inferenceservice-operator/crd" && !strings.HasSuffix(dep, "/informers/kinds") && !strings.HasSuffix(dep, "/controller/reconcile") && !isEngine(dep) &&
			!strings.HasSuffix(dep, "/controller/rollout") {
			t.Errorf("depends on %s", dep)
		}
	}
}

// controller/rollout is the canary's decision, held to the same rule by its own TestPure.

// isEngine is a package of the engines' knowledge (controller/engine and each engine's), pure
// and standard-library-only itself (TestEnginesAreLeaves in package engine).
func isEngine(dep string) bool {
	const root = "github.com/example/inferenceservice-operator/controller/engine"
	return dep == root || strings.HasPrefix(dep, root+"/")
}
