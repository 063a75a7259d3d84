package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
)

func workloadObject(owner string, status map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
		"metadata": map[string]any{"name": "pod-qwen3-7b6cd-a-1f2e3", "namespace": "default",
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": owner, "name": "qwen3-7b6cd-a", "uid": "qwen3-7b6cd-a", "controller": true}}},
		"status": status,
	}}
}

func TestWorkloadOf(t *testing.T) {
	pending := map[string]any{"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "False", "reason": "Pending",
		"message": "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"}}}
	uid, w, ok := WorkloadOf(workloadObject("Pod", pending))
	if !ok || uid != "qwen3-7b6cd-a" || w.Name != "pod-qwen3-7b6cd-a-1f2e3" || !strings.HasSuffix(w.Pending, "Pending the preemption of 1 workload(s)") {
		t.Fatalf("pod's Workload: %v %q %+v", ok, uid, w)
	}
	if _, _, ok := WorkloadOf(workloadObject("Job", pending)); ok {
		t.Fatal("a Job's Workload read as a pod's")
	}
	reserved := map[string]any{"admission": map[string]any{"clusterQueue": "team-a"},
		"conditions": []any{map[string]any{"type": "QuotaReserved", "status": "True", "message": "Quota reserved in ClusterQueue team-a"}}}
	if _, w, _ := WorkloadOf(workloadObject("Pod", reserved)); w.Pending != "" || w.ClusterQueue != "team-a" {
		t.Fatalf("reserved: %+v", w)
	}
}

// A gated pod's message carries what Kueue's Workload says, so `kubectl get isvc` tells a
// queue short of quota, and a preemption under way, from a queue not yet looked at.
func TestWaitingForAdmissionInKueuesWords(t *testing.T) {
	gated := pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	})
	for _, c := range []struct {
		name      string
		workloads map[types.UID]Workload
		want      string
	}{
		{"no Workloads watched", nil, "held by scheduling gates kueue.x-k8s.io/admission"},
		{"no Workload yet", map[types.UID]Workload{}, "kueue.x-k8s.io/admission"},
		{"preempting", map[types.UID]Workload{"qwen3-7b6cd-a": {Name: "pod-a", Pending: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"}},
			"held by scheduling gates kueue.x-k8s.io/admission; Kueue Workload pod-a: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"},
		{"reserved", map[types.UID]Workload{"qwen3-7b6cd-a": {Name: "pod-a", ClusterQueue: "team-a"}}, "Kueue Workload pod-a: quota reserved in ClusterQueue team-a"},
		{"another pod's Workload", map[types.UID]Workload{"other": {Name: "pod-b", Pending: "x"}}, "kueue.x-k8s.io/admission"},
	} {
		w, _ := walkWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{gated}
		w.obs.Workloads = c.workloads
		st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
		msg := findCond(st.Conditions, crd.ConditionReady).Message
		if st.Reason != ReasonWaitingForAdmission || st.Phase != crd.PhaseProgressing || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s %s %q", c.name, st.Phase, st.Reason, msg)
		}
		if c.workloads != nil && len(c.workloads) == 0 && !strings.Contains(msg, "no Kueue Workload for it yet") {
			t.Errorf("%s: %q", c.name, msg)
		}
		if strings.Contains(msg, "pod-b") {
			t.Errorf("%s: another pod's Workload quoted: %q", c.name, msg)
		}
	}
}

// Kueue's account changing (a Workload created, short of quota, then preempting) is written,
// though the model stays Progressing WaitingForAdmission: it is what the user waits on.
func TestKueuesAccountWorthWriting(t *testing.T) {
	st := func(msg string) *crd.InferenceServiceStatus {
		return &crd.InferenceServiceStatus{Phase: crd.PhaseProgressing, Reason: ReasonWaitingForAdmission, ObservedGeneration: 2,
			Conditions: []metav1.Condition{{Type: crd.ConditionReady, Status: metav1.ConditionFalse, Reason: ReasonWaitingForAdmission, ObservedGeneration: 2, Message: msg}}}
	}
	before := st("Pod a: waiting for admission: held by scheduling gates kueue.x-k8s.io/admission; no Kueue Workload for it yet")
	after := st("Pod a: waiting for admission: held by scheduling gates kueue.x-k8s.io/admission; Kueue Workload pod-a: couldn't assign flavors")
	if !WorthWriting(before, after) {
		t.Fatal("Kueue's new account not written")
	}
	if WorthWriting(after, st(after.Conditions[0].Message)) {
		t.Fatal("an unchanged account rewritten")
	}
}
