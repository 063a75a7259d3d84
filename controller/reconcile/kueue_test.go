package reconcile

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// A gated pod's message carries what Kueue's Workload says, so `kubectl get isvc` tells a
// queue short of quota, and a preemption under way, from a queue not yet looked at.
func TestWaitingForAdmissionInKueuesWords(t *testing.T) {
	gated := pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
	})
	for _, c := range []struct {
		name      string
		workloads map[types.UID]kinds.Workload
		want      string
	}{
		{"no Workloads watched", nil, "held by scheduling gates kueue.x-k8s.io/admission"},
		{"no Workload yet", map[types.UID]kinds.Workload{}, "kueue.x-k8s.io/admission"},
		{"preempting", map[types.UID]kinds.Workload{"qwen3-7b6cd-a": {Name: "pod-a", Pending: "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"}},
			"held by scheduling gates kueue.x-k8s.io/admission; Kueue Workload pod-a: couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor gpu, 2 more needed. Pending the preemption of 1 workload(s)"},
		{"reserved", map[types.UID]kinds.Workload{"qwen3-7b6cd-a": {Name: "pod-a", ClusterQueue: "team-a"}}, "Kueue Workload pod-a: quota reserved in ClusterQueue team-a"},
		{"another pod's Workload", map[types.UID]kinds.Workload{"other": {Name: "pod-b", Pending: "x"}}, "kueue.x-k8s.io/admission"},
	} {
		w, _ := diagnosisWorld(t, 1, 0)
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

// The Admitted condition tells what Kueue did with a queued model's pods: waiting (with the
// nearest pod's position), preempting, admitted, admitted on borrowed quota; absent for a
// model Kueue does not queue, or where Kueue's Workloads are not watched.
func TestAdmittedCondition(t *testing.T) {
	gated := func(name string) *corev1.Pod {
		return pod(name, func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: KueueGate}}
		})
	}
	running := func(name string) *corev1.Pod { return pod(name, func(*corev1.Pod) {}) }
	kueue := Features{KueueWorkloads: true, KueueVisibility: true, KueueClusterQueues: true}
	borrowing := map[string]kinds.ClusterQueue{"team-a": {Name: "team-a", Borrowed: []kinds.Borrowed{{Flavor: "gpu", Resource: "nvidia.com/gpu", Amount: "2"}}}}
	for _, c := range []struct {
		name      string
		queue     string
		features  Features
		pods      []*corev1.Pod
		workloads map[types.UID]kinds.Workload
		cqs       map[string]kinds.ClusterQueue
		status    metav1.ConditionStatus // "" for absent
		reason    string
		message   string
		recheck   bool
	}{
		{name: "Kueue not watched", queue: "q", pods: []*corev1.Pod{gated("a")}},
		{name: "not queued", features: kueue, pods: []*corev1.Pod{running("a")}},
		{name: "no pods", queue: "q", features: kueue, status: metav1.ConditionUnknown, reason: ReasonNoPods},
		{name: "waiting, position unknown", queue: "q", features: kueue, pods: []*corev1.Pod{running("a"), gated("b")},
			workloads: map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}, "b": {Name: "wb", Pending: "insufficient quota"}},
			status:    metav1.ConditionFalse, reason: ReasonWaitingForAdmission, message: "1 of 2 pods wait for admission in LocalQueue q", recheck: true},
		{name: "waiting, nearest position", queue: "q", features: kueue, pods: []*corev1.Pod{gated("a"), gated("b")},
			workloads: map[types.UID]kinds.Workload{"a": {Name: "wa", Position: &kinds.QueuePosition{InLocalQueue: 3, InClusterQueue: 7}}, "b": {Name: "wb", Position: &kinds.QueuePosition{InLocalQueue: 1, InClusterQueue: 2}}},
			status:    metav1.ConditionFalse, reason: ReasonWaitingForAdmission,
			message: "2 of 2 pods wait for admission in LocalQueue q; the nearest has 1 workload ahead of it in its LocalQueue, 2 workloads in its ClusterQueue", recheck: true},
		{name: "gated without spec.queueName: no positions to read", features: kueue, pods: []*corev1.Pod{gated("a")},
			status: metav1.ConditionFalse, reason: ReasonWaitingForAdmission, message: "1 of 1 pods wait for admission"},
		{name: "preempting", queue: "q", features: kueue, pods: []*corev1.Pod{gated("a")},
			workloads: map[types.UID]kinds.Workload{"a": {Name: "wa", Pending: "couldn't assign flavors ... Pending the preemption of 1 workload(s)"}},
			status:    metav1.ConditionFalse, reason: ReasonPreempting, message: "Kueue is preempting other workloads to make room", recheck: true},
		{name: "admitted", queue: "q", features: kueue, pods: []*corev1.Pod{running("a"), running("b")},
			workloads: map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}, "b": {Name: "wb", ClusterQueue: "team-a"}},
			cqs:       map[string]kinds.ClusterQueue{"team-a": {Name: "team-a"}},
			status:    metav1.ConditionTrue, reason: ReasonAdmitted, message: "2 pods admitted by ClusterQueue team-a"},
		{name: "admitted on borrowed quota", queue: "q", features: kueue, pods: []*corev1.Pod{running("a")},
			workloads: map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}}, cqs: borrowing,
			status: metav1.ConditionTrue, reason: ReasonBorrowingQuota,
			message: "1 pod admitted by ClusterQueue team-a; ClusterQueue team-a borrows 2 nvidia.com/gpu (flavor gpu) from its cohort, which may reclaim it by preemption"},
	} {
		w, _ := diagnosisWorld(t, 1, 0)
		w.isvc.Spec.QueueName = c.queue
		w.obs.Pods, w.obs.Workloads, w.obs.ClusterQueues = c.pods, c.workloads, c.cqs
		out := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0), Features: c.features})
		got := meta.FindStatusCondition(out.Status.Conditions, crd.ConditionAdmitted)
		if c.status == "" {
			if got != nil {
				t.Errorf("%s: Admitted present: %+v", c.name, *got)
			}
			continue
		}
		if got == nil || got.Status != c.status || got.Reason != c.reason || !strings.Contains(got.Message, c.message) {
			t.Errorf("%s: Admitted %+v, want %s %s %q", c.name, got, c.status, c.reason, c.message)
			continue
		}
		if hasRecheck := out.Recheck > 0 && out.Recheck <= queuePositionsRecheck; c.recheck && !hasRecheck {
			t.Errorf("%s: waiting for a position without a recheck (%s)", c.name, out.Recheck)
		}
		if out.Status.Phase == crd.PhaseFailed {
			t.Errorf("%s: a queued model Failed", c.name)
		}
	}
}

// A pending pod's account in the Ready message carries its position where Kueue told it.
func TestWaitingMessageNamesPosition(t *testing.T) {
	got := kueueSays(kinds.Workload{Name: "wa", Pending: "couldn't assign flavors.", Position: &kinds.QueuePosition{InLocalQueue: 0, InClusterQueue: 4}}, true)
	want := "; Kueue Workload wa: couldn't assign flavors (0 workloads ahead of it in its LocalQueue, 4 workloads in its ClusterQueue)"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestWantsQueuePositions(t *testing.T) {
	isvc := &crd.InferenceService{Spec: crd.InferenceServiceSpec{QueueName: "q"}}
	on := Features{KueueWorkloads: true, KueueVisibility: true}
	pending := map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}, "b": {Name: "wb"}}
	admitted := map[types.UID]kinds.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}}
	if !WantsQueuePositions(isvc, on, pending) {
		t.Error("a pending Workload's position not wanted")
	}
	if WantsQueuePositions(isvc, on, admitted) || WantsQueuePositions(isvc, Features{KueueWorkloads: true}, pending) ||
		WantsQueuePositions(&crd.InferenceService{}, on, pending) {
		t.Error("positions wanted with nothing pending, no visibility API or no LocalQueue")
	}
}
