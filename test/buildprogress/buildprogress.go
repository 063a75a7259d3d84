// Package buildprogress runs `go build` through buildprogress.sh, beside this file, so a build
// that takes minutes on a cold cache (the local cluster's Kubernetes, the operator, the
// adapter) says how far it is instead of going silent: packages of the total, time elapsed,
// an estimate. The Go helpers that build the suites' binaries call Build; shell build scripts
// call the script itself (test/localcluster/build.sh).
package buildprogress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Script is the path of buildprogress.sh.
func Script() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("buildprogress: cannot locate buildprogress.sh")
	}
	return filepath.Join(filepath.Dir(file), "buildprogress.sh"), nil
}

// Build runs `go build args...` in dir with env (nil: this process's), showing progress under
// label on progress (usually os.Stderr). The error carries go's own output (compiler errors).
func Build(ctx context.Context, label, dir string, env []string, progress io.Writer, args ...string) error {
	script, err := Script()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", append([]string{script, label, "go", "build"}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(args, " "), err, out.String())
	}
	return nil
}

// Env is os.Environ() with extra settings, later ones winning, for Build's env.
func Env(extra ...string) []string {
	return append(os.Environ(), extra...)
}
