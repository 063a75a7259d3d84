// The HorizontalPodAutoscaler on the queue metric of the model's engine: desired, drift and set.

package reconcile

import (
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// scaleTarget is what the autoscaler scales: the Deployment, or the LeaderWorkerSet's scale
// subresource (its replicas are groups; its selector the leaders, which serve the queue metric).
func scaleTarget(isvc *crd.InferenceService, ext *crd.SpecExtensions) autoscalingv2.CrossVersionObjectReference {
	if isMultiNode(ext) {
		return autoscalingv2.CrossVersionObjectReference{APIVersion: lwsAPIVersion, Kind: KindLeaderWorkerSet, Name: isvc.Name}
	}
	return autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: isvc.Name}
}

// desiredHPA is the HPA on the queue of the model's engine (desiredHPAOn).
func desiredHPA(isvc *crd.InferenceService, ext *crd.SpecExtensions, sc Scale, b shared) *autoscalingv2.HorizontalPodAutoscaler {
	return desiredHPAOn(engineOf(isvc), isvc, ext, sc, b)
}

// desiredHPAOn is the HPA of a model served by e, on the signal of spec.autoscaling.metric:
// e's queue by default, the Pods metric the custom metrics API serves it as
// (num_requests_waiting for vLLM, num_queue_reqs for SGLang), or e's KV-cache use
// (kv_cache_usage_perc, token_usage), served as a fraction of 1, its target the percentage
// in milli-units (70% is 700m), or each pod's p95 time to first token over a window
// (time_to_first_token_p95_milliseconds; ttftMetric, with a behavior of its own, ttftBehavior).
// It returns nil when the model is scaled to zero: an HPA cannot hold 0 replicas.
// Its behavior holds only spec.autoscaling.scaleDownDelaySeconds, as the scale-down window;
// unset, behavior stays nil: the HPA controller's default window applies, and HPAs made before
// the field existed are not rewritten. Scale-up keeps the HPA's default (no window): a queue
// above target is requests waiting now.
func desiredHPAOn(e engine.Engine, isvc *crd.InferenceService, ext *crd.SpecExtensions, sc Scale, b shared) *autoscalingv2.HorizontalPodAutoscaler {
	if ext.Autoscaling == nil && isvc.Spec.Replicas == 0 {
		return nil
	}
	lo, hi := sc.Min, sc.Max
	metric, target := hpaMetricOf(e, ext.Autoscaling)
	id := autoscalingv2.MetricIdentifier{Name: metric}
	var behavior *autoscalingv2.HorizontalPodAutoscalerBehavior
	if a := ext.Autoscaling; a.AutoscalingMetric() == crd.AutoscalingMetricTTFT {
		id, target = ttftMetric(e, a)
		behavior = ttftBehavior(a)
	} else if a != nil {
		if d := a.ScaleDownDelaySeconds; d != nil {
			behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(*d)}}
		}
	}
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: b.meta,
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: scaleTarget(isvc, ext),
			MinReplicas:    ptr.To(lo),
			MaxReplicas:    hi,
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: id,
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &target},
				},
			}},
			Behavior: behavior,
		},
	}
}

// hpaMetricOf is the Pods metric the HPA of a model served by e scales on, and its target per
// pod, from spec.autoscaling (nil: the queue at TargetQueueLength).
//
// KV-cache use keeps the HPA's default behavior, as the queue does: the HPA controller's
// default scale-up rules (no stabilization window; the larger of +100% and +4 pods per 15 s)
// never bind on it, since a gauge that cannot pass 1 asks at most 1/target times the pods in
// one sync (1.43x at 70%), under the +100% policy; and it asks again each sync while the pods
// stay full. Scale-down keeps spec.autoscaling.scaleDownDelaySeconds or the controller's
// 5-minute window: KV use falls as soon as the requests in flight end, before the load does.
func hpaMetricOf(e engine.Engine, a *crd.Autoscaling) (string, resource.Quantity) {
	// A fresh Quantity per object: Quantity caches its string form, so sharing one races.
	if a.AutoscalingMetric() == crd.AutoscalingMetricKVCache {
		pct := int64(crd.DefaultTargetKVCacheUsagePercent)
		if a.TargetKVCacheUsagePercent != nil {
			pct = int64(*a.TargetKVCacheUsagePercent)
		}
		return e.Metrics().KVCacheName, *resource.NewMilliQuantity(pct*10, resource.DecimalSI)
	}
	queue := int64(TargetQueueLength)
	if a != nil && a.TargetQueueLength != nil {
		queue = int64(*a.TargetQueueLength)
	}
	return e.Metrics().QueueName, *resource.NewQuantity(queue, resource.DecimalSI)
}

func hpaDrifted(live, want *autoscalingv2.HorizontalPodAutoscaler) bool {
	return !hasLabels(live.Labels, want.Labels) ||
		live.Spec.ScaleTargetRef != want.Spec.ScaleTargetRef ||
		ptr.Deref(live.Spec.MinReplicas, 1) != ptr.Deref(want.Spec.MinReplicas, 1) ||
		live.Spec.MaxReplicas != want.Spec.MaxReplicas ||
		metricsDrifted(live.Spec.Metrics, want.Spec.Metrics) ||
		!ptr.Equal(scaleDownWindowOf(live), scaleDownWindowOf(want)) ||
		scaleUpDrifted(live, want)
}

// scaleDownWindowOf is the HPA's scale-down stabilization window, the one part of behavior the
// operator owns; nil leaves it to the HPA controller. The rest of behavior (scale-up, the
// policies the API server fills in) is compared by nobody, so defaults never read as drift;
// but for metric ttft's scale-up rules (scaleUpDrifted), which the operator sets.
func scaleDownWindowOf(h *autoscalingv2.HorizontalPodAutoscaler) *int32 {
	if b := h.Spec.Behavior; b != nil && b.ScaleDown != nil {
		return b.ScaleDown.StabilizationWindowSeconds
	}
	return nil
}

// metricsDrifted compares the Pods metrics the operator sets field by field (the reflective
// Semantic.DeepEqual costs a dozen allocations per resync); other shapes fall back to it.
func metricsDrifted(have, want []autoscalingv2.MetricSpec) bool {
	if len(have) != len(want) {
		return true
	}
	for i := range want {
		h, w := &have[i], &want[i]
		if w.Type != autoscalingv2.PodsMetricSourceType || w.Pods == nil {
			if !equality.Semantic.DeepEqual(*h, *w) {
				return true
			}
			continue
		}
		if h.Type != w.Type || h.Pods == nil || h.Pods.Metric.Name != w.Pods.Metric.Name ||
			!equality.Semantic.DeepEqual(h.Pods.Metric.Selector, w.Pods.Metric.Selector) ||
			h.Pods.Target.Type != w.Pods.Target.Type || h.Pods.Target.AverageValue == nil ||
			h.Pods.Target.AverageValue.Cmp(*w.Pods.Target.AverageValue) != 0 ||
			h.Resource != nil || h.Object != nil || h.External != nil || h.ContainerResource != nil {
			return true
		}
	}
	return false
}

func setHPA(out, want *autoscalingv2.HorizontalPodAutoscaler) {
	out.Labels = mergeLabels(out.Labels, want.Labels)
	out.Spec.ScaleTargetRef = want.Spec.ScaleTargetRef
	out.Spec.MinReplicas = ptr.To(*want.Spec.MinReplicas)
	out.Spec.MaxReplicas = want.Spec.MaxReplicas
	out.Spec.Metrics = want.Spec.Metrics
	setScaleDownWindow(out, scaleDownWindowOf(want))
	setScaleUp(out, want)
}

// setScaleDownWindow writes the window into out's behavior, keeping the rest of it; a nil
// window is removed (an HPA without behavior keeps none).
func setScaleDownWindow(out *autoscalingv2.HorizontalPodAutoscaler, window *int32) {
	b := out.Spec.Behavior
	switch {
	case window == nil && (b == nil || b.ScaleDown == nil):
		return
	case window == nil:
		b.ScaleDown.StabilizationWindowSeconds = nil
		return
	case b == nil:
		b = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
		out.Spec.Behavior = b
	}
	if b.ScaleDown == nil {
		b.ScaleDown = &autoscalingv2.HPAScalingRules{}
	}
	b.ScaleDown.StabilizationWindowSeconds = ptr.To(*window)
}
