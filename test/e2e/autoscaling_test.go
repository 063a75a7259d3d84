package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/test/operator"
	"github.com/example/inferenceservice-operator/test/testenv"
)

// The condition and event reason are spelled out: the test is run against the code before
// they existed, where it must fail.
const (
	conditionAutoscaling   = "AutoscalingActive"
	eventAutoscalingBlind  = "AutoscalingInactive"
	autoscalingTwoReplicas = `apiVersion: ai.example.com/v1alpha1
kind: InferenceService
metadata: {name: blind}
spec: {model: Qwen/Qwen3-0.6B, replicas: 2, gpusPerReplica: 1}
`
)

// TestAutoscalerBlindShown: the local cluster serves no custom metrics API, so the real HPA
// controller reports ScalingActive False (FailedGetPodsMetric). The model serves (Ready), its
// AutoscalingActive condition says False with the HPA's reason and message within 30 s of the
// HPA reporting it, kubectl describe shows it, one Warning Event goes out, and the status is
// not written again at rest.
func TestAutoscalerBlindShown(t *testing.T) {
	ns := env.Namespace(t)
	applyYAML(t, ns, autoscalingTwoReplicas)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/blind", testenv.Timeout(time.Minute))

	var hpaSays *autoscalingv2.HorizontalPodAutoscalerCondition
	testenv.Eventually(t, time.Minute, "the HPA to report ScalingActive", func() error {
		h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "blind", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i, c := range h.Status.Conditions {
			if c.Type == autoscalingv2.ScalingActive && c.Status != corev1.ConditionUnknown {
				hpaSays = &h.Status.Conditions[i]
				return nil
			}
		}
		return fmt.Errorf("HPA conditions %+v", h.Status.Conditions)
	})
	if hpaSays.Status != corev1.ConditionFalse {
		t.Fatalf("the HPA reads its metric on a cluster without a metrics API: %+v", hpaSays)
	}
	t.Logf("HPA: ScalingActive %s %s: %s", hpaSays.Status, hpaSays.Reason, hpaSays.Message)

	var isvc *crd.InferenceService
	testenv.Eventually(t, 30*time.Second, "AutoscalingActive False with the HPA's reason", func() error {
		var err error
		if isvc, err = env.ISVC(ns, "blind"); err != nil {
			return err
		}
		c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != hpaSays.Reason {
			return fmt.Errorf("conditions %+v", isvc.Status.Conditions)
		}
		return nil
	})
	c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
	if !strings.Contains(c.Message, "num_requests_waiting") || isvc.Status.Phase != crd.PhaseReady || isvc.Status.Reason != "" {
		t.Fatalf("status %+v", isvc.Status)
	}
	var describe string
	testenv.Eventually(t, 30*time.Second, "kubectl describe to show the blind autoscaler and its Event", func() error {
		describe = env.Kubectl(t, "describe", "isvc", "-n", ns, "blind")
		if !strings.Contains(describe, conditionAutoscaling) || !strings.Contains(describe, hpaSays.Reason) || !strings.Contains(describe, eventAutoscalingBlind) {
			return fmt.Errorf("kubectl describe:\n%s", describe)
		}
		return nil
	})
	t.Logf("kubectl describe isvc:\n%s", describe)
	t.Logf("isvc: %s %s %s: %s", conditionAutoscaling, c.Status, c.Reason, c.Message)

	// At rest: no status write over three resync periods and three reconciles, and still one
	// Warning Event (no series).
	w, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=blind", ResourceVersion: isvc.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	reconcilesBefore := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
	hold := time.Now().Add(3 * env.resync)
	writes := 0
	testenv.Eventually(t, time.Minute, "three resync periods and reconciles", func() error {
		for drained := false; !drained; {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Modified {
					writes++
				}
			default:
				drained = true
			}
		}
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		if n := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil) - reconcilesBefore; n < 3 || time.Now().Before(hold) {
			return fmt.Errorf("%v reconciles so far", n)
		}
		return nil
	})
	if writes != 0 {
		t.Fatalf("%d status writes at rest over %s", writes, 3*env.resync)
	}
	if n, count := warningEvents(t, ns, eventAutoscalingBlind); n != 1 || count != 1 {
		t.Fatalf("%d %s Warning Events (series count %d), want 1", n, eventAutoscalingBlind, count)
	}
	t.Logf("at rest: 0 status writes over %s, one %s Warning Event", 3*env.resync, eventAutoscalingBlind)
}
