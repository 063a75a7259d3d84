package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Short of GPUs with enough free in total but not on one node is GPUFragmented, with the
// counts; with too few in total, or no survey, it stays InsufficientGPU.
func TestGPUFragmented(t *testing.T) {
	short := func(p *corev1.Pod) { unschedulable(p, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.") }
	for _, c := range []struct {
		name   string
		survey []NodeGPUs
		reason string
		want   string
	}{
		{"fragmented", []NodeGPUs{{"n0", 8, 5}, {"n1", 8, 5}, {"n2", 8, 6}, {"n3", 8, 8}}, ReasonGPUFragmented,
			"8 GPUs free in the cluster but at most 3 on one node (n0 3, n1 3, n2 2) and a replica needs 4 on one node"},
		{"too few in total", []NodeGPUs{{"n0", 8, 7}, {"n1", 8, 6}}, ReasonInsufficientGPU, "4 Insufficient nvidia.com/gpu"},
		{"larger than any node", []NodeGPUs{{"n0", 2, 0}, {"n1", 2, 0}, {"n2", 2, 0}}, ReasonInsufficientGPU, "4 Insufficient nvidia.com/gpu"},
		{"not read", nil, ReasonInsufficientGPU, "4 Insufficient nvidia.com/gpu"},
	} {
		w, _ := diagnosisWorld(t, 1, 0)
		w.isvc.Spec.GPUsPerReplica = ptr.To[int32](4)
		w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", short)}
		in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
		if !WantsGPUSurvey(in) {
			t.Fatalf("%s: no survey wanted for a pod short of GPUs", c.name)
		}
		in.Observed.GPUSurvey = c.survey
		// The diagnosis itself: the spec's GPUs changed under a converged Deployment would be a rollout.
		causes := sortCauses(diagnoseWith(in.ISVC, in.Observed.Deployment, in.Observed.ReplicaSets, in.Observed.Pods, evidenceOf(in), t0).causes)
		if len(causes) == 0 || causes[0].Reason != c.reason || !strings.Contains(causes[0].Message, c.want) {
			t.Errorf("%s: %+v", c.name, causes)
		}
	}
	w, _ := diagnosisWorld(t, 1, 0)
	w.obs.Pods = []*corev1.Pod{crashPod("qwen3-7b6cd-a", true, 1)}
	if WantsGPUSurvey(Input{ISVC: w.isvc, Observed: w.obs}) {
		t.Fatal("a survey wanted for a model not short of GPUs")
	}
}
