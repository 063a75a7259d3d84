package chart

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestHelmTestCredentials: what the chart's `helm test` Pod presents is what the installed
// operator's secure /metrics accepts. Its ServiceAccount and binding, applied from the chart's
// hook, get a token the operator's TokenReview and SubjectAccessReview pass, and the operator
// binary's check mode, run with the hook's own arguments but for the address (the local cluster
// has no Service data plane: a ClusterIP leads nowhere, so the operator run as its pod is dialled
// on loopback), passes; the same check with a token of a ServiceAccount without the binding, or
// a wrong path, fails with the line saying why.
func TestHelmTestCredentials(t *testing.T) {
	bin, err := Bin(testenv.Ctx(t, 15*time.Minute), env.Root)
	if err != nil {
		t.Fatal(err)
	}
	h := Helm{Bin: bin, Home: t.TempDir(), Kubeconfig: env.Cluster.KubeconfigPath()}
	releaseNamespace(t, systemNamespace)
	helmCmd(t, h, "install", release, Dir, "-n", systemNamespace, "--wait", "--timeout", testenv.Scaled(3*time.Minute).String())
	ctx := testenv.Ctx(t, 5*time.Minute)
	t.Cleanup(func() {
		_, _, _ = h.Run(context.Background(), env.Root, "uninstall", release, "-n", systemNamespace, "--wait")
		deleteNamespace(t, systemNamespace)
	})

	// The hook's ServiceAccount and binding, as `helm test` creates them before its Pod.
	hook := helmCmd(t, h, "template", release, Dir, "-n", systemNamespace, "--show-only", "templates/tests/test-connection.yaml")
	var docs, args []string
	for _, doc := range strings.Split(hook, "\n---") {
		switch {
		case strings.Contains(doc, "\nkind: ServiceAccount"), strings.Contains(doc, "\nkind: ClusterRoleBinding"):
			docs = append(docs, doc)
		case strings.Contains(doc, "\nkind: Pod"):
			for _, l := range strings.Split(doc, "\n") {
				if a, ok := strings.CutPrefix(strings.TrimSpace(l), "- --"); ok {
					args = append(args, "--"+a)
				}
			}
		}
	}
	if len(docs) != 2 {
		t.Fatalf("hook: %d ServiceAccount and ClusterRoleBinding documents, want 2:\n%s", len(docs), hook)
	}
	f := filepath.Join(t.TempDir(), "hook-rbac.yaml")
	if err := os.WriteFile(f, []byte(strings.Join(docs, "\n---")), 0o600); err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "apply", "-f", f)
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), "inferenceservice-operator-test", metav1.DeleteOptions{})
	})
	const metricsURL = "https://inferenceservice-operator-metrics." + systemNamespace + ".svc:8443/metrics"
	if want := "--insecure-url=" + metricsURL; !strings.Contains(strings.Join(args, " "), want) {
		t.Fatalf("hook args %v: no %s", args, want)
	}

	p := runOperator(t, "operator-helm-test")
	local := "https://" + p.MetricsAddr + "/metrics"
	token := func(sa string) string {
		tr, err := env.Kube.CoreV1().ServiceAccounts(systemNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), sa+".token")
		if err := os.WriteFile(f, []byte(tr.Status.Token), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	check := func(args ...string) (int, string) {
		cmd := exec.CommandContext(ctx, env.Bin, append([]string{"check", "--timeout=20s"}, args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		t.Logf("$ inferenceservice-operator check %s\n%s", strings.Join(args, " "), out.String())
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}

	hookToken := token("inferenceservice-operator-test")
	// The authorizer caches decisions for a minute: the binding exists before the first ask.
	if code, out := check("--bearer-token-file="+hookToken, "--insecure-url="+local); code != 0 || !strings.Contains(out, "ok   "+local+": 200 OK") {
		t.Errorf("the hook's token: exit %d, want 0 with an ok line", code)
	}
	if code, out := check("--bearer-token-file="+token("default"), "--insecure-url="+local); code != 1 || !strings.Contains(out, "FAIL "+local+": 403 Forbidden") {
		t.Errorf("a token without the binding: exit %d, want 1 with 403", code)
	}
	wrong := strings.TrimSuffix(local, "/metrics") + "/healthz"
	if code, out := check("--bearer-token-file="+hookToken, "--insecure-url="+wrong); code != 1 || !strings.Contains(out, "FAIL "+wrong+": 404 Not Found") {
		t.Errorf("a wrong path: exit %d, want 1 with 404", code)
	}
	if err := p.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if code, out := check("--bearer-token-file="+hookToken, "--insecure-url="+local); code != 1 || !strings.Contains(out, "connection refused") {
		t.Errorf("the operator stopped: exit %d, want 1, refused", code)
	}
}
