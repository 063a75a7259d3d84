package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// TestRaiseServesBeforeTheHPADecides: the seed's step 3 with a live HPA (the metrics adapter
// serving an empty queue). kubectl patch replicas 3 -> 6 starts three pods; the HPA, reading
// 0 waiting, used to cut the Deployment back to 3 within a sync or two while the new pods
// still loaded, so the walk ended Ready 3. The raise is held as the HPA's minimum: six pods
// serve, the Deployment keeps 6 through three HPA syncs after they are ready, and the isvc
// says until when the operator holds it.
func TestRaiseServesBeforeTheHPADecides(t *testing.T) {
	ns := env.Namespace(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	applyYAML(t, ns, "apiVersion: ai.example.com/v1alpha1\nkind: InferenceService\nmetadata: {name: raise}\nspec: {model: Qwen/Qwen3-0.6B, replicas: 3, gpusPerReplica: 1}\n")
	autoscalingSays := func() (*crd.InferenceService, *metav1.Condition, error) {
		i, err := env.ISVC(ns, "raise")
		if err != nil {
			return nil, nil, err
		}
		return i, meta.FindStatusCondition(i.Status.Conditions, conditionAutoscaling), nil
	}
	testenv.Eventually(t, 2*time.Minute, "Ready 3 with the HPA reading the queue", func() error {
		i, c, err := autoscalingSays()
		if err != nil {
			return err
		}
		if i.Status.ReadyReplicas != 3 || c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("ready %d, AutoscalingActive %+v", i.Status.ReadyReplicas, c)
		}
		return nil
	})

	raised := time.Now()
	// Named with its version: a test before this one may have served v1beta1 (useWebhookCRD), and
	// kubectl's cached discovery would still prefer it.
	env.Kubectl(t, "patch", "-n", ns, "inferenceservices.v1alpha1.ai.example.com/raise", "--type=merge", "-p", `{"spec":{"replicas":6}}`)
	var served time.Time
	testenv.Eventually(t, 2*time.Minute, "6 pods ready", func() error {
		d, err := deployment(t, ns, "raise")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 6 || d.Status.ReadyReplicas != 6 {
			return fmt.Errorf("Deployment replicas %d, %d ready (%.0fs after the raise)", *d.Spec.Replicas, d.Status.ReadyReplicas, time.Since(raised).Seconds())
		}
		served = time.Now()
		return nil
	})
	t.Logf("6 pods ready %.1fs after the raise", served.Sub(raised).Seconds())
	// Three HPA sync periods (5 s in the local cluster) with the queue empty: the count stays.
	keep := served.Add(3 * 5 * time.Second)
	testenv.Eventually(t, time.Minute, "the raise kept through three HPA syncs", func() error {
		d, err := deployment(t, ns, "raise")
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != 6 {
			t.Fatalf("the HPA cut the raise to %d, %.0fs after the pods were ready", *d.Spec.Replicas, time.Since(served).Seconds())
		}
		if time.Now().Before(keep) {
			return fmt.Errorf("watching")
		}
		return nil
	})
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "raise", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	i, c, err := autoscalingSays()
	if err != nil {
		t.Fatal(err)
	}
	if *h.Spec.MinReplicas != 6 || i.Status.ReadyReplicas != 6 || c == nil || !strings.Contains(c.Message, "holding the HPA's minimum at 6") {
		t.Fatalf("HPA minimum %d, ready %d, AutoscalingActive %+v", *h.Spec.MinReplicas, i.Status.ReadyReplicas, c)
	}
	t.Logf("AutoscalingActive %s: %s", c.Status, c.Message)
}
