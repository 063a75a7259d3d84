package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fuzzTargets finds every fuzz target of the tree, as `go test -fuzz` does: a func FuzzXxx(f
// *testing.F) of a _test.go file, keyed ./package:FuzzXxx with its file. Every module of the
// repository is walked (the Makefile's fuzz list check greps them all); build outputs and
// hidden directories are not.
func fuzzTargets(t *testing.T) map[string]string {
	t.Helper()
	root := Root()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "bin" || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Fuzz") {
				continue
			}
			pkg := "./" + filepath.ToSlash(filepath.Dir(rel))
			out[pkg+":"+fn.Name.Name] = filepath.ToSlash(rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fuzzTargetsLine is the Makefile's list of fuzz targets, ./package:FuzzXxx each.
var fuzzTargetsLine = regexp.MustCompile(`(?m)^FUZZ_TARGETS\s*[:?]?=\s*(.*)$`)

// TestFuzzTargetsTable: docs/development.md's fuzz table and the Makefile's FUZZ_TARGETS list
// each fuzz target of the tree, and nothing else.
func TestFuzzTargetsTable(t *testing.T) {
	tables, err := TablesWith("docs/development.md", "", "fuzz target")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, tb := range tables {
		for _, r := range tb.Rows {
			name, pkg := Code(r.Cells[0]), Code(r.Cells[1])
			if len(name) != 1 || len(pkg) != 1 {
				t.Errorf("%s: a fuzz row needs one `FuzzXxx` and one `./package`", tb.Where(r))
				continue
			}
			documented[pkg[0]+":"+name[0]] = tb.Where(r)
		}
	}
	tree := fuzzTargets(t)
	for _, e := range Compare("fuzz target", documented, tree) {
		t.Error(e)
	}

	mk, err := os.ReadFile(filepath.Join(Root(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := fuzzTargetsLine.FindSubmatch(mk)
	if m == nil {
		t.Fatal("Makefile: no FUZZ_TARGETS line")
	}
	listed := map[string]string{}
	for _, f := range strings.Fields(string(m[1])) {
		listed[f] = "Makefile's FUZZ_TARGETS"
	}
	for _, e := range Compare("fuzz target", listed, tree) {
		t.Error(e)
	}
	t.Logf("%d fuzz targets in the tree, %d documented, %d in FUZZ_TARGETS", len(tree), len(documented), len(listed))
}
