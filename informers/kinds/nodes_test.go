package kinds

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func gpuNode(name string, capacity, allocatable string, mutate func(n *corev1.Node)) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"a": "b"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(capacity), corev1.ResourceCPU: resource.MustParse("32")},
			Allocatable: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(allocatable), corev1.ResourceCPU: resource.MustParse("32")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now()}},
			Images: []corev1.ContainerImage{{Names: []string{"vllm/vllm-openai:v0.11.0"}, SizeBytes: 1 << 34}},
		}}
	if mutate != nil {
		mutate(n)
	}
	return n
}

// The cache keeps the GPU facts only, and a heartbeat leaves it unchanged; a GPU pool's taint
// is not trouble, a health check's is; fewer allocatable GPUs than installed are.
func TestStripNodeAndTrouble(t *testing.T) {
	healthy := gpuNode("n0", "8", "8", nil)
	s, _ := StripNode(healthy.DeepCopy())
	sn := s.(*corev1.Node)
	if len(sn.Status.Images) != 0 || len(sn.Labels) != 0 || len(sn.Spec.Taints) != 0 || len(sn.Status.Capacity) != 1 || len(sn.Status.Conditions) != 1 || !sn.Status.Conditions[0].LastHeartbeatTime.IsZero() {
		t.Fatalf("stripped: %+v", sn)
	}
	if NodeTroubled(sn) {
		t.Fatal("a healthy GPU node with its pool taint is not troubled")
	}
	for name, n := range map[string]*corev1.Node{
		"allocatable 6 of 8: nvidia.com/gpu allocatable 6 of 8": gpuNode("n1", "8", "6", nil),
		"health taint: taint nvidia.com/gpu.health=unhealthy:NoExecute": gpuNode("n2", "8", "8", func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "nvidia.com/gpu.health", Value: "unhealthy", Effect: corev1.TaintEffectNoExecute})
		}),
		"not ready: node not Ready": gpuNode("n3", "8", "8", func(n *corev1.Node) { n.Status.Conditions[1].Status = corev1.ConditionUnknown }),
	} {
		s, _ := StripNode(n.DeepCopy())
		sn := s.(*corev1.Node)
		_, want, _ := strings.Cut(name, ": ")
		if got := NodeTrouble(sn, "nvidia.com/gpu"); !NodeTroubled(sn) || !strings.Contains(got, want) {
			t.Errorf("%s: troubled %v, %q", name, NodeTroubled(sn), got)
		}
	}
}
