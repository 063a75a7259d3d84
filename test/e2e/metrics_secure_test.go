package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// metricsToken creates the ServiceAccount sa in ns and returns a token of it; with reader, sa
// is bound to the metrics reader ClusterRole every install ships, as a scraper must be.
func metricsToken(t *testing.T, ns, sa string, reader bool) string {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	if reader {
		role := filepath.Join(env.Root, "manifests", "operator", "metrics_reader_role.yaml")
		env.Kubectl(t, "apply", "-f", role)
		binding := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + sa + "-metrics-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "inferenceservice-operator-metrics-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
		}
		if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		})
	}
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := env.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// TestMetricsSecure runs a second operator, scoped to an empty namespace so it reconciles
// nothing, with --metrics-secure (as manifests/ installs it) and the manifests' RBAC: /metrics
// is HTTPS and answers only tokens the API server authenticates and authorizes for GET /metrics.
func TestMetricsSecure(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testenv.Ctx(t, 3*time.Minute)
	op, err := operator.Start(ctx, env.Bin, filepath.Join(env.Dir, "operator-secure.log"),
		"--kubeconfig="+env.SAKubeconfig, "--namespaces="+ns, "--metrics-secure", "-v=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := op.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
	})
	if err := op.WaitReady(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}

	// A reader bound to the install's metrics reader ClusterRole, and a ServiceAccount without it.
	reader, nobody := metricsToken(t, ns, "reader", true), metricsToken(t, ns, "nobody", false)

	// The certificate is self-signed: the test, like Prometheus with insecure_skip_verify, does
	// not verify it.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}}
	get := func(tok string) (int, string, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+op.MetricsAddr+"/metrics", nil)
		if err != nil {
			return 0, "", err
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"invalid token", "not-a-token", http.StatusUnauthorized},
		{"ServiceAccount without the reader role", nobody, http.StatusForbidden},
	} {
		code, body, err := get(tc.token)
		if err != nil || code != tc.want {
			t.Fatalf("%s: status %d (%v), want %d: %s", tc.name, code, err, tc.want, body)
		}
		t.Logf("%s: %d %s", tc.name, code, strings.TrimSpace(body))
	}
	testenv.Eventually(t, 30*time.Second, "the reader scrapes", func() error {
		code, body, err := get(reader)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(body, "inferenceservice_operator_build_info") {
			return fmt.Errorf("status %d: %.200s", code, body)
		}
		return nil
	})
	t.Log("reader: 200 with the operator's metrics")

	// Plain HTTP gets nothing.
	if resp, err := http.Get("http://" + op.MetricsAddr + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP served /metrics")
		}
	}
}
