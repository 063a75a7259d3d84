package reconcile

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// TestScaleDownWaitsForTheHPAMinimum: lowering spec.replicas lowers the HPA's minimum and the
// Deployment's count; the count waits for a pass that sees the lower minimum, since the HPA
// controller, still holding the old one in its cache, would raise a lower count straight back
// (its "Current number of replicas below Spec.MinReplicas") and keep it there.
func TestScaleDownWaitsForTheHPAMinimum(t *testing.T) {
	w := newWorld(8)
	w.apply(w.reconcile().Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged at 8: %s", verbs(out.Actions))
	}
	w.isvc.Spec.Replicas = 1
	w.isvc.Generation++
	out := w.reconcile()
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	for _, a := range out.Actions {
		switch o := a.Object.(type) {
		case *appsv1.Deployment:
			if n := ptr.Deref(o.Spec.Replicas, 1); n < 8 {
				t.Fatalf("the Deployment lowered to %d in the pass that lowers the HPA's minimum (still %d live): %s",
					n, ptr.Deref(w.obs.HPA.Spec.MinReplicas, 1), verbs(out.Actions))
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpa = o
		}
	}
	if hpa == nil || ptr.Deref(hpa.Spec.MinReplicas, 1) != 1 {
		t.Fatalf("the HPA's minimum not lowered to 1: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	out = w.reconcile()
	var d *appsv1.Deployment
	for _, a := range out.Actions {
		if o, ok := a.Object.(*appsv1.Deployment); ok {
			d = o
		}
	}
	if d == nil || ptr.Deref(d.Spec.Replicas, 1) != 1 || d.Annotations[ReplicasAnnotation] != "1" {
		t.Fatalf("with the HPA's minimum at 1, the Deployment not lowered to the user's 1: %s", verbs(out.Actions))
	}
	w.apply(out.Actions)
	w.podsReady()
	if out := w.reconcile(); len(out.Actions) != 0 {
		t.Fatalf("not converged at 1: %s", verbs(out.Actions))
	}
}
