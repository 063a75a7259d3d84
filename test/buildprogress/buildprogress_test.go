package buildprogress

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeGo puts a `go` on PATH that lists n stale packages and, for build -v, prints them (with
// extra, go's own output, after them) and exits with code; it records its arguments.
func fakeGo(t *testing.T, n int, extra string, code int) (env []string, argsLog string) {
	t.Helper()
	dir := t.TempDir()
	argsLog = filepath.Join(dir, "args")
	script := `#!/usr/bin/env bash
echo "$*" >> ` + argsLog + `
case "$1" in
list) for i in $(seq 1 ` + itoa(n) + `); do echo "example.com/p$i"; done ;;
build) for a in "$@"; do [ "$a" = -v ] && v=1; done
	if [ -n "${v:-}" ]; then for i in $(seq 1 ` + itoa(n) + `); do echo "example.com/p$i" >&2; done; fi
	printf '%b' "` + extra + `" >&2
	exit ` + itoa(code) + ` ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return Env("PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "BUILDPROGRESS_EVERY=0"), argsLog
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestBuildShowsProgress: the count of stale packages is taken with the build's flags but not
// -o, every package -v prints moves the count, the end is told.
func TestBuildShowsProgress(t *testing.T) {
	env, argsLog := fakeGo(t, 30, "", 0)
	var progress strings.Builder
	if err := Build(context.Background(), "thing", t.TempDir(), env, &progress, "-ldflags", "-X a=b", "-o", "/tmp/out", "."); err != nil {
		t.Fatal(err)
	}
	got := progress.String()
	for _, want := range []string{"thing: compiling 30 packages\n", "thing: compiling 15/30 packages (50%)", "thing: compiling 30/30 packages (100%)", "linking", "thing: built in "} {
		if !strings.Contains(got, want) {
			t.Errorf("progress lacks %q:\n%s", want, got)
		}
	}
	args, _ := os.ReadFile(argsLog)
	lines := strings.Split(strings.TrimSpace(string(args)), "\n")
	if len(lines) != 2 || lines[0] != "list -deps -f {{if .Stale}}{{.ImportPath}}{{end}} -ldflags -X a=b ." || lines[1] != "build -v -ldflags -X a=b -o /tmp/out ." {
		t.Fatalf("go was run as %q", lines)
	}
}

// TestBuildFailure: go's own output is the error's, not progress; no "built" line.
func TestBuildFailure(t *testing.T) {
	env, _ := fakeGo(t, 5, `# example.com/p5\nx.go:1:2: undefined: y`, 1) // the last line without its newline
	var progress strings.Builder
	err := Build(context.Background(), "thing", t.TempDir(), env, &progress, ".")
	if err == nil || !strings.Contains(err.Error(), "x.go:1:2: undefined: y") || !strings.Contains(err.Error(), "# example.com/p5") {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(progress.String(), "built in") || strings.Contains(progress.String(), "undefined") {
		t.Fatalf("progress:\n%s", progress.String())
	}
}

// TestBuildCached: nothing stale but the main package: the build runs as it is, silently.
func TestBuildCached(t *testing.T) {
	env, argsLog := fakeGo(t, 1, "", 0)
	var progress strings.Builder
	if err := Build(context.Background(), "thing", t.TempDir(), env, &progress, "-o", "/tmp/out", "."); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(argsLog)
	if progress.String() != "" || !strings.HasSuffix(strings.TrimSpace(string(args)), "\nbuild -o /tmp/out .") {
		t.Fatalf("progress %q, go run as %q", progress.String(), args)
	}
}
