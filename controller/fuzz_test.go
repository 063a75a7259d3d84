package controller

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// FuzzReconcileConverges: for any valid spec and any replica count the HPA may have chosen,
// Reconcile never panics, and applying its actions once leads to a fixed point (no second
// round of actions), the property that keeps the operator out of hot loops.
//
//	go test ./controller -run XXX -fuzz FuzzReconcileConverges -fuzztime 60s
func FuzzReconcileConverges(f *testing.F) {
	f.Add(int32(3), int32(1), "Qwen/Qwen3-0.6B", "", int32(3), int32(6))
	f.Add(int32(0), int32(0), "m", "img:1", int32(5), int32(0))
	f.Add(int32(1000), int32(16), "a/b", "x", int32(-1), int32(1))
	f.Fuzz(func(t *testing.T, replicas, gpus int32, model, image string, hpaChoice, newReplicas int32) {
		w := newWorld(replicas)
		w.isvc.Spec.GPUsPerReplica, w.isvc.Spec.Model, w.isvc.Spec.Image = ptr.To(gpus), model, image
		if crd.Validate(w.isvc) != nil {
			return // the API server refuses it; the controller reports it before Reconcile
		}
		w.apply(w.reconcile().Actions)
		w.podsReady()
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("no fixed point after one round: %s", verbs(out.Actions))
		}
		// The HPA picks a count; the operator accepts it or restores its own once.
		if w.obs.Deployment != nil && hpaChoice >= 0 {
			d := w.obs.Deployment.DeepCopy()
			d.Spec.Replicas = ptr.To(hpaChoice)
			w.obs.Deployment = d
			w.apply(w.reconcile().Actions)
			if out := w.reconcile(); len(out.Actions) != 0 {
				t.Fatalf("fights the HPA at %d: %s", hpaChoice, verbs(out.Actions))
			}
		}
		// A spec change converges in one round too.
		w.isvc.Spec.Replicas, w.isvc.Generation = newReplicas, w.isvc.Generation+1
		if crd.Validate(w.isvc) != nil {
			return
		}
		w.apply(w.reconcile().Actions)
		if out := w.reconcile(); len(out.Actions) != 0 {
			t.Fatalf("spec change: no fixed point: %s", verbs(out.Actions))
		}
	})
}
