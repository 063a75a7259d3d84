package reconcile

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
)

// FuzzReconcileConverges: for any valid spec and any replica count the HPA may have chosen,
// Reconcile never panics, and applying its actions (and its adapter steps on the ready pods'
// servers) once leads to a fixed point (no second round of actions or steps), the property
// that keeps the operator out of hot loops.
//
//	go test ./controller -run XXX -fuzz FuzzReconcileConverges -fuzztime 60s
func FuzzReconcileConverges(f *testing.F) {
	f.Add(int32(3), int32(1), "Qwen/Qwen3-0.6B", "", int32(3), int32(6), uint8(0), int32(0), int32(0))
	f.Add(int32(0), int32(0), "m", "img:1", int32(5), int32(0), uint8(2), int32(0), int32(0))
	f.Add(int32(1000), int32(16), "a/b", "x", int32(-1), int32(1), uint8(0), int32(0), int32(0))
	f.Add(int32(2), int32(1), "m", "", int32(7), int32(4), uint8(3), int32(2), int32(8))
	f.Add(int32(2), int32(4), "m", "", int32(5), int32(1), uint8(13), int32(0), int32(0))
	f.Add(int32(2), int32(1), "m", "", int32(2), int32(2), uint8(16), int32(0), int32(0))
	f.Add(int32(2), int32(1), "m", "", int32(6), int32(2), uint8(32), int32(0), int32(0))
	f.Add(int32(2), int32(1), "m", "", int32(600), int32(2), uint8(64), int32(2), int32(5))
	f.Add(int32(2), int32(6), "m", "", int32(3), int32(1), uint8(128), int32(0), int32(0))
	f.Fuzz(func(t *testing.T, replicas, gpus int32, model, image string, hpaChoice, newReplicas int32, adapters uint8, minR, maxR int32) {
		if !utf8.ValidString(model) || !utf8.ValidString(image) {
			return // custom resources travel as JSON, which carries only valid UTF-8
		}
		w := newWorld(replicas)
		w.isvc.Spec.GPUsPerReplica, w.isvc.Spec.Model, w.isvc.Spec.Image = ptr.To(gpus), model, image
		for i := range int(adapters % 8) {
			w.ext.Adapters = append(w.ext.Adapters, crd.Adapter{Name: fmt.Sprintf("a%d", i), StorageURI: fmt.Sprintf("hf://o/a%d", i)})
		}
		if adapters&8 != 0 {
			w.ext.EngineArgs = []string{"--max-model-len", model}
			w.ext.Cache = &crd.Cache{ClaimName: "weights"}
		}
		if adapters&128 != 0 {
			// spec.parallelism: two GPUs a stage where the count is even, else one (vLLM's advice).
			w.ext.Parallelism = &crd.Parallelism{TensorParallelSize: 1, PipelineParallelSize: gpus}
			if gpus%2 == 0 {
				w.ext.Parallelism = &crd.Parallelism{TensorParallelSize: 2, PipelineParallelSize: gpus / 2}
			}
		}
		if minR != 0 || maxR != 0 {
			// v1beta1 autoscaling: conversion derives v1alpha1's replicas from the minimum.
			w.ext.Autoscaling, w.ext.ReplicasUnset = &crd.Autoscaling{MinReplicas: minR, MaxReplicas: maxR}, true
			w.isvc.Spec.Replicas = minR
			if adapters&64 != 0 {
				w.ext.Autoscaling.ScaleDownDelaySeconds = ptr.To(hpaChoice) // the HPA's scale-down window
			}
		}
		if crd.Validate(w.isvc) != nil || validExt(w) != nil {
			return // the API server refuses it; the controller reports it before Reconcile
		}
		w.apply(w.reconcile().Actions)
		w.podsReady()
		w.applySteps(t, w.reconcile().AdapterSteps)
		if out := w.reconcile(); len(out.Actions) != 0 || len(out.AdapterSteps) != 0 {
			t.Fatalf("no fixed point after one round: %s, steps %+v", verbs(out.Actions), out.AdapterSteps)
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
		// The HPA reports (blind, reading a queue, or held at its maximum): no action, and the
		// status reaches a fixed point with one write, however often the same report resyncs.
		if w.obs.HPA != nil {
			st := hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "", int64(hpaChoice)*250)
			if adapters&16 != 0 {
				st = hpaStatus(corev1.ConditionFalse, "FailedGetPodsMetric", blindMessage, "", -1)
			} else if adapters&32 != 0 {
				st = hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, int64(hpaChoice)*250)
			}
			w.setHPAStatus(st)
			if out := w.reconcile(); len(out.Actions) != 0 {
				t.Fatalf("acts on the HPA's status: %s", verbs(out.Actions))
			}
			stored := w.isvc.Status
			if out := w.reconcile(); len(out.Actions) != 0 || WorthWriting(&stored, &out.Status) {
				t.Fatalf("HPA status %+v: no status fixed point: %+v -> %+v", st, stored.Conditions, out.Status.Conditions)
			}
		}
		// A spec change converges in one round too; two when it lowers the count below the live
		// HPA's minimum, which is lowered first (holdForHPAMin).
		w.isvc.Spec.Replicas, w.isvc.Generation = newReplicas, w.isvc.Generation+1
		if w.ext.Autoscaling != nil && newReplicas != w.ext.Autoscaling.MinReplicas {
			w.ext.Autoscaling = nil // a fixed count set through v1alpha1 wins, as crd.ExtensionsOf reads it
		}
		if crd.Validate(w.isvc) != nil {
			return
		}
		if w.obs.HPA != nil && w.obs.Deployment != nil && newReplicas < ptr.Deref(w.obs.HPA.Spec.MinReplicas, 1) {
			w.apply(w.reconcile().Actions)
		}
		w.apply(w.reconcile().Actions)
		w.podsReady()
		w.applySteps(t, w.reconcile().AdapterSteps)
		if out := w.reconcile(); len(out.Actions) != 0 || len(out.AdapterSteps) != 0 {
			t.Fatalf("spec change: no fixed point: %s, steps %+v", verbs(out.Actions), out.AdapterSteps)
		}
	})
}

// validExt validates the world's extensions the way the controller reads them: from the
// annotation conversion writes.
func validExt(w *world) error {
	isvc := *w.isvc // shallow: only the annotations are replaced
	b, err := json.Marshal(w.ext)
	if err != nil {
		return err
	}
	isvc.Annotations = map[string]string{crd.AnnotationV1beta1Spec: string(b)}
	return crd.Validate(&isvc)
}
