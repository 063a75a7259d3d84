package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The scheduler's words at v1.37 (TaintToleration's and NodeAffinity's Filter reasons).
const (
	taintMsg    = "0/3 nodes are available: 3 node(s) had untolerated taint(s). preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
	selectorMsg = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
)

func gpuNodes() []NodePlacement {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	return []NodePlacement{
		{Name: "gpu-0", Labels: map[string]string{"pool": "gpu"}, Taints: []corev1.Taint{gpu}},
		{Name: "gpu-1", Labels: map[string]string{"pool": "gpu"}, Taints: []corev1.Taint{gpu, {Key: "spot", Effect: corev1.TaintEffectNoExecute}}},
		{Name: "cpu-0", Labels: map[string]string{"pool": "cpu"}, Taints: []corev1.Taint{{Key: "dedicated", Value: "system", Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// TestPlacementFindings: the finding names the taint (key=value:effect) the pods do not
// tolerate and the toleration to add to spec.tolerations, or the selector label no node has.
func TestPlacementFindings(t *testing.T) {
	pod := func(msg string, spec corev1.PodSpec) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m-1"}, Spec: spec, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg}}}}
	}
	gpuTol := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		nodes      []NodePlacement
		reason     string
		want, none []string
	}{
		{name: "no toleration", pod: pod(taintMsg, corev1.PodSpec{}), nodes: gpuNodes(), reason: ReasonUntoleratedTaint,
			want: []string{"nvidia.com/gpu=present:NoSchedule (2 node(s))", "spot:NoExecute (1 node(s))", "dedicated=system:NoSchedule (1 node(s))",
				`spec.tolerations {key: nvidia.com/gpu, operator: Equal, value: "present", effect: NoSchedule}`, taintMsg}},
		{name: "tolerates the GPU taint, selects the GPU pool", pod: pod(taintMsg, corev1.PodSpec{Tolerations: []corev1.Toleration{gpuTol}, NodeSelector: map[string]string{"pool": "gpu"}}),
			nodes: gpuNodes(), reason: ReasonUntoleratedTaint,
			want: []string{"spot:NoExecute (1 node(s))", "spec.tolerations {key: spot, operator: Exists, effect: NoExecute}"}, none: []string{"nvidia.com/gpu=", "dedicated"}},
		{name: "a GPU health check's taint is not to be tolerated", pod: pod(taintMsg, corev1.PodSpec{}), reason: ReasonUntoleratedTaint,
			nodes: []NodePlacement{{Name: "n", Taints: []corev1.Taint{{Key: "gpu.example.com/health", Value: "failed", Effect: corev1.TaintEffectNoSchedule}}}},
			want:  []string{"gpu.example.com/health=failed:NoSchedule (1 node(s)): a GPU health check's taint; heal or replace the nodes, do not tolerate it"}, none: []string{"spec.tolerations"}},
		{name: "nodes not listed", pod: pod(taintMsg, corev1.PodSpec{}), reason: ReasonUntoleratedTaint, want: []string{taintMsg}, none: []string{"spec.tolerations"}},
		{name: "selector label no node has", pod: pod(selectorMsg, corev1.PodSpec{NodeSelector: map[string]string{"pool": "tpu"}}), nodes: gpuNodes(),
			reason: ReasonNodeSelectorMismatch, want: []string{"no node has the label pool=tpu of the pods' node selector", "spec.nodeSelector"}},
		{name: "labels no node has together", pod: pod(selectorMsg, corev1.PodSpec{NodeSelector: map[string]string{"pool": "gpu", "dedicated": "x"}}),
			nodes: append(gpuNodes(), NodePlacement{Name: "x", Labels: map[string]string{"dedicated": "x"}}), reason: ReasonNodeSelectorMismatch,
			want: []string{"no node has all the labels of the pods' node selector dedicated=x,pool=gpu"}},
		{name: "affinity", pod: pod(selectorMsg, corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"tpu"}}}}}}}}}),
			nodes: gpuNodes(), reason: ReasonNodeSelectorMismatch, want: []string{"no node matches the pods' required node affinity"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(1)
			f, ok := diagnosePod(w.isvc, tc.pod, evidence{placement: tc.nodes}, w.now().Time)
			if !ok || f.reason != tc.reason {
				t.Fatalf("finding %+v, want reason %s", f, tc.reason)
			}
			for _, s := range tc.want {
				if !strings.Contains(f.message, s) {
					t.Errorf("message lacks %q:\n%s", s, f.message)
				}
			}
			for _, s := range tc.none {
				if strings.Contains(f.message, s) {
					t.Errorf("message has %q:\n%s", s, f.message)
				}
			}
		})
	}
	if WantsPlacementSurvey(Input{Observed: Observed{Pods: []*corev1.Pod{pod("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.", corev1.PodSpec{})}}}) {
		t.Error("a pod short of GPUs asked for the nodes' taints")
	}
	if !WantsPlacementSurvey(Input{Observed: Observed{Pods: []*corev1.Pod{pod(taintMsg, corev1.PodSpec{})}}}) {
		t.Error("a pod kept off by a taint did not ask for the nodes' taints")
	}
}
