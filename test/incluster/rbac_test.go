package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// manifestClusterRole reads the operator's ClusterRole from manifests/rbac.
func manifestClusterRole(t *testing.T) *rbacv1.ClusterRole {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Root, "manifests", "rbac", "cluster_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cr rbacv1.ClusterRole
	if err := yaml.UnmarshalStrict(b, &cr); err != nil {
		t.Fatal(err)
	}
	return &cr
}

// serviceAccountWithRole creates a ServiceAccount in ns bound to a copy of role named name,
// and returns a kubeconfig with its token. Everything is deleted when the test ends.
func serviceAccountWithRole(t *testing.T, ns, name string, role *rbacv1.ClusterRole) string {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	role = role.DeepCopy()
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	if _, err := env.Kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = env.Kube.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	kc, err := env.Cluster.ServiceAccountKubeconfig(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// TestForbiddenShowsInStatus: run the operator under the manifests' ClusterRole minus
// "create horizontalpodautoscalers". The denial is reported, not crashed on or hammered: the
// isvc says Forbidden naming the HPA, one Warning Event is recorded, retries back off, and the
// process keeps serving.
func TestForbiddenShowsInStatus(t *testing.T) {
	ns := env.Namespace(t)
	role := manifestClusterRole(t)
	removed := false
	for i, r := range role.Rules {
		if slices.Contains(r.Resources, "horizontalpodautoscalers") {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return v == "create" })
			removed = true
		}
	}
	if !removed {
		t.Fatal("the ClusterRole has no horizontalpodautoscalers rule")
	}
	kc := serviceAccountWithRole(t, ns, "isvc-operator-no-hpa-create", role)
	p := startOperator(t, env.Bin, "forbidden", "--kubeconfig="+kc, "--namespaces="+ns, "-v=2")

	createISVC(t, ns, "qwen3", 2)
	i := env.WaitPhase(t, ns, "qwen3", crd.PhaseFailed, 60*time.Second)
	if i.Status.Reason != "Forbidden" {
		t.Fatalf("status.reason %q, want Forbidden", i.Status.Reason)
	}
	var msg string
	for _, c := range i.Status.Conditions {
		if c.Type == "Ready" {
			msg = c.Message
		}
	}
	if !strings.Contains(msg, "horizontalpodautoscalers") || !strings.Contains(msg, "create") {
		t.Fatalf("Ready message %q does not name the denied HPA create", msg)
	}
	t.Logf("status: phase %s, reason %s, message %q", i.Status.Phase, i.Status.Reason, msg)
	// The rest of the isvc still got made.
	if _, err := env.Kube.AppsV1().Deployments(ns).Get(context.Background(), "qwen3", metav1.GetOptions{}); err != nil {
		t.Fatalf("deployment: %v", err)
	}

	testenv.Eventually(t, 30*time.Second, "a Warning Event on the isvc", func() error {
		out := env.Kubectl(t, "get", "events", "-n", ns, "--field-selector", "involvedObject.kind=InferenceService,involvedObject.name=qwen3,type=Warning", "-o", "custom-columns=REASON:.reason,NOTE:.note,MSG:.message", "--no-headers")
		if !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
			return fmt.Errorf("warning events: %q", out)
		}
		return nil
	})

	// Back off: over a 5s window the retries of this one object stay a handful, not thousands.
	retries := func() float64 {
		return counter(t, p, "workqueue_retries_total", func(l map[string]string) bool { return l["name"] == "inferenceservice" })
	}
	r0, start := retries(), time.Now()
	deadline := start.Add(5 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-p.Exited():
			t.Fatal("the operator exited on a Forbidden error")
		case <-time.After(500 * time.Millisecond): // sampling interval over a fixed window
		}
	}
	r1 := retries()
	t.Logf("workqueue_retries_total: %v -> %v over %s", r0, r1, time.Since(start).Round(time.Millisecond))
	if r1-r0 > 20 {
		t.Fatalf("%v retries in 5s: not backing off", r1-r0)
	}
	if w := counter(t, p, "inferenceservice_operator_api_errors_total", func(l map[string]string) bool { return l["reason"] == "Forbidden" }); w == 0 {
		t.Error("inferenceservice_operator_api_errors_total{reason=Forbidden} is 0")
	}
}
