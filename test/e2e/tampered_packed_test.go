package e2e

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestRestoresTamperedHPAAndNetworkPolicy: hand edits of the HPA's bounds and metric and of
// the model's NetworkPolicy (opened to every peer) come back. Their caches keep each object as
// its differences from the informer's dictionary (informers/delta.go, made of the first one
// cached, another model's on this cluster): an edit must read as edited there.
// TestRestoresTamperedChildren does the same for the Deployment and the Service.
func TestRestoresTamperedHPAAndNetworkPolicy(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, fiveLines)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/qwen3", testenv.Timeout(time.Minute))
	ctx := testenv.Ctx(t, 2*time.Minute)
	hpa, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "qwen3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	np, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "qwen3", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.Kubectl(t, "patch", "-n", ns, "hpa/qwen3", "--type=merge", "-p", `{"spec":{"maxReplicas":42}}`)
	env.Kubectl(t, "patch", "-n", ns, "hpa/qwen3", "--type=json", "-p",
		`[{"op":"replace","path":"/spec/metrics/0/pods/target/averageValue","value":"500"}]`)
	env.Kubectl(t, "patch", "-n", ns, "networkpolicy/qwen3", "--type=merge", "-p", `{"spec":{"ingress":[{}]}}`)
	testenv.Eventually(t, time.Minute, "the HPA and the NetworkPolicy restored", func() error {
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if h.Spec.MaxReplicas != hpa.Spec.MaxReplicas || !equality.Semantic.DeepEqual(h.Spec.Metrics, hpa.Spec.Metrics) {
			return fmt.Errorf("HPA maxReplicas %d (want %d), metrics %+v", h.Spec.MaxReplicas, hpa.Spec.MaxReplicas, h.Spec.Metrics)
		}
		p, err := env.Kube.NetworkingV1().NetworkPolicies(ns).Get(ctx, "qwen3", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !equality.Semantic.DeepEqual(p.Spec, np.Spec) {
			return fmt.Errorf("NetworkPolicy ingress %+v, want %+v", p.Spec.Ingress, np.Spec.Ingress)
		}
		return nil
	})
	env.WaitPhase(t, ns, "qwen3", crd.PhaseReady, 60*time.Second)
	// Restored once, then quiet.
	writesSettle(t)
}
