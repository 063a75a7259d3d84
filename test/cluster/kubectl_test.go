// The kubectl the tests run: within Kubernetes' version-skew policy of the control plane.

package cluster_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apimachineryversion "k8s.io/apimachinery/pkg/version"

	"github.com/example/inferenceservice-operator/test/cluster"
)

// TestKubectlWithinOneMinorOfServer: kubectl is supported within one minor version of the API
// server (kubernetes.io/releases/version-skew-policy); a kubectl further off runs, with a
// warning, and may send or read what this server does not (a test then proves nothing of
// what a user's kubectl does). The server's version is read through discovery, kubectl's
// from `kubectl version -o json`, whose server version must be the same cluster's.
func TestKubectlWithinOneMinorOfServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := cluster.KubectlPath(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := c.Clientset()
	if err != nil {
		t.Fatal(err)
	}
	server, err := kube.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	out, _, err := c.Kubectl(ctx, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		ClientVersion, ServerVersion apimachineryversion.Info
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	if v.ServerVersion.GitVersion != server.GitVersion {
		t.Fatalf("kubectl version reports the server %s, discovery %s: not the same cluster", v.ServerVersion.GitVersion, server.GitVersion)
	}
	if err := cluster.KubectlSkew(v.ClientVersion.GitVersion, server.GitVersion); err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	t.Logf("kubectl %s (%s), control plane %s", v.ClientVersion.GitVersion, bin, server.GitVersion)
}

func TestKubectlSkew(t *testing.T) {
	for _, tc := range []struct {
		client, server string
		ok             bool
	}{
		{"v1.37.2", "v1.37.2", true},
		{"v1.36.0", "v1.37.2", true},
		{"v1.38.1", "v1.37.2", true},
		{"v1.37.0-alpha.1", "v1.37.2", true},
		{"v1.33.1", "v1.37.2", false},
		{"v1.35.9", "v1.37.2", false},
		{"v1.39.0", "v1.37.2", false},
		{"v2.37.0", "v1.37.2", false},
		{"v0.0.0-master+$Format:%H$", "v1.37.2", false},
		{"", "v1.37.2", false},
	} {
		err := cluster.KubectlSkew(tc.client, tc.server)
		if (err == nil) != tc.ok {
			t.Errorf("KubectlSkew(%q, %q) = %v, want ok %v", tc.client, tc.server, err, tc.ok)
		}
	}
	err := cluster.KubectlSkew("v1.33.1", "v1.37.2")
	for _, want := range []string{"v1.33.1", "v1.37.2", "test/kubectl/build.sh"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %v does not name %s", err, want)
		}
	}
}

// TestKubectlPathNamed: a KUBECTL_BIN that is not there is refused with the command that builds
// it, never replaced by another kubectl.
func TestKubectlPathNamed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "kubectl")
	t.Setenv(cluster.KubectlBinEnv, missing)
	if bin, err := cluster.KubectlPath(context.Background()); err == nil || !strings.Contains(err.Error(), "test/kubectl/build.sh") {
		t.Fatalf("KubectlPath with %s=%s: %q, %v; want a refusal that names test/kubectl/build.sh", cluster.KubectlBinEnv, missing, bin, err)
	}
}

// TestKubectlPluginRunsTheSameKubectl: a plugin kubectl finds on a PATH the test gives (as
// `kubectl isvc` is found), and which runs `kubectl` itself, runs the kubectl under test, not
// one of the machine's further down the PATH.
func TestKubectlPluginRunsTheSameKubectl(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin, err := cluster.KubectlPath(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plugin := "#!/bin/sh\nexec kubectl version --client -o json\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl-clientversion"), []byte(plugin), 0o755); err != nil {
		t.Fatal(err)
	}
	// The machine's own kubectl, if any, stays on the PATH after the plugin's folder.
	out, stderr, err := c.KubectlEnv(ctx, []string{"PATH=" + dir + string(os.PathListSeparator) + os.Getenv("PATH")},
		"clientversion", "--kubeconfig="+c.KubeconfigPath()) // kubectl refuses flags before a plugin's name
	if err != nil {
		t.Fatalf("kubectl clientversion: %v %s", err, stderr)
	}
	want, _, err := c.Kubectl(ctx, "version", "--client", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if out != want {
		t.Fatalf("the plugin's kubectl reports\n%s\nthe kubectl under test (%s)\n%s", out, bin, want)
	}
}
