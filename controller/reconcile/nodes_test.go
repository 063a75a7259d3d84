package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// A pod crash looping or never ready on a troubled node is GPUError naming the node and its
// trouble; on a healthy node it stays what it was; a pending pod short of GPUs names the nodes
// whose GPUs are not allocatable.
func TestGPUErrorFromTheNode(t *testing.T) {
	sick, _ := kinds.StripNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fake-node-0"}, Status: corev1.NodeStatus{
		Capacity: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}}})
	nodes := map[string]*corev1.Node{"fake-node-0": sick.(*corev1.Node)}
	for _, onSick := range []bool{true, false} {
		w, _ := diagnosisWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 3)}
		if !onSick {
			w.obs.Pods[0].Spec.NodeName = "fake-node-1"
		}
		w.obs.Nodes = nodes
		st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
		msg := findCond(st.Conditions, crd.ConditionReady).Message
		want := ReasonCrashLoopBackOff
		if onSick {
			want = ReasonGPUError
		}
		if st.Reason != want || onSick && !strings.Contains(msg, "on node fake-node-0: the node's GPUs are unhealthy (nvidia.com/gpu allocatable 0 of 8") {
			t.Errorf("on the sick node %v: %s: %s", onSick, st.Reason, msg)
		}
	}
	w, _ := diagnosisWorld(t, 1, 0)
	w.obs.Nodes = nodes
	w.obs.Pods = []*corev1.Pod{unschedulablePod("qwen3-7b6cd-a", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")}
	st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
	if msg := findCond(st.Conditions, crd.ConditionReady).Message; st.Reason != ReasonInsufficientGPU || !strings.Contains(msg, "GPUs not allocatable on fake-node-0 (0 of 8)") {
		t.Errorf("pending: %s: %s", st.Reason, msg)
	}
}
