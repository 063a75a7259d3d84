package controller

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// walkWorld is a converged isvc whose Deployment has one ReplicaSet and pods in given states.
func walkWorld(t *testing.T, replicas int32, ready int32) (*world, *appsv1.ReplicaSet) {
	w := converged(t, replicas)
	d := w.obs.Deployment.DeepCopy()
	d.UID = "deploy-uid"
	d.Status.ReadyReplicas = ready
	w.obs.Deployment = d
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: "qwen3-7b6cd", Namespace: "default", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "qwen3", UID: "deploy-uid", Controller: ptr.To(true)}},
	}}
	w.obs.ReplicaSets = []*appsv1.ReplicaSet{rs}
	return w, rs
}

func pod(name string, mutate func(p *corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "qwen3-7b6cd", UID: "rs-uid", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "fake-node-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	mutate(p)
	return p
}

func running(started, ready bool, since time.Duration) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "vllm", Ready: ready, Started: ptr.To(started),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-since))}}}
}

func TestLayerWalk(t *testing.T) {
	crashed := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "torch.OutOfMemoryError: CUDA out of memory\nTraceback"}
	oom := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	cases := []struct {
		name       string
		rsFailure  string
		pods       []*corev1.Pod
		reason     string
		phase      crd.Phase
		msgContain string
	}{
		{
			name:      "quota exceeded on the ReplicaSet",
			rsFailure: `pods "qwen3-7b6cd-x2x9z" is forbidden: exceeded quota: team-a, requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8`,
			reason:    ReasonQuotaExceeded, phase: crd.PhaseFailed,
			msgContain: `ReplicaSet qwen3-7b6cd: pods "qwen3-7b6cd-x2x9z" is forbidden: exceeded quota: team-a`,
		},
		{
			name:      "LimitRange refusal",
			rsFailure: `pods "qwen3-7b6cd-x2x9z" is forbidden: maximum memory usage per Container is 4Gi, but limit is 8Gi`,
			reason:    ReasonLimitRangeRefused, phase: crd.PhaseFailed, msgContain: "maximum memory usage per Container",
		},
		{
			name:      "webhook refusal",
			rsFailure: `admission webhook "policy.example.com" denied the request: no`,
			reason:    ReasonPodCreationRefused, phase: crd.PhaseFailed, msgContain: "denied the request",
		},
		{
			name: "not enough GPUs",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
					Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."}}
			})},
			reason: ReasonInsufficientGPU, phase: crd.PhaseFailed, msgContain: "Pod qwen3-7b6cd-a: unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
		},
		{
			name: "taints",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
					Message: "0/4 nodes are available: 4 node(s) had untolerated taint {gpu: a100}."}}
			})},
			reason: ReasonUnschedulable, phase: crd.PhaseFailed, msgContain: "untolerated taint",
		},
		{
			name: "image pull back-off",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodPending
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
					Reason: "ImagePullBackOff", Message: `Back-off pulling image "vllm/vllm-openai:v9": ErrImagePull: not found`}}}}
			})},
			reason: ReasonImagePullFailed, phase: crd.PhaseFailed, msgContain: `container vllm: ImagePullBackOff: Back-off pulling image "vllm/vllm-openai:v9"`,
		},
		{
			name: "crash loop, with the last state and restarts, several pods",
			pods: []*corev1.Pod{
				pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 4, LastTerminationState: corev1.ContainerState{Terminated: crashed},
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=vllm"}}}}
				}),
				pod("qwen3-7b6cd-b", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 5, State: corev1.ContainerState{Terminated: crashed}}}
				}),
			},
			reason: ReasonCrashLoopBackOff, phase: crd.PhaseFailed,
			msgContain: "Pod qwen3-7b6cd-a container vllm: CrashLoopBackOff; last terminated: exit code 1 (Error): torch.OutOfMemoryError: CUDA out of memory, 4 restarts (and 1 more pods)",
		},
		{
			name: "OOMKilled, in either half of its cycle",
			pods: []*corev1.Pod{
				pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 2, LastTerminationState: corev1.ContainerState{Terminated: oom},
						State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
				}),
				pod("qwen3-7b6cd-b", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 2, State: corev1.ContainerState{Terminated: oom}}}
				}),
			},
			reason: ReasonOOMKilled, phase: crd.PhaseFailed, msgContain: "OOMKilled, raise spec.resources.limits.memory; last terminated: exit code 137 (OOMKilled), 2 restarts (and 1 more pods)",
		},
		{
			name: "restarted after a crash, running, not ready yet: still the crash loop",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				cs := running(true, false, time.Second)
				cs.RestartCount, cs.LastTerminationState.Terminated = 3, crashed
				p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
			})},
			reason: ReasonCrashLoopBackOff, phase: crd.PhaseFailed, msgContain: "restarted after a crash; last terminated: exit code 1 (Error)",
		},
		{
			name: "running but the readiness probe fails",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, false, 95*time.Second)}
			})},
			reason: ReasonReadinessProbeFailing, phase: crd.PhaseFailed, msgContain: "running since 2026-01-01T11:58:25Z but not ready: readiness probe on /health port 8000 failing",
		},
		{
			name: "still loading weights is not a failure",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{running(false, false, 10*time.Minute)}
			})},
			reason: ReasonStarting, phase: crd.PhaseProgressing, msgContain: "Pod qwen3-7b6cd-a: starting since",
		},
		{
			name:   "nothing more precise than the count",
			reason: ReasonReplicasNotReady, phase: crd.PhaseProgressing, msgContain: "Deployment qwen3: 0/2 replicas ready",
		},
	}
	// Each case runs on the objects as the API server has them and as the cache keeps them
	// (informers' transforms): the diagnosis must read only what the cache keeps.
	for _, cached := range []bool{false, true} {
		for _, c := range cases {
			name := c.name
			if cached {
				name += " (as cached)"
			}
			t.Run(name, func(t *testing.T) {
				w, rs := walkWorld(t, 2, 0)
				if c.rsFailure != "" {
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: c.rsFailure}}
				}
				w.obs.Pods = c.pods
				if cached {
					stripped, err := informers.StripReplicaSet(rs.DeepCopy())
					if err != nil {
						t.Fatal(err)
					}
					w.obs.ReplicaSets = []*appsv1.ReplicaSet{stripped.(*appsv1.ReplicaSet)}
					w.obs.Pods = nil
					for _, p := range c.pods {
						sp, err := informers.StripPod(p.DeepCopy())
						if err != nil {
							t.Fatal(err)
						}
						w.obs.Pods = append(w.obs.Pods, sp.(*corev1.Pod))
					}
				}
				out := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)})
				if len(out.Actions) != 0 {
					t.Fatalf("diagnosis must not cause actions: %s", verbs(out.Actions))
				}
				st := out.Status
				ready := findCond(st.Conditions, crd.ConditionReady)
				if st.Reason != c.reason || st.Phase != c.phase || ready.Reason != c.reason || !strings.Contains(ready.Message, c.msgContain) {
					t.Fatalf("got phase %s reason %s message:\n  %s\nwant phase %s reason %s containing:\n  %s", st.Phase, st.Reason, ready.Message, c.phase, c.reason, c.msgContain)
				}
			})
		}
	}
}

func findCond(cs []metav1.Condition, t string) metav1.Condition {
	for _, c := range cs {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

func TestMostBlockingFirstAllListed(t *testing.T) {
	w, rs := walkWorld(t, 3, 0)
	rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Message: "pods \"x\" is forbidden: exceeded quota: team-a"}}
	w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	})}
	st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
	msg := findCond(st.Conditions, crd.ConditionReady).Message
	q, c, n := strings.Index(msg, "exceeded quota"), strings.Index(msg, "CrashLoopBackOff"), strings.Index(msg, "0/3 replicas ready")
	if st.Reason != ReasonQuotaExceeded || q < 0 || c < q || n < c {
		t.Fatalf("want quota, then crash loop, then the count; got %s: %s", st.Reason, msg)
	}
}

func TestSurplusPodsDoNotPage(t *testing.T) {
	w, _ := walkWorld(t, 2, 2) // 2 ready: serving as asked
	w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-extra", func(p *corev1.Pod) {
		p.Spec.NodeName = ""
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "Insufficient nvidia.com/gpu"}}
	})}
	if st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status; st.Phase != crd.PhaseReady {
		t.Fatalf("an HPA surplus pod that cannot schedule made the model %s (%s)", st.Phase, st.Reason)
	}
}

func TestPodsOfOtherDeploymentsAreIgnored(t *testing.T) {
	w, _ := walkWorld(t, 1, 0)
	w.obs.Pods = []*corev1.Pod{pod("stranger", func(p *corev1.Pod) {
		p.OwnerReferences[0].UID = "other-rs"
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	})}
	if st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status; st.Reason != ReasonReplicasNotReady {
		t.Fatalf("reason %s from a pod this isvc does not own", st.Reason)
	}
}

// TestMessagesAreStableOverTime: with nothing changing, a later reconcile must compute the
// same status, or every resync of a failing isvc would be a write.
func TestMessagesAreStableOverTime(t *testing.T) {
	for _, cs := range []corev1.ContainerStatus{running(true, false, time.Minute), running(false, false, time.Minute)} {
		w, _ := walkWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{cs} })}
		a := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
		w.isvc.Status = a
		b := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0.Add(17 * time.Minute))}).Status
		if !statusEqual(&a, &b) {
			t.Fatalf("status moved with time alone:\n%+v\n%+v", a, b)
		}
	}
}
