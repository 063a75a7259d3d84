package incluster

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestRBACKEDAOverlayCalls runs the operator of the keda install (the base rules plus the
// overlay's keda_rbac.yaml) with --autoscaler=keda behind a recording proxy, KEDA's CRD
// served (the structural stand-in of test/e2e/testdata): the ScaledObjects are cached (list,
// watch), created, re-read and updated after a conflicting update of a hand-edited one, and
// deleted at zero replicas. Each of the overlay's rules must be used and every request
// granted; the base rules' uses are TestRBACExactlyWhatIsCalled's.
func TestRBACKEDAOverlayCalls(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	kedaCRD := filepath.Join(env.Root, "test", "e2e", "testdata", "keda_scaledobjects_crd.yaml")
	env.Kubectl(t, "apply", "-f", kedaCRD)
	t.Cleanup(func() {
		_, _, _ = env.Cluster.Kubectl(context.Background(), "delete", "--ignore-not-found", "--wait=false", "-f", kedaCRD)
	})
	env.Kubectl(t, "wait", "--for=condition=Established", "crd/scaledobjects.keda.sh", "--timeout=60s")

	base := readRules(t, "manifests", "rbac", "cluster_role.yaml")
	overlay := readRules(t, "manifests", "components", "keda", "keda_rbac.yaml")
	granted := append(slices.Clone(base), overlay...)
	kc := serviceAccountWithRole(t, ns, "isvc-rbac-keda", &rbacv1.ClusterRole{Rules: granted})
	wire := env.StartProxyFor(t, kc)
	errs := &answers{done: map[string]bool{}}
	wire.Answer(errs.answer)
	startOperator(t, env.Bin, "rbac-keda", "--kubeconfig="+wire.Kubeconfig, "--namespaces="+ns,
		"--autoscaler=keda", "--keda-prometheus-address=http://127.0.0.1:9090", "--backoff-max=2s", "-v=2")

	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GroupVersion.String(), "kind": crd.Kind,
		"metadata": map[string]any{"name": "m", "namespace": ns},
		"spec": map[string]any{"model": "m", "replicas": int64(2), "gpusPerReplica": int64(0),
			"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}}},
	}}
	if _, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	so := func(verb string) access { return access{group: "keda.sh", resource: "scaledobjects", verb: verb} }
	waitCalled(t, wire, "the ScaledObject listed and created", so("list"), so("create"))

	// A hand edit, whose restoring update is answered 409 once, as a concurrent writer would.
	errs.armConflicts(map[string]string{"scaledobjects": http.MethodPut})
	env.Kubectl(t, "-n", ns, "patch", "scaledobject", "m", "--type=merge", "-p", `{"spec":{"maxReplicaCount":99}}`)
	waitCalled(t, wire, "the ScaledObject re-read and updated after a conflict", so("get"), so("update"))
	errs.armConflicts(nil)

	// Scaled to zero: no autoscaler.
	env.Kubectl(t, "-n", ns, "patch", "isvc", "m", "--type=merge", "-p", `{"spec":{"replicas":0}}`)
	waitCalled(t, wire, "the ScaledObject deleted", so("delete"))
	checkExactRBAC(t, "manifests/overlays/keda", granted, overlay, wire.Requests())
}
