package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// noDependents fails unless none of the isvc's dependents (Service, HPA, PDB) exists.
func noDependents(ns, name string) error {
	ctx := context.Background()
	if _, err := env.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); !isNotFound(err) {
		return fmt.Errorf("a Service selecting the foreign Deployment's pods exists (%v)", err)
	}
	if h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, name, metav1.GetOptions{}); !isNotFound(err) {
		target := ""
		if err == nil {
			target = h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
		}
		return fmt.Errorf("an HPA aimed at %s exists (%v)", target, err)
	}
	if _, err := env.Kube.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{}); !isNotFound(err) {
		return fmt.Errorf("a PodDisruptionBudget selecting the foreign Deployment's pods exists (%v)", err)
	}
	return nil
}

// createForeignDeployment creates a Deployment no InferenceService owns, without the operator's
// labels (so outside its caches), whose pods are "app: mine".
func createForeignDeployment(t *testing.T, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mine"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mine"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}
	created, err := env.Kube.AppsV1().Deployments(ns).Create(context.Background(), d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// TestForeignDeploymentIsNeverScaled: a same-named Deployment outside the HPA's bounds and
// outside the label-scoped cache. Nothing the operator creates may act on it: no HPA (which
// would scale it into its bounds), no Service or PDB (which would select its pods).
func TestForeignDeploymentIsNeverScaled(t *testing.T) {
	ns := env.Namespace(t)
	createForeignDeployment(t, ns, "foreign", 20)
	applyYAML(t, ns, "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: foreign}\nspec: {model: Qwen/Qwen3-0.6B, replicas: 4}\n")
	i := env.WaitPhase(t, ns, "foreign", crd.PhaseFailed, time.Minute)
	if i.Status.Reason != "ChildConflict" {
		t.Fatalf("reason %q", i.Status.Reason)
	}
	// The failure is written after the reconcile's writes: anything it created exists now.
	if err := noDependents(ns, "foreign"); err != nil {
		t.Fatal(err)
	}
	// And later reconciles (retries, resyncs) create nothing either.
	writesSettle(t)
	if err := noDependents(ns, "foreign"); err != nil {
		t.Fatal(err)
	}
	d, err := deployment(t, ns, "foreign")
	if err != nil || *d.Spec.Replicas != 20 {
		t.Fatalf("the foreign Deployment was scaled: %v %v", d.Spec.Replicas, err)
	}
}

// TestRelabelledChildIsRecovered: a Deployment the isvc controls, relabelled (as a Helm
// adoption or a careless kubectl label would) and scaled to zero in the same write, drops out
// of the label-scoped cache. Ownership is the controller reference: the operator restores
// the label and the replicas, and the status follows the Deployment instead of staying Ready.
func TestRelabelledChildIsRecovered(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: qwen3}\nspec: {model: Qwen/Qwen3-0.6B, replicas: 2}\n")
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	env.Kubectl(t, "patch", "-n", ns, "deploy/qwen3", "--type=merge", "-p",
		`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"}},"spec":{"replicas":0}}`)
	testenv.Eventually(t, time.Minute, "label and replicas restored, Ready again", func() error {
		d, err := deployment(t, ns, "qwen3")
		if err != nil {
			return err
		}
		if by := d.Labels["app.kubernetes.io/managed-by"]; by != "inferenceservice-operator" || *d.Spec.Replicas != 2 {
			return fmt.Errorf("managed-by %q, replicas %d", by, *d.Spec.Replicas)
		}
		i, err := env.ISVC(ns, "qwen3")
		if err != nil {
			return err
		}
		if i.Status.Phase != crd.PhaseReady || i.Status.ReadyReplicas != d.Status.ReadyReplicas || d.Status.ReadyReplicas != 2 {
			return fmt.Errorf("isvc %s/%d, deployment ready %d", i.Status.Phase, i.Status.ReadyReplicas, d.Status.ReadyReplicas)
		}
		return nil
	})
	// No loop left behind: the writes stop.
	writesSettle(t)
}

// TestRecreatedWithTheSameName: an isvc deleted and created again while its predecessor's
// Deployment is still being deleted (held here by a finalizer) waits for it without reporting
// a conflict, and converges as soon as it is gone.
func TestRecreatedWithTheSameName(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	const manifest = "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: qwen3}\nspec: {model: Qwen/Qwen3-0.6B, replicas: 1}\n"
	applyYAML(t, ns, manifest)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	old, err := env.ISVC(ns, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "patch", "-n", ns, "deploy/qwen3", "--type=merge", "-p", `{"metadata":{"finalizers":["e2e.example.com/hold"]}}`)
	release := func() {
		_, _ = kubectlErr(t, nil, "patch", "-n", ns, "deploy/qwen3", "--type=json", "-p", `[{"op":"remove","path":"/metadata/finalizers"}]`)
	}
	t.Cleanup(release)
	env.Kubectl(t, "delete", "-n", ns, "isvc/qwen3", testenv.Timeout(time.Minute))
	statuses := watchStatuses(t, ns)
	applyYAML(t, ns, manifest)
	i := env.WaitPhase(t, ns, "qwen3", crd.PhaseProgressing, time.Minute)
	testenv.Eventually(t, time.Minute, "waiting for the predecessor's Deployment", func() error {
		i, err = env.ISVC(ns, "qwen3")
		if err != nil {
			return err
		}
		if i.Status.Reason != "ReplacingPrevious" {
			return fmt.Errorf("status %s/%s", i.Status.Phase, i.Status.Reason)
		}
		return nil
	})
	if i.UID == old.UID {
		t.Fatal("not a new object")
	}
	// The operator reports the predecessor's Deployment as soon as it sees it owned by a UID that
	// is gone; the garbage collector marks it deleted on its own clock, a moment later under load
	// (seen in a cold CI run: not yet marked when the status said ReplacingPrevious).
	testenv.Eventually(t, time.Minute, "the predecessor's Deployment terminating", func() error {
		d, err := deployment(t, ns, "qwen3")
		switch {
		case err != nil:
			return err
		case metav1.GetControllerOf(d) == nil || metav1.GetControllerOf(d).UID != old.UID:
			return fmt.Errorf("the Deployment is not the predecessor's: %v", metav1.GetControllerOf(d))
		case d.DeletionTimestamp == nil:
			return fmt.Errorf("the predecessor's Deployment is not marked deleted yet")
		}
		return nil
	})
	release()
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	d, err := deployment(t, ns, "qwen3")
	if err != nil || metav1.GetControllerOf(d).UID != i.UID {
		t.Fatalf("the Deployment is not the new isvc's: %v", err)
	}
	statuses.mu.Lock()
	defer statuses.mu.Unlock()
	if slices.ContainsFunc(statuses.reasons, func(r string) bool { return strings.HasPrefix(r, "Failed/") }) {
		t.Fatalf("a recreated isvc reported a failure while its predecessor's children went: %v", statuses.reasons)
	}
}

// TestNamespaceDeletedWhileGatewayIsDown: the finalizer cannot hold a namespace forever. When
// deregistration fails and the namespace is being deleted, the finalizer is released and the
// route counted as possibly left behind.
func TestNamespaceDeletedWhileGatewayIsDown(t *testing.T) {
	quiesce(t) // earlier tests' isvcs going with their namespaces would be abandoned too
	ns := env.CreateNamespace(t, "gateway-down-ns")
	applyYAML(t, ns, fiveLines)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	key := ns + "/qwen3"
	testenv.Eventually(t, time.Minute, "route registered", func() error {
		if !env.gateway.registered(key) {
			return fmt.Errorf("not registered")
		}
		return nil
	})
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	abandoned := operator.SumCounter(fams, "inferenceservice_operator_gateway_routes_abandoned_total", nil)

	env.gateway.setDown(true)
	t.Cleanup(func() { env.gateway.setDown(false) })
	env.Kubectl(t, "delete", "namespace", ns, "--wait=false")
	testenv.Eventually(t, 2*time.Minute, "the namespace deleted", func() error {
		n, err := env.Kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s: %v", n.Status.Phase, n.Status.Conditions)
	})
	fams, err = env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	if got := operator.SumCounter(fams, "inferenceservice_operator_gateway_routes_abandoned_total", nil); got != abandoned+1 {
		t.Fatalf("routes abandoned: %v, want %v", got, abandoned+1)
	}
	if env.gateway.count("DELETE "+key) != 0 || !env.gateway.registered(key) {
		t.Fatal("the gateway was down: the route cannot have been deregistered")
	}
}
