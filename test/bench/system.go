// The systems measured (-system): what a model is for each, how it reports Ready, which of
// its children the watcher counts, and how each controller's figures are read.

package main

import (
	"fmt"
	"strings"

	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

// Names of -system.
const (
	SystemOperator = "operator"
	SystemKServe   = "kserve"
)

// system is one controller under measurement; both run the same models (one replica, the same
// image and requests) to the same outcome: a Deployment, a Service and an HPA each.
type system struct {
	name     string
	resource schema.GroupVersionResource
	// object is model i.
	object func(i int, serving bool) *unstructured.Unstructured
	// ready reports whether a model says it is Ready, and for which generation.
	ready func(u *unstructured.Unstructured) (bool, int64)
	// model names the model a child named name belongs to ("" when none).
	model func(child string) string
	// changeType and change patch a model to serve bench/model-v2.
	changeType types.PatchType
	change     []byte
	// eventWrites is how many writes Event e cost the controller (0 when not its own).
	eventWrites func(e *eventsv1.Event) float64
	// reconciles selects the controller's own reconcile histogram among those it exposes.
	reconciles func(labels map[string]string) bool
}

// systemNamed is -system's value.
func systemNamed(name string) (system, error) {
	switch name {
	case "", SystemOperator:
		return operatorSystem(), nil
	case SystemKServe:
		return kserveSystem(), nil
	}
	return system{}, fmt.Errorf("unknown system %q (want %s or %s)", name, SystemOperator, SystemKServe)
}

func operatorSystem() system {
	return system{
		name: SystemOperator, resource: crd.Resource, object: isvcObject,
		ready: func(u *unstructured.Unstructured) (bool, int64) {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			return phase == string(crd.PhaseReady), gen
		},
		model:      func(child string) string { return child },
		changeType: types.MergePatchType, change: []byte(`{"spec":{"model":"bench/model-v2"}}`),
		// One create per Event, one patch per further occurrence in its series.
		eventWrites: func(e *eventsv1.Event) float64 {
			if e.ReportingController != "inferenceservice-operator" {
				return 0
			}
			if e.Series != nil {
				return float64(e.Series.Count)
			}
			return 1
		},
	}
}

// kserveResource is KServe's InferenceService.
var kserveResource = schema.GroupVersionResource{Group: "serving.kserve.io", Version: "v1beta1", Resource: "inferenceservices"}

func kserveSystem() system {
	return system{
		name: SystemKServe, resource: kserveResource, object: kserveObject,
		ready: func(u *unstructured.Unstructured) (bool, int64) {
			gen, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]any); ok && m["type"] == "Ready" {
					return m["status"] == "True", gen
				}
			}
			return false, gen
		},
		// Standard mode names the predictor's Deployment, Service and HPA <model>-predictor.
		model: func(child string) string {
			m, ok := strings.CutSuffix(child, "-predictor")
			if !ok {
				return ""
			}
			return m
		},
		changeType: types.JSONPatchType, change: []byte(`[{"op":"replace","path":"/spec/predictor/containers/0/args","value":["bench/model-v2"]}]`),
		// Its recorder writes core/v1 Events with this source component: one create, then a
		// patch of the count per repeat.
		eventWrites: func(e *eventsv1.Event) float64 {
			if e.DeprecatedSource.Component != "v1beta1Controllers" {
				return 0
			}
			return float64(max(1, e.DeprecatedCount))
		},
		reconciles: func(l map[string]string) bool { return l["controller"] == "inferenceservice" },
	}
}

// kserveObject is the benchmark's model i as a KServe InferenceService: a container-only
// predictor (no ServingRuntime), one replica, an HPA from 1 to 3 as the baseline's.
func kserveObject(i int, _ bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kserveResource.GroupVersion().String(), "kind": "InferenceService",
		"metadata": map[string]any{"name": fmt.Sprintf("m-%05d", i), "namespace": "bench"},
		"spec": map[string]any{"predictor": map[string]any{
			"minReplicas": int64(1), "maxReplicas": int64(3),
			"containers": []any{map[string]any{
				"name": "kserve-container", "image": crd.DefaultImage, "args": []any{"bench/model"},
				"resources": map[string]any{"requests": map[string]any{"cpu": "10m", "memory": "16Mi"}},
			}},
		}},
	}}
}

// process is what the benchmark reads from a running controller.
type process interface {
	Writes() (float64, error)
	Scrape() (map[string]*dto.MetricFamily, error)
	RSSBytes() (int64, error)
	RSSAnonBytes() (int64, error)
	PeakRSSBytes() (int64, error)
}
