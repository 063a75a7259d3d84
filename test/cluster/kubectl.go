// Running kubectl against the cluster, its HOME and TMPDIR inside the data directory: the kubectl
// test/kubectl builds from the k8s.io/kubectl module at the control plane's version.

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/version"
)

// KubectlBinEnv names the kubectl binary the tests run; make test builds it
// (test/kubectl/build.sh) and sets it. KUBECTL, its older name, is read when it is unset.
const KubectlBinEnv = "KUBECTL_BIN"

// KubectlPath is $KUBECTL_BIN (or $KUBECTL), else test/kubectl/bin/kubectl, built by
// test/kubectl/build.sh, which returns at once while its inputs are unchanged (a first build
// compiles for minutes, its progress on stderr). No kubectl of the machine's is taken: one
// outside a minor version of the control plane (v1.37) is outside Kubernetes' version-skew
// policy.
func KubectlPath(ctx context.Context) (string, error) {
	for _, env := range []string{KubectlBinEnv, "KUBECTL"} {
		if bin := os.Getenv(env); bin != "" {
			if !exists(bin) {
				return "", fmt.Errorf("%s=%s does not exist: build it with `test/kubectl/build.sh %s`", env, bin, bin)
			}
			return bin, nil
		}
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("no kubectl: %w; run `test/kubectl/build.sh` and set %s=test/kubectl/bin/kubectl", err, KubectlBinEnv)
	}
	bin := filepath.Join(root, "test", "kubectl", "bin", "kubectl")
	cmd := exec.CommandContext(ctx, filepath.Join(root, "test", "kubectl", "build.sh"), bin)
	cmd.Env = buildEnv()
	// stdout is the script's "(up to date)" and the compiler's errors; stderr its progress.
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, io.MultiWriter(os.Stderr, &out)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("no kubectl: test/kubectl/build.sh %s: %w (run `test/kubectl/build.sh` and set %s)\n%s", bin, err, KubectlBinEnv, out.String())
	}
	return bin, nil
}

// kubectl is KubectlPath, found once per cluster; a failure is not kept (a later call may
// find the build done, or have a longer deadline).
func (c *Cluster) kubectl(ctx context.Context) (string, error) {
	c.kubectlMu.Lock()
	defer c.kubectlMu.Unlock()
	if c.kubectlBin == "" {
		bin, err := KubectlPath(ctx)
		if err != nil {
			return "", err
		}
		c.kubectlBin = bin
	}
	return c.kubectlBin, nil
}

// Kubectl runs kubectl with the admin kubeconfig; HOME and TMPDIR point
// inside the data directory.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return c.KubectlEnv(ctx, nil, args...)
}

// KubectlEnv is Kubectl with extra environment variables (e.g. EDITOR=..., a PATH with a
// plugin on it). A --kubeconfig in args overrides the admin one. kubectl's folder leads the
// PATH, so a plugin or completion script that runs `kubectl` runs this one.
func (c *Cluster) KubectlEnv(ctx context.Context, env []string, args ...string) (stdout, stderr string, err error) {
	bin, err := c.kubectl(ctx)
	if err != nil {
		return "", "", err
	}
	home := filepath.Join(c.dataDir, "kubectl-home")
	tmp := filepath.Join(c.dataDir, "kubectl-tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", "", err
		}
	}
	full := args
	hasKubeconfig := false
	for _, a := range args {
		if a == "--kubeconfig" || strings.HasPrefix(a, "--kubeconfig=") {
			hasKubeconfig = true
		}
	}
	if !hasKubeconfig {
		full = append([]string{"--kubeconfig=" + c.kubeconfig}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, full...)
	var base []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "HOME", "TMPDIR", "KUBECONFIG", "KUBECTL_EXTERNAL_DIFF", "KUBE_EDITOR", "EDITOR":
			continue
		}
		base = append(base, e)
	}
	cmd.Env = withPathFirst(append(append(base, "HOME="+home, "TMPDIR="+tmp), env...), filepath.Dir(bin))
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(se.String()))
	}
	return so.String(), se.String(), err
}

// ForgetDiscovery drops the discovery the cluster's kubectl keeps on disk (under its HOME): a
// test that changed which versions a CRD serves calls it once they are back, so no later
// kubectl picks a version no longer served from what it remembered (kubectl resets its cache on
// a kind it does not know, not on a version gone: it asks for it and gets a 404).
func (c *Cluster) ForgetDiscovery() error {
	return os.RemoveAll(filepath.Join(c.dataDir, "kubectl-home", ".kube", "cache"))
}

// withPathFirst is env with dir first on its PATH: the last PATH= entry, the one exec uses.
func withPathFirst(env []string, dir string) []string {
	out := append([]string(nil), env...)
	for i := len(out) - 1; i >= 0; i-- {
		if p, ok := strings.CutPrefix(out[i], "PATH="); ok {
			out[i] = "PATH=" + dir + string(os.PathListSeparator) + p
			return out
		}
	}
	return append(out, "PATH="+dir)
}

// KubectlSkew says why kubectl at version client is outside Kubernetes' version-skew policy
// against an API server at version server: kubectl is supported within one minor version of
// it, older or newer. nil when it is within.
func KubectlSkew(client, server string) error {
	sv, err := version.ParseGeneric(server)
	if err != nil {
		return fmt.Errorf("the control plane's version %q: %w", server, err)
	}
	cv, err := version.ParseGeneric(client)
	if err == nil && cv.Major() == sv.Major() && cv.Minor()+1 >= sv.Minor() && sv.Minor()+1 >= cv.Minor() {
		return nil
	}
	return fmt.Errorf("kubectl %s against the control plane's %s: outside Kubernetes' version-skew policy (kubectl within one minor of the API server); run test/kubectl/build.sh and set %s=test/kubectl/bin/kubectl (it builds kubectl at the control plane's version)",
		client, server, KubectlBinEnv)
}
