// Running kubectl against the cluster, its HOME and TMPDIR inside the data directory.

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultKubectl is kubectl 1.33 on the project's machines; env KUBECTL overrides it.
const DefaultKubectl = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33"

// KubectlPath is env KUBECTL, else kubectl 1.33 at DefaultKubectl, else
// kubectl from PATH.
func KubectlPath() string {
	if k := os.Getenv("KUBECTL"); k != "" {
		return k
	}
	if exists(DefaultKubectl) {
		return DefaultKubectl
	}
	if p, err := exec.LookPath("kubectl"); err == nil {
		return p
	}
	return DefaultKubectl
}

// Kubectl runs kubectl with the admin kubeconfig; HOME and TMPDIR point
// inside the data directory.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return c.KubectlEnv(ctx, nil, args...)
}

// KubectlEnv is Kubectl with extra environment variables (e.g. EDITOR=...).
// A --kubeconfig in args overrides the admin one.
func (c *Cluster) KubectlEnv(ctx context.Context, env []string, args ...string) (stdout, stderr string, err error) {
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
	cmd := exec.CommandContext(ctx, KubectlPath(), full...)
	var base []string
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "HOME", "TMPDIR", "KUBECONFIG", "KUBECTL_EXTERNAL_DIFF", "KUBE_EDITOR", "EDITOR":
			continue
		}
		base = append(base, e)
	}
	cmd.Env = append(append(base, "HOME="+home, "TMPDIR="+tmp), env...)
	var so, se strings.Builder
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(se.String()))
	}
	return so.String(), se.String(), err
}
