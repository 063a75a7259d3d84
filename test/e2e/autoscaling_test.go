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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// TestAutoscalerBlindShown: the operator's metrics adapter serves num_requests_waiting, so the
// real HPA controller reads it and the isvc says AutoscalingActive True. The adapter is then
// killed (its backend gone, as on a node loss): once the HPA's next sync fails (25 s measured),
// the isvc's AutoscalingActive is False with the HPA's reason and message while the model keeps serving (Ready), kubectl
// describe shows it, one Warning Event goes out; the adapter restarted, True again. Over the
// outage the isvc is written exactly twice (False, then True) and at rest not at all.
func TestAutoscalerBlindShown(t *testing.T) {
	ns := env.Namespace(t)
	adapter := startMetricsAdapter(t)
	adapter.waitAvailable(t)
	applyYAML(t, ns, autoscalingTwoReplicas)
	env.Kubectl(t, "wait", "-n", ns, "--for=condition=Ready", "isvc/blind", testenv.Timeout(time.Minute))
	waitAutoscaling := func(what string, timeout time.Duration, status metav1.ConditionStatus, reason string) *crd.InferenceService {
		t.Helper()
		var isvc *crd.InferenceService
		testenv.Eventually(t, timeout, what, func() error {
			var err error
			if isvc, err = env.ISVC(ns, "blind"); err != nil {
				return err
			}
			c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
			if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
				return fmt.Errorf("conditions %+v", isvc.Status.Conditions)
			}
			return nil
		})
		return isvc
	}
	isvc := waitAutoscaling("AutoscalingActive True: the HPA reads the adapter's metric", 90*time.Second, metav1.ConditionTrue, "ValidMetricFound")
	t.Logf("served: %s\n%s", meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling).Message, env.Kubectl(t, "get", "hpa", "-n", ns, "blind"))

	w, err := env.Dyn.Resource(crd.Resource).Namespace(ns).Watch(context.Background(), metav1.ListOptions{
		FieldSelector: "metadata.name=blind", ResourceVersion: isvc.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// modified counts the isvc's writes seen so far, reading until the watch has been quiet
	// for a second (its events arrive one by one, not all at once).
	var seen []string
	modified := func() int {
		for {
			select {
			case ev := <-w.ResultChan():
				if ev.Type == watch.Modified {
					what := "?"
					if u, ok := ev.Object.(*unstructured.Unstructured); ok {
						conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
						what = fmt.Sprint(conds)
					}
					seen = append(seen, time.Now().Format("15:04:05.000")+" "+what)
				}
			case <-time.After(time.Second):
				return len(seen)
			}
		}
	}
	writesBefore, err := env.op.Writes()
	if err != nil {
		t.Fatal(err)
	}

	adapter.Kill()
	killed := time.Now()
	t.Logf("%s adapter killed", killed.Format("15:04:05.000"))
	// The HPA notices at its next sync (15s) once the aggregator marks the APIService
	// unavailable; the measured time is logged, the deadline only bounds the test.
	isvc = waitAutoscaling("AutoscalingActive False once the metric's backend is gone", time.Minute, metav1.ConditionFalse, "")
	c := meta.FindStatusCondition(isvc.Status.Conditions, conditionAutoscaling)
	blindAfter := time.Since(killed)
	h, err := env.Kube.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "blind", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hpaSays *autoscalingv2.HorizontalPodAutoscalerCondition
	for i, hc := range h.Status.Conditions {
		if hc.Type == autoscalingv2.ScalingActive {
			hpaSays = &h.Status.Conditions[i]
		}
	}
	if hpaSays == nil || hpaSays.Status != corev1.ConditionFalse || hpaSays.Reason != c.Reason {
		t.Fatalf("isvc says %s %s, the HPA says %+v", c.Status, c.Reason, hpaSays)
	}
	t.Logf("HPA: ScalingActive %s %s: %s", hpaSays.Status, hpaSays.Reason, hpaSays.Message)
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

	if n, count := warningEvents(t, ns, eventAutoscalingBlind); n != 1 || count != 1 {
		t.Fatalf("%d %s Warning Events (series count %d), want 1", n, eventAutoscalingBlind, count)
	}

	adapter.start(t)
	restarted := time.Now()
	t.Logf("%s adapter restarted", restarted.Format("15:04:05.000"))
	isvc = waitAutoscaling("AutoscalingActive True again once the adapter is back", time.Minute, metav1.ConditionTrue, "ValidMetricFound")
	t.Logf("timeline: adapter killed; isvc False %s later; adapter restarted; isvc True %s later", blindAfter.Round(time.Second), time.Since(restarted).Round(time.Second))
	// Settle: three resync periods and reconciles with nothing to say.
	fams, err := env.op.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	reconcilesBefore := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil)
	hold := time.Now().Add(3 * env.resync)
	testenv.Eventually(t, time.Minute, "three resync periods and reconciles", func() error {
		fams, err := env.op.Scrape()
		if err != nil {
			return err
		}
		if n := operator.SumCounter(fams, "controller_runtime_reconcile_total", nil) - reconcilesBefore; n < 3 || time.Now().Before(hold) {
			return fmt.Errorf("%v reconciles so far", n)
		}
		return nil
	})
	writesAfter, err := env.op.Writes()
	if err != nil {
		t.Fatal(err)
	}
	if n := modified(); n != 2 {
		t.Fatalf("the isvc was written %d times over the outage and after, want 2 (False, then True); its conditions at each write:\n%s", n, strings.Join(seen, "\n"))
	}
	t.Logf("over the outage: 2 isvc status writes, %v operator writes in all (the Warning Event included)", writesAfter-writesBefore)
}
