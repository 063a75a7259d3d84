// The ScaledObject child, with --autoscaler=keda: KEDA scales the model on its queue, read
// from Prometheus, in place of the HPA; its Ready condition becomes the model's
// AutoscalingActive.

package reconcile

import (
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// InstanceSeriesLabel is InstanceLabel as Prometheus names it on a pod's series: the
// ServiceMonitor's podTargetLabels and pod discovery's __meta_kubernetes_pod_label_* both
// turn every character outside [a-zA-Z0-9_] into an underscore.
const InstanceSeriesLabel = "ai_example_com_inferenceservice"

// QueueQuery is the PromQL a ScaledObject asks for a model served by e: e's queue series
// (vllm:num_requests_waiting, sglang:num_queue_reqs) summed over the model's pods (and over
// the rest of its labels: model_name, the base model and its adapters; SGLang's
// data-parallel ranks, each its own queue), selected by the model's own label, which the
// model's ServiceMonitor carries onto its series. Not by pod name: a sibling model's
// LeaderWorkerSet leader <name>-<x>-0 is named as this model's pods could be. Names are
// DNS-1035 labels: nothing in them needs escaping in PromQL.
func QueueQuery(e engine.Engine, namespace, name string) string {
	return `sum(` + e.Metrics().Queue + `{namespace="` + namespace + `",` + InstanceSeriesLabel + `="` + name + `"})`
}

// KVCacheQuery is the PromQL a ScaledObject asks for a model served by e on metric kvCache:
// e's KV-cache gauge averaged per pod (over the engine's data-parallel ranks, each its own
// cache: the adapter's reading, podmetrics.ParsePage) and summed over the model's pods, which
// KEDA's HPA divides by the pods as it does the queue. The pod label is the one the Prometheus
// Operator puts on every series a ServiceMonitor scrapes.
func KVCacheQuery(e engine.Engine, namespace, name string) string {
	return `sum(avg by (pod) (` + e.Metrics().KVCacheUsage + `{namespace="` + namespace + `",` + InstanceSeriesLabel + `="` + name + `"}))`
}

// kedaPrometheusTrigger is KEDA's scaler type for a PromQL query.
const kedaPrometheusTrigger = "prometheus"

// desiredScaledObject is hpa, the HPA the spec wants (nil: none), said to KEDA: the same
// bounds, target and behavior, the queue of the model's engine read from the Prometheus at
// address.
func desiredScaledObject(isvc *crd.InferenceService, hpa *autoscalingv2.HorizontalPodAutoscaler, address string) *unstructured.Unstructured {
	return desiredScaledObjectOn(engineOf(isvc), isvc, hpa, address)
}

// desiredScaledObjectOn is desiredScaledObject for a model served by e.
func desiredScaledObjectOn(e engine.Engine, isvc *crd.InferenceService, hpa *autoscalingv2.HorizontalPodAutoscaler, address string) *unstructured.Unstructured {
	if hpa == nil {
		return nil
	}
	u := newChildUnstructured(isvc, "keda.sh/v1alpha1", KindScaledObject)
	query, threshold := QueueQuery(e, isvc.Namespace, isvc.Name), hpaTarget(hpa, e.Metrics().QueueName)
	if m := e.Metrics().KVCacheName; hpaScalesOn(hpa, m) {
		// KEDA parses its threshold as a float: 0.7, not the Quantity's 700m.
		t := hpaTargetQuantity(hpa, m)
		query, threshold = KVCacheQuery(e, isvc.Namespace, isvc.Name), strconv.FormatFloat(float64(t.MilliValue())/1000, 'f', -1, 64)
	}
	if m := e.Metrics().TTFTName; hpaScalesOn(hpa, m) {
		if w, ok := hpaTTFTWindow(hpa, m); ok {
			query, threshold = TTFTQuery(e, isvc.Namespace, isvc.Name, w), hpaTarget(hpa, m)
		}
	}
	spec := map[string]interface{}{
		"scaleTargetRef":  map[string]interface{}{"apiVersion": hpa.Spec.ScaleTargetRef.APIVersion, "kind": hpa.Spec.ScaleTargetRef.Kind, "name": isvc.Name},
		"minReplicaCount": int64(ptr.Deref(hpa.Spec.MinReplicas, 1)),
		"maxReplicaCount": int64(hpa.Spec.MaxReplicas),
		"triggers": []interface{}{map[string]interface{}{
			"type": kedaPrometheusTrigger,
			// KEDA's HPA divides the sum by the threshold: a target per pod, as the HPA's.
			"metricType": string(autoscalingv2.AverageValueMetricType),
			"metadata": map[string]interface{}{
				"serverAddress": address,
				"query":         query,
				"threshold":     threshold,
			},
		}},
	}
	if b := hpa.Spec.Behavior; b != nil {
		// KEDA hands it to the HPA it creates; numbers come out int64, as the API server's JSON.
		if behavior, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b); err == nil {
			spec["advanced"] = map[string]interface{}{"horizontalPodAutoscalerConfig": map[string]interface{}{"behavior": behavior}}
		}
	}
	u.Object["spec"] = spec
	return u
}

// hpaTarget is the HPA's target per pod for the queue metric, as KEDA's threshold string.
func hpaTarget(hpa *autoscalingv2.HorizontalPodAutoscaler, metric string) string {
	if hpaScalesOn(hpa, metric) {
		t := hpaTargetQuantity(hpa, metric)
		return t.String()
	}
	return "0"
}

// hpaScalesOn reports whether hpa has a Pods metric named metric with a target per pod.
func hpaScalesOn(hpa *autoscalingv2.HorizontalPodAutoscaler, metric string) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == metric && m.Pods.Target.AverageValue != nil {
			return true
		}
	}
	return false
}

// hpaTargetQuantity is the target per pod of hpa's Pods metric named metric (hpaScalesOn).
func hpaTargetQuantity(hpa *autoscalingv2.HorizontalPodAutoscaler, metric string) resource.Quantity {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == metric && m.Pods.Target.AverageValue != nil {
			return m.Pods.Target.AverageValue.DeepCopy()
		}
	}
	return resource.Quantity{}
}

// decideScaledObject reads AutoscalingActive from the ScaledObject's Ready condition, KEDA's
// verdict on its scaler (the Prometheus query answered, the HPA it owns set up).
func decideScaledObject(isvc *crd.InferenceService, live, want *unstructured.Unstructured) autoscaling {
	if want == nil {
		return autoscaling{}
	}
	unknown := autoscaling{true, metav1.ConditionUnknown, ReasonKEDANotReported,
		"KEDA has not reported whether the ScaledObject reads " + engineOf(isvc).Metrics().Queue + " yet"}
	if live == nil || !ControlledBy(live, isvc) {
		return unknown
	}
	conds, _, _ := unstructured.NestedSlice(live.Object, "status", "conditions")
	for _, c := range conds {
		cm, ok := c.(map[string]interface{})
		if !ok || cm["type"] != "Ready" {
			continue
		}
		status, _ := cm["status"].(string)
		reason, _ := cm["reason"].(string)
		message, _ := cm["message"].(string)
		switch metav1.ConditionStatus(status) {
		case metav1.ConditionTrue, metav1.ConditionFalse:
			if reason != "" {
				return autoscaling{true, metav1.ConditionStatus(status), reason, "KEDA's ScaledObject: " + message}
			}
		}
	}
	return unknown
}

// kedaUnservedNote opens AutoscalingActive's message while --autoscaler=keda cannot be
// honoured; the HPA's own reading stays last, where queueMoved finds it.
const kedaUnservedNote = "--autoscaler=keda, but KEDA's ScaledObjects (keda.sh/v1alpha1) are not served: the HorizontalPodAutoscaler scales this model"

// withKEDAUnserved says, in AutoscalingActive, that the HPA stands in for KEDA, and what the
// HPA says.
func (a autoscaling) withKEDAUnserved() autoscaling {
	if a.present {
		a.message = joinMessage(kedaUnservedNote+" ("+a.reason+")", a.message)
		a.reason = ReasonKEDANotServed
	}
	return a
}
