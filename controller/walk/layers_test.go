package walk

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

// TestPodStates: each pod counted once in the state kubectl would show, first by name.
func TestPodStates(t *testing.T) {
	terminating := readyPod("qwen3-7b6cd-p5")
	terminating.DeletionTimestamp = ptr.To(ago(time.Second))
	l := podsLayer([]*corev1.Pod{crashingPod("qwen3-7b6cd-p4"), readyPod("qwen3-7b6cd-p2"), unschedulablePod("qwen3-7b6cd-p3"),
		readyPod("qwen3-7b6cd-p1"), terminating}, t0)
	got := []StateCount{}
	got = append(got, l.States...)
	want := []StateCount{{"ready", 2, "qwen3-7b6cd-p1"}, {"crash looping", 1, "qwen3-7b6cd-p4"}, {"unschedulable", 1, "qwen3-7b6cd-p3"}, {"terminating", 1, "qwen3-7b6cd-p5"}}
	if l.Total != 5 || len(got) != len(want) {
		t.Fatalf("pods %+v, want %+v", l, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("state %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestMetricTargetAndValue: the spec's target and the status's reading read the same way,
// `kubectl get hpa`'s: the average, else the total, else the utilization.
func TestMetricTargetAndValue(t *testing.T) {
	q := resource.NewQuantity(5, resource.DecimalSI)
	for _, c := range []struct {
		target  autoscalingv2.MetricTarget
		current autoscalingv2.MetricValueStatus
		want    string
	}{
		{autoscalingv2.MetricTarget{AverageValue: q, Value: resource.NewQuantity(9, resource.DecimalSI)}, autoscalingv2.MetricValueStatus{AverageValue: q, Value: resource.NewQuantity(9, resource.DecimalSI)}, "5"},
		{autoscalingv2.MetricTarget{Value: q}, autoscalingv2.MetricValueStatus{Value: q}, "5"},
		{autoscalingv2.MetricTarget{AverageUtilization: ptr.To[int32](80)}, autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To[int32](80)}, "80%"},
		{autoscalingv2.MetricTarget{}, autoscalingv2.MetricValueStatus{}, ""},
	} {
		id := autoscalingv2.MetricIdentifier{Name: "num_requests_waiting"}
		name, target := metricTarget(autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: id, Target: c.target}})
		vname, value := metricValue(autoscalingv2.MetricStatus{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricStatus{Metric: id, Current: c.current}})
		if name != id.Name || vname != id.Name || target != c.want || value != c.want {
			t.Errorf("%+v: target %s %q, value %s %q, want %q", c.target, name, target, vname, value, c.want)
		}
	}
	if name, target := metricTarget(autoscalingv2.MetricSpec{Type: autoscalingv2.ContainerResourceMetricSourceType}); name != "ContainerResource" || target != "" {
		t.Errorf("an unread source: %q %q", name, target)
	}
}
