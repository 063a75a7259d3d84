// Package chart runs the Helm CLI that test/helm builds from helm.sh/helm/v4, for the tests of
// the chart in manifests/chart: its lint and template (manifests/chart_test.go) and its
// install, upgrade and uninstall on the local cluster (this package's test).
package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinEnv names the helm binary to run; the Makefile builds it (make helm) and sets it.
const BinEnv = "HELM_BIN"

// Dir is the chart, relative to the repository root.
const Dir = "manifests/chart/inferenceservice-operator"

// Bin is $HELM_BIN, else test/helm/bin/helm under root, built by test/helm/build.sh (which
// returns at once when the binary is newer than its module files).
func Bin(ctx context.Context, root string) (string, error) {
	if bin := os.Getenv(BinEnv); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(root, "test", "helm", "bin", "helm")
	out, err := exec.CommandContext(ctx, filepath.Join(root, "test", "helm", "build.sh"), bin).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("test/helm/build.sh: %w\n%s", err, out)
	}
	return bin, nil
}

// Helm runs one helm binary with its own configuration, cache and data directories (nothing of
// the user's ~/.config/helm is read or written) against one kubeconfig.
type Helm struct {
	Bin        string
	Home       string // scratch directory for helm's files
	Kubeconfig string // empty for commands that need no cluster (lint, template)
}

// Run runs helm with args in dir and returns its stdout and stderr; err carries stderr.
func (h Helm) Run(ctx context.Context, dir string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"),
		"KUBECONFIG="+h.Kubeconfig,
	)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}
