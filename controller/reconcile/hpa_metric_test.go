package reconcile

// spec.autoscaling.metric per engine: the HPA's Pods metric and target, KEDA's query and
// threshold, AutoscalingActive's reading. Tables over engine.Names().

import (
	"testing"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/crd"
)

// engineKV is each engine's KV-cache metric as the HPA asks it and its series in Prometheus.
var engineKV = map[string]struct{ metric, series string }{
	"sglang": {"token_usage", "sglang:token_usage"},
	"vllm":   {"kv_cache_usage_perc", "vllm:kv_cache_usage_perc"},
}

// TestHPAOnTheSignal: the HPA's metric and target per engine and spec.autoscaling.metric; the
// queue's HPA (metric unset or queue) is the one the operator made before the field, field for
// field, so no existing HPA is rewritten; KEDA's trigger follows.
func TestHPAOnTheSignal(t *testing.T) {
	for _, name := range engine.Names() {
		e := engine.For(name)
		kv, ok := engineKV[name]
		if !ok {
			t.Fatalf("no KV-cache case for engine %s", name)
		}
		for _, c := range []struct {
			name                string
			a                   *crd.Autoscaling
			metric, target      string
			query, threshold    string
			sameAsBeforeMetrics bool
		}{
			{name: "no autoscaling (from replicas)", metric: e.Metrics().QueueName, target: "5", threshold: "5", sameAsBeforeMetrics: true},
			{name: "queue, unset", a: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4}, metric: e.Metrics().QueueName, target: "5", threshold: "5", sameAsBeforeMetrics: true},
			{name: "queue, explicit", a: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricQueue, TargetQueueLength: ptr.To[int32](3)}, metric: e.Metrics().QueueName, target: "3", threshold: "3"},
			{name: "kvCache, default target", a: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricKVCache}, metric: kv.metric, target: "700m", threshold: "0.7",
				query: `sum(avg by (pod) (` + kv.series + `{namespace="default",ai_example_com_inferenceservice="qwen3"}))`},
			{name: "kvCache 55%", a: &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricKVCache, TargetKVCacheUsagePercent: ptr.To[int32](55)}, metric: kv.metric, target: "550m", threshold: "0.55",
				query: `sum(avg by (pod) (` + kv.series + `{namespace="default",ai_example_com_inferenceservice="qwen3"}))`},
		} {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				w := newWorld(3)
				w.ext.Autoscaling = c.a
				hpa := desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
				m := hpa.Spec.Metrics
				if len(m) != 1 || m[0].Type != autoscalingv2.PodsMetricSourceType || m[0].Pods == nil || m[0].Pods.Metric.Name != c.metric ||
					m[0].Pods.Target.Type != autoscalingv2.AverageValueMetricType || m[0].Pods.Target.AverageValue.String() != c.target {
					t.Fatalf("HPA metrics %+v, want the Pods metric %s at %s a pod", m, c.metric, c.target)
				}
				if hpa.Spec.Behavior != nil {
					t.Errorf("behavior %+v, want the HPA controller's defaults", hpa.Spec.Behavior)
				}
				if c.sameAsBeforeMetrics {
					// The HPA as desiredHPAOn built it before spec.autoscaling.metric.
					before := []autoscalingv2.MetricSpec{{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
						Metric: autoscalingv2.MetricIdentifier{Name: e.Metrics().QueueName},
						Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(TargetQueueLength, resource.DecimalSI)},
					}}}
					if !equality.Semantic.DeepEqual(m, before) || metricsDrifted(m, before) {
						t.Errorf("the queue's HPA changed: %+v", m)
					}
				}
				so := desiredScaledObjectOn(e, w.isvc, hpa, kedaProm)
				triggers, _, _ := unstructured.NestedSlice(so.Object, "spec", "triggers")
				md, _ := triggers[0].(map[string]interface{})["metadata"].(map[string]interface{})
				query := c.query
				if query == "" {
					query = QueueQuery(e, "default", "qwen3")
				}
				if md["query"] != query || md["threshold"] != c.threshold {
					t.Errorf("KEDA query %v threshold %v, want %s at %s", md["query"], md["threshold"], query, c.threshold)
				}
			})
		}
	}
}

// TestHPADriftsOnTheSignal: a change of metric or of its target rewrites the HPA; the
// explicit queue is no change from the default.
func TestHPADriftsOnTheSignal(t *testing.T) {
	w := newWorld(3)
	e := engine.For(engine.VLLM)
	hpaOf := func(a *crd.Autoscaling) *autoscalingv2.HorizontalPodAutoscaler {
		w.ext.Autoscaling = a
		return desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
	}
	queue := hpaOf(&crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4})
	explicit := hpaOf(&crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricQueue})
	kv := hpaOf(&crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricKVCache})
	kv60 := hpaOf(&crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricKVCache, TargetKVCacheUsagePercent: ptr.To[int32](60)})
	if hpaDrifted(queue, explicit) {
		t.Error("metric queue set explicitly drifts from the default")
	}
	if !hpaDrifted(queue, kv) || !hpaDrifted(kv, kv60) || hpaDrifted(kv, kv.DeepCopy()) {
		t.Error("a change of metric or KV target is not drift, or an unchanged one is")
	}
	live := queue.DeepCopy()
	setHPA(live, kv60)
	if hpaDrifted(live, kv60) {
		t.Errorf("setHPA left %+v", live.Spec.Metrics)
	}
}

// TestAutoscalingActiveNamesTheKVCache: the condition's message names the KV-cache metric, the
// HPA's reading (its currentMetrics) and the target, in percent; the write threshold reads it.
func TestAutoscalingActiveNamesTheKVCache(t *testing.T) {
	for _, name := range engine.Names() {
		t.Run(name, func(t *testing.T) {
			e := engine.For(name)
			kv := engineKV[name]
			w := servingWorld(t)
			w.ext.Autoscaling = &crd.Autoscaling{MinReplicas: 1, MaxReplicas: 4, Metric: crd.AutoscalingMetricKVCache}
			want := desiredHPAOn(e, w.isvc, &w.ext, scaleOf(w.isvc, &w.ext), sharedOf(w.isvc))
			live := w.obs.HPA.DeepCopy()
			live.Spec.Metrics = want.Spec.Metrics
			live.Status = hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", "", 823)
			live.Status.CurrentMetrics[0].Pods.Metric.Name = kv.metric
			a, _ := decideAutoscaling(w.isvc, live, want, nil, w.cached().MetricsAPI, w.now().Time)
			if msg := kv.metric + " 82%/70% per pod"; a.status != metav1.ConditionTrue || a.message != msg {
				t.Fatalf("got %s %q, want True %q", a.status, a.message, msg)
			}
			// At the maximum and above target: False, with the reading.
			live.Status = hpaStatus(corev1.ConditionTrue, "ValidMetricFound", "ok", ReasonTooManyReplicas, 950)
			live.Status.CurrentMetrics[0].Pods.Metric.Name = kv.metric
			a, _ = decideAutoscaling(w.isvc, live, want, nil, w.cached().MetricsAPI, w.now().Time)
			if a.status != metav1.ConditionFalse || a.reason != ReasonTooManyReplicas || !hasSuffix(a.message, kv.metric+" 95%/70% per pod") {
				t.Fatalf("at the maximum: %s %s %q", a.status, a.reason, a.message)
			}
			r := func(milli int64) string {
				return queueReading(kv.metric, *resource.NewMilliQuantity(milli, resource.DecimalSI), *resource.NewMilliQuantity(700, resource.DecimalSI))
			}
			if cur, target, ok := parseReading(r(823)); !ok || cur != 82 || target != 70 {
				t.Fatalf("parseReading(%q) = %d/%d %v", r(823), cur, target, ok)
			}
			// Crossing the target, or moving half of it, is written; a few points are not.
			if !queueMoved(r(600), r(780)) || !queueMoved(r(0), r(400)) || queueMoved(r(500), r(560)) || !queueMoved("a", r(500)) {
				t.Fatalf("queueMoved does not read %s's readings", kv.metric)
			}
		})
	}
}

func hasSuffix(s, suffix string) bool {
	return len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix
}
