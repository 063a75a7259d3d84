// The HPA on a time-to-first-token objective (spec.autoscaling.metric ttft): its metric, its
// behavior, KEDA's query, and AutoscalingActive's reading of it.

package reconcile

import (
	"fmt"
	"strconv"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// hpaDefaultScaleDownWindow is the HPA controller's default scale-down stabilization window
// (kube-controller-manager's --horizontal-pod-autoscaler-downscale-stabilization, 5 minutes).
const hpaDefaultScaleDownWindow = 300

// ttftMetric is the Pods metric of metric ttft: each pod's p95 time to first token in
// milliseconds over the window, the window named in the metric's selector (the custom metrics
// API is handed it as metricLabelSelector; engine.TTFTWindowLabel), its target the objective
// in milliseconds.
func ttftMetric(e engine.Engine, a *crd.Autoscaling) (autoscalingv2.MetricIdentifier, resource.Quantity) {
	ms, window := a.TTFTTarget()
	id := autoscalingv2.MetricIdentifier{Name: e.Metrics().TTFTName,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{engine.TTFTWindowLabel: strconv.Itoa(int(window))}}}
	return id, *resource.NewQuantity(int64(ms), resource.DecimalSI)
}

// ttftBehavior is the HPA's behavior on a TTFT objective, sized from the HPA controller's
// source (pkg/controller/podautoscaler/horizontal.go, replica_calculator.go):
//
// Scale-up: no stabilization window, and the policies allow the larger of doubling and +4
// pods every 15 s (SelectPolicy Max). These are the API's defaults (autoscaling/v2
// SetDefaults_HorizontalPodAutoscalerBehavior), written out so the HPA holds them whatever
// the cluster's defaults: unlike KV use, a TTFT reading has no ceiling (a queue of 2 s against
// 500 ms asks 4x the pods in one sync, calcPlainMetricReplicas' usageRatio), so the policies
// bind; normalizeDesiredReplicasWithBehaviors caps each sync at the larger policy, so a model
// doubles every sync (15 s), four times in the minute in which a ramp that doubles each minute
// doubles once. With stabilization 0, stabilizeRecommendationWithBehaviors takes the first
// sync's recommendation at once: the model grows on the first reading over the target by the
// HPA's tolerance (10%), the p95 of the window. A pod not yet serving has no reading, and on a
// scale-up the HPA counts it as 0 (replica_calculator's missing pods): it does not hold a
// scale-up back.
//
// Scale-down: the stabilization window is at least the TTFT window (and at least
// scaleDownDelaySeconds, or the controller's 5 minutes when unset): the HPA scales down only
// to the highest recommendation of the window (stabilizeRecommendationWithBehaviors), and a
// recommendation made while a pod's p95 over the last window was above target is within it.
// During a ramp the p95 dips when new pods join (an idle pod reads 0, and their first requests
// wait for nothing), and those dips are shorter than the window: no scale-down comes of them.
// After the load ends, every pod's window empties and reads 0, so the model scales down a
// window after the last slow request, not before.
func ttftBehavior(a *crd.Autoscaling) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	_, window := a.TTFTTarget()
	down := max(window, hpaDefaultScaleDownWindow)
	if d := a.ScaleDownDelaySeconds; d != nil {
		down = max(window, *d)
	}
	return &autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{
			StabilizationWindowSeconds: ptr.To[int32](0),
			SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{
				{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
				{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			},
		},
		ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To(down)},
	}
}

// scaleUpOf is the HPA's scale-up rules; nil leaves them to the HPA controller (every metric
// but ttft).
func scaleUpOf(h *autoscalingv2.HorizontalPodAutoscaler) *autoscalingv2.HPAScalingRules {
	if b := h.Spec.Behavior; b != nil {
		return b.ScaleUp
	}
	return nil
}

// scaleUpDrifted: the scale-up rules the operator sets (metric ttft) are the live HPA's.
func scaleUpDrifted(live, want *autoscalingv2.HorizontalPodAutoscaler) bool {
	w := scaleUpOf(want)
	return w != nil && !equality.Semantic.DeepEqual(scaleUpOf(live), w)
}

// setScaleUp writes want's scale-up rules into out, when the operator sets them.
func setScaleUp(out, want *autoscalingv2.HorizontalPodAutoscaler) {
	w := scaleUpOf(want)
	if w == nil {
		return
	}
	if out.Spec.Behavior == nil {
		out.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{}
	}
	out.Spec.Behavior.ScaleUp = w.DeepCopy()
}

// TTFTQuery is the PromQL a ScaledObject asks for a model served by e on metric ttft: each
// pod's p95 time to first token over the window, in milliseconds, from its histogram's
// buckets (histogram_quantile over the rate of each bucket, as the adapter computes it from
// the bucket deltas), summed over the pods, which KEDA's HPA divides by the pods. A pod
// without a request in the window has a NaN p95, which ">= 0" drops: it adds 0, as the
// adapter's idle pod reads 0; with no pod left the result is empty, which KEDA reads as 0.
func TTFTQuery(e engine.Engine, namespace, name string, windowSeconds int) string {
	return fmt.Sprintf(`sum(histogram_quantile(0.95, sum by (pod, le) (rate(%s_bucket{namespace="%s",%s="%s"}[%ds]))) >= 0) * 1000`,
		e.Metrics().TTFT, namespace, InstanceSeriesLabel, name, windowSeconds)
}

// hpaTTFTWindow is the window of the HPA's TTFT metric, from its selector; ok is false when
// the HPA does not scale on it.
func hpaTTFTWindow(hpa *autoscalingv2.HorizontalPodAutoscaler, metric string) (int, bool) {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.PodsMetricSourceType && m.Pods != nil && m.Pods.Metric.Name == metric && m.Pods.Metric.Selector != nil {
			if w, err := strconv.Atoi(m.Pods.Metric.Selector.MatchLabels[engine.TTFTWindowLabel]); err == nil {
				return w, true
			}
		}
	}
	return 0, false
}

// ttftReadingPrefix starts AutoscalingActive's reading of a TTFT objective.
const ttftReadingPrefix = "time to first token p95 "

// ttftReading is AutoscalingActive's reading of a TTFT objective, the HPA's average of the
// pods' p95 against the objective, in whole milliseconds:
// "time to first token p95 180 ms against a target of 500 ms per pod".
func ttftReading(cur, target resource.Quantity) string {
	return fmt.Sprintf("%s%d ms against a target of %d ms per pod", ttftReadingPrefix, rounded(cur), rounded(target))
}

// isTTFTMetric reports whether metric is the TTFT p95, as the HPA names it.
func isTTFTMetric(metric string) bool {
	for _, n := range engine.Names() {
		if engine.For(n).Metrics().TTFTName == metric {
			return true
		}
	}
	return false
}
