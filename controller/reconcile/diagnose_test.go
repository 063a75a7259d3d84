package reconcile

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
	"github.com/example/inferenceservice-operator/informers/kinds"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

// diagnosisWorld is a converged isvc whose Deployment has one ReplicaSet and pods in given states.
func diagnosisWorld(t *testing.T, replicas int32, ready int32) (*world, *appsv1.ReplicaSet) {
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

// unschedulablePod is a pod the scheduler has not placed, with its PodScheduled message.
func unschedulablePod(name, message string) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) { unschedulable(p, message) })
}

// unschedulable makes p pending and unplaced: the scheduler's condition with its message.
func unschedulable(p *corev1.Pod, message string) {
	pending(p)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: message}}
}

func running(started, ready bool, since time.Duration) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "vllm", Ready: ready, Started: ptr.To(started),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0.Add(-since))}}}
}

func TestLayerDiagnosis(t *testing.T) {
	crashed := &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "torch.OutOfMemoryError: CUDA out of memory\nTraceback"}
	oom := &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	completed := &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}
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
			name:      "the spec's ServiceAccount missing",
			rsFailure: `pods "qwen3-7b6cd-x2x9z" is forbidden: error looking up service account team-a/model-reader: serviceaccount "model-reader" not found`,
			reason:    ReasonPodCreationRefused, phase: crd.PhaseFailed,
			msgContain: `serviceaccount "model-reader" not found [create the ServiceAccount in the namespace, or change the InferenceService's spec.serviceAccountName]`,
		},
		{
			name:      "webhook refusal",
			rsFailure: `admission webhook "policy.example.com" denied the request: no`,
			reason:    ReasonPodCreationRefused, phase: crd.PhaseFailed, msgContain: "denied the request",
		},
		{
			name:   "not enough GPUs",
			pods:   []*corev1.Pod{unschedulablePod("qwen3-7b6cd-a", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod.")},
			reason: ReasonInsufficientGPU, phase: crd.PhaseFailed, msgContain: "Pod qwen3-7b6cd-a: unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
		},
		{
			name:   "taints",
			pods:   []*corev1.Pod{unschedulablePod("qwen3-7b6cd-a", "0/4 nodes are available: 4 node(s) had untolerated taint {gpu: a100}.")},
			reason: ReasonUntoleratedTaint, phase: crd.PhaseFailed, msgContain: "untolerated taint",
		},
		{
			name: "held by a scheduling gate",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
				p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
				p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated",
					Message: "Scheduling is blocked due to non-empty scheduling gates"}}
			})},
			reason: ReasonWaitingForAdmission, phase: crd.PhaseProgressing,
			msgContain: "Pod qwen3-7b6cd-a: waiting for admission: held by scheduling gates kueue.x-k8s.io/admission",
		},
		{
			name:   "node selector",
			pods:   []*corev1.Pod{unschedulablePod("qwen3-7b6cd-a", "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.")},
			reason: ReasonNodeSelectorMismatch, phase: crd.PhaseFailed, msgContain: "3 node(s) didn't match Pod's node affinity/selector",
		},
		{
			name:   "cache claim unbound",
			pods:   []*corev1.Pod{unschedulablePod("qwen3-7b6cd-a", "0/4 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")},
			reason: ReasonVolumeClaimUnbound, phase: crd.PhaseFailed, msgContain: "unbound immediate PersistentVolumeClaims",
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
			// SGLang's launcher kills its process tree when a scheduler dies, then exits 0: the
			// kubelet says Completed, and the server is down all the same.
			name: "a server that exited 0 (Completed), just exited and restarted",
			pods: []*corev1.Pod{
				pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 1, State: corev1.ContainerState{Terminated: completed}}}
				}),
				pod("qwen3-7b6cd-b", func(p *corev1.Pod) {
					cs := running(true, false, time.Second)
					cs.RestartCount, cs.LastTerminationState.Terminated = 1, completed
					p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
				}),
			},
			reason: ReasonCrashLoopBackOff, phase: crd.PhaseFailed,
			msgContain: "Pod qwen3-7b6cd-a container vllm: exited; last terminated: exit code 0 (Completed), 1 restarts (and 1 more pods)",
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
				w, rs := diagnosisWorld(t, 2, 0)
				if c.rsFailure != "" {
					rs.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue, Reason: "FailedCreate", Message: c.rsFailure}}
				}
				w.obs.Pods = c.pods
				if cached {
					stripped, err := kinds.StripReplicaSet(rs.DeepCopy())
					if err != nil {
						t.Fatal(err)
					}
					w.obs.ReplicaSets = []*appsv1.ReplicaSet{stripped.(*appsv1.ReplicaSet)}
					w.obs.Pods = nil
					for _, p := range c.pods {
						sp, err := kinds.StripPod(p.DeepCopy())
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
	w, rs := diagnosisWorld(t, 3, 0)
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
	w, _ := diagnosisWorld(t, 2, 2) // 2 ready: serving as asked
	w.obs.Pods = []*corev1.Pod{unschedulablePod("qwen3-7b6cd-extra", "Insufficient nvidia.com/gpu")}
	if st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status; st.Phase != crd.PhaseReady {
		t.Fatalf("an HPA surplus pod that cannot schedule made the model %s (%s)", st.Phase, st.Reason)
	}
}

func TestPodsOfOtherDeploymentsAreIgnored(t *testing.T) {
	w, _ := diagnosisWorld(t, 1, 0)
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
		w, _ := diagnosisWorld(t, 1, 0)
		w.obs.Pods = []*corev1.Pod{pod("qwen3-7b6cd-a", func(p *corev1.Pod) { p.Status.ContainerStatuses = []corev1.ContainerStatus{cs} })}
		a := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
		w.isvc.Status = a
		b := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0.Add(17 * time.Minute))}).Status
		if !statusEqual(&a, &b) {
			t.Fatalf("status moved with time alone:\n%+v\n%+v", a, b)
		}
	}
}

// The operator's readiness probe as template.go writes it, with the API server's defaults.
var opReadiness = &corev1.Probe{PeriodSeconds: 5, FailureThreshold: 3, TimeoutSeconds: 1, SuccessThreshold: 1}

// startedPod is a pod whose container started (startup probe passed) runningFor ago, seen
// started by the cache seenFor ago (0: first seen already started), and not ready.
func startedPod(runningFor, seenFor time.Duration, probe *corev1.Probe) *corev1.Pod {
	return pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "vllm", ReadinessProbe: probe}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, false, runningFor)}
		if seenFor > 0 {
			p.Annotations = map[string]string{kinds.StartedSinceAnnotation + "vllm": t0.Add(-seenFor).Format(time.RFC3339Nano)}
		}
	})
}

// TestReadinessWindow: a started pod whose readiness probe has not had its failure window is
// starting, not failing: a kubelet sets started before the first readiness probe runs.
func TestReadinessWindow(t *testing.T) {
	delayed := opReadiness.DeepCopy()
	delayed.InitialDelaySeconds = 60
	cases := []struct {
		name    string
		pod     *corev1.Pod
		reason  string
		phase   crd.Phase
		recheck time.Duration // when the status changes with time alone; 0: never
	}{
		{"just started, first readiness probe not run yet", startedPod(2*time.Second, 2*time.Second, opReadiness), ReasonStarting, crd.PhaseProgressing, 14 * time.Second},
		{"weights loaded for 30 minutes, started 2s ago", startedPod(30*time.Minute, 2*time.Second, opReadiness), ReasonStarting, crd.PhaseProgressing, 14 * time.Second},
		{"started 20s ago, never ready: past 3x5s+1s", startedPod(30*time.Minute, 20*time.Second, opReadiness), ReasonReadinessProbeFailing, crd.PhaseFailed, 0},
		{"first seen started (operator restart): counted from the container's start", startedPod(95*time.Second, 0, opReadiness), ReasonReadinessProbeFailing, crd.PhaseFailed, 0},
		{"initialDelaySeconds counts from the container's start", startedPod(30*time.Second, 30*time.Second, delayed), ReasonStarting, crd.PhaseProgressing, 46 * time.Second},
		{"initialDelaySeconds passed, window passed", startedPod(80*time.Second, 80*time.Second, delayed), ReasonReadinessProbeFailing, crd.PhaseFailed, 0},
		{"API server defaults (10s x 3 + 1s)", startedPod(25*time.Second, 25*time.Second, &corev1.Probe{}), ReasonStarting, crd.PhaseProgressing, 6 * time.Second},
		{"no readiness probe: ready once started, so failing at once", startedPod(2*time.Second, 2*time.Second, nil), ReasonReadinessProbeFailing, crd.PhaseFailed, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, _ := diagnosisWorld(t, 1, 0)
			w.obs.Pods = []*corev1.Pod{c.pod}
			in := Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}
			st := Reconcile(in).Status
			if st.Reason != c.reason || st.Phase != c.phase {
				t.Fatalf("got %s/%s, want %s/%s: %s", st.Phase, st.Reason, c.phase, c.reason, findCond(st.Conditions, crd.ConditionReady).Message)
			}
			if got := diagnosisRecheck(in); got != c.recheck {
				t.Fatalf("recheck in %v, want %v", got, c.recheck)
			}
		})
	}
}

// TestReadinessWindowAsCached: the same through the pod cache, whose transform stamps when it
// saw the container become started.
func TestReadinessWindowAsCached(t *testing.T) {
	loading := pod("qwen3-7b6cd-a", func(p *corev1.Pod) {
		p.Spec.Containers = []corev1.Container{{Name: "vllm", Image: "vllm", ReadinessProbe: opReadiness}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running(false, false, 30*time.Minute)}
	})
	prev, err := kinds.StripPodSeen(loading.DeepCopy(), nil, t0.Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	started := loading.DeepCopy()
	started.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, false, 30*time.Minute)}
	seenAt := t0.Add(-3 * time.Second)
	cached, err := kinds.StripPodSeen(started, prev.(*corev1.Pod), seenAt)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := diagnosisWorld(t, 1, 0)
	w.obs.Pods = []*corev1.Pod{cached.(*corev1.Pod)}
	for _, c := range []struct {
		at     time.Time
		reason string
	}{{t0, ReasonStarting}, {seenAt.Add(16 * time.Second), ReasonReadinessProbeFailing}} {
		if st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(c.at)}).Status; st.Reason != c.reason {
			t.Fatalf("at %s: %s/%s, want %s", c.at.Sub(seenAt), st.Phase, st.Reason, c.reason)
		}
	}
}

// rollWorld is a Deployment rolling from ReplicaSet rev 1 ("old") to rev 2 ("new").
func rollWorld(t *testing.T, replicas, ready int32) *world {
	w, rs := diagnosisWorld(t, replicas, ready)
	rs.Annotations = map[string]string{kinds.RevisionAnnotation: "2"}
	old := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: "qwen3-5f8aa", Namespace: "default", UID: "old-rs-uid", Annotations: map[string]string{kinds.RevisionAnnotation: "1"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "qwen3", UID: "deploy-uid", Controller: ptr.To(true)}},
	}}
	// Listed first: the current ReplicaSet is told by its revision, not by its place.
	w.obs.ReplicaSets = []*appsv1.ReplicaSet{old, rs}
	return w
}

func oldPod(name string, mutate func(p *corev1.Pod)) *corev1.Pod {
	return pod(name, func(p *corev1.Pod) {
		p.OwnerReferences[0].Name, p.OwnerReferences[0].UID = "qwen3-5f8aa", "old-rs-uid"
		mutate(p)
	})
}

func evicted(p *corev1.Pod) {
	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted",
		Message: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. "}
}

func crashing(p *corev1.Pod) {
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "vllm", RestartCount: 3,
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
		State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
}

func pending(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending }

// TestStalePodsDoNotDecide: a pod that no longer counts (terminated, or of an older
// ReplicaSet) is mentioned, and never decides the phase.
func TestStalePodsDoNotDecide(t *testing.T) {
	readyPod := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, true, time.Hour)}
	}
	cases := []struct {
		name     string
		pods     []*corev1.Pod
		reason   string
		phase    crd.Phase
		contains []string
	}{
		{
			name:   "scale-up after an eviction: the evicted pod was replaced",
			pods:   []*corev1.Pod{pod("qwen3-7b6cd-gone", evicted), pod("qwen3-7b6cd-a", readyPod), pod("qwen3-7b6cd-b", pending)},
			reason: ReasonStarting, phase: crd.PhaseProgressing,
			contains: []string{"Pod qwen3-7b6cd-b: starting since", "Pod qwen3-7b6cd-gone: evicted: The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. (terminated, replaced: not counted)"},
		},
		{
			name:   "a failed pod of an older ReplicaSet",
			pods:   []*corev1.Pod{oldPod("qwen3-5f8aa-x", evicted), pod("qwen3-7b6cd-a", readyPod), pod("qwen3-7b6cd-b", pending)},
			reason: ReasonStarting, phase: crd.PhaseProgressing, contains: []string{"Pod qwen3-5f8aa-x: evicted"},
		},
		{
			name:   "the previous revision crash-loops while the fix rolls out",
			pods:   []*corev1.Pod{oldPod("qwen3-5f8aa-x", crashing), pod("qwen3-7b6cd-b", pending)},
			reason: ReasonStarting, phase: crd.PhaseProgressing, contains: []string{"Pod qwen3-5f8aa-x container vllm: CrashLoopBackOff", "(previous revision: not counted)"},
		},
		{
			name: "a terminal pod that failed otherwise",
			pods: []*corev1.Pod{pod("qwen3-7b6cd-gone", func(p *corev1.Pod) {
				p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "UnexpectedAdmissionError", Message: "Allocate failed due to no healthy devices"}
			}), pod("qwen3-7b6cd-b", pending)},
			reason: ReasonStarting, phase: crd.PhaseProgressing, contains: []string{"Pod qwen3-7b6cd-gone: failed: UnexpectedAdmissionError Allocate failed due to no healthy devices (terminated, replaced: not counted)"},
		},
		{
			name:   "the current ReplicaSet's live pods still decide",
			pods:   []*corev1.Pod{oldPod("qwen3-5f8aa-x", evicted), pod("qwen3-7b6cd-gone", evicted), pod("qwen3-7b6cd-a", crashing)},
			reason: ReasonCrashLoopBackOff, phase: crd.PhaseFailed, contains: []string{"Pod qwen3-7b6cd-a container vllm: CrashLoopBackOff", "(and 1 more pods)"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := rollWorld(t, 2, 1)
			w.obs.Pods = c.pods
			st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
			msg := findCond(st.Conditions, crd.ConditionReady).Message
			if st.Reason != c.reason || st.Phase != c.phase {
				t.Fatalf("got %s/%s, want %s/%s: %s", st.Phase, st.Reason, c.phase, c.reason, msg)
			}
			for _, s := range c.contains {
				if !strings.Contains(msg, s) {
					t.Fatalf("message does not mention %q:\n  %s", s, msg)
				}
			}
		})
	}
}

// TestBlockedRolloutWhileServing: new pods that cannot run are reported at once, as the
// rollout's cause (Progressing), while the previous pods serve and Ready stays True.
func TestBlockedRolloutWhileServing(t *testing.T) {
	cases := []struct {
		name        string
		newPod      func(p *corev1.Pod)
		stuck       bool
		reason      string
		progressing metav1.ConditionStatus
		held        bool // a transient status the progress hold may keep back
		contains    string
	}{
		{name: "new pod crash-loops", newPod: crashing, reason: ReasonCrashLoopBackOff, progressing: metav1.ConditionFalse,
			contains: "Pod qwen3-7b6cd-a container vllm: CrashLoopBackOff; last terminated: exit code 1 (Error), 3 restarts; Deployment qwen3: rolling out generation 2"},
		{name: "new pod cannot schedule", newPod: func(p *corev1.Pod) {
			unschedulable(p, "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.")
		}, reason: ReasonInsufficientGPU, progressing: metav1.ConditionFalse, contains: "Insufficient nvidia.com/gpu"},
		{name: "new pod loading weights: the rollout only takes time", newPod: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running(false, false, time.Minute)}
		}, reason: ReasonRolloutInProgress, progressing: metav1.ConditionTrue, held: true, contains: "Deployment qwen3: rolling out generation 2"},
		{name: "the Deployment's deadline passed", newPod: func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{running(false, false, time.Minute)}
		}, stuck: true, reason: ReasonProgressDeadlineExceeded, progressing: metav1.ConditionFalse, contains: "exceeded its progress deadline"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := rollWorld(t, 2, 2)
			stored := w.isvc.Status // Ready, generation 1
			w.isvc.Generation = 2
			d := w.obs.Deployment.DeepCopy()
			d.Generation, d.Status.ObservedGeneration = 2, 2
			d.Status.Replicas, d.Status.UpdatedReplicas = 3, 1 // two old pods serve, one surge pod
			if c.stuck {
				d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
					Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "qwen3-7b6cd" has timed out progressing.; exceeded its progress deadline`}}
			}
			w.obs.Deployment = d
			ready := func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{running(true, true, time.Hour)}
			}
			w.obs.Pods = []*corev1.Pod{oldPod("qwen3-5f8aa-x", ready), oldPod("qwen3-5f8aa-y", ready), pod("qwen3-7b6cd-a", c.newPod)}
			st := Reconcile(Input{ISVC: w.isvc, Observed: w.obs, Now: metav1.NewTime(t0)}).Status
			rc, pc := findCond(st.Conditions, crd.ConditionReady), findCond(st.Conditions, crd.ConditionProgressing)
			if rc.Status != metav1.ConditionTrue || rc.Reason != ReasonAvailable || rc.Message != "2/2 replicas ready" {
				t.Fatalf("the old pods serve, Ready says %s/%s: %s", rc.Status, rc.Reason, rc.Message)
			}
			if st.Phase != crd.PhaseProgressing || st.Reason != c.reason || pc.Status != c.progressing || pc.Reason != c.reason || !strings.Contains(pc.Message, c.contains) {
				t.Fatalf("got phase %s reason %s, Progressing %s/%s: %s\nwant %s, Progressing %s containing %q", st.Phase, st.Reason, pc.Status, pc.Reason, pc.Message, c.reason, c.progressing, c.contains)
			}
			if Transient(&st) != c.held {
				t.Fatalf("transient %v, want %v", Transient(&st), c.held)
			}
			reason, msg, warn := NewWarning(&stored, &st)
			if warn != !c.held || warn && (reason != c.reason || msg != pc.Message) {
				t.Fatalf("Warning Event %v %s %q", warn, reason, msg)
			}
		})
	}
}

// TestNewWarning: one Warning Event per new blocking reason, whether Ready or Progressing
// carries it; none when only the message moves.
func TestNewWarning(t *testing.T) {
	isvc := newWorld(1).isvc
	ready := statusWith(isvc, 1)
	down := statusWith(isvc, 0, Cause{RankCrash, ReasonCrashLoopBackOff, "Pod a: CrashLoopBackOff, 3 restarts"})
	downLater := statusWith(isvc, 0, Cause{RankCrash, ReasonCrashLoopBackOff, "Pod a: CrashLoopBackOff, 4 restarts"})
	blocked := statusWith(isvc, 1, Cause{RankServing + RankCrash, ReasonCrashLoopBackOff, "Pod b: CrashLoopBackOff, 1 restarts"})
	for _, c := range []struct {
		name           string
		stored, next   crd.InferenceServiceStatus
		reason, prefix string
	}{
		{"down", ready, down, ReasonCrashLoopBackOff, "Pod a:"},
		{"the same cause, a new count", down, downLater, "", ""},
		{"a blocked rollout while serving", ready, blocked, ReasonCrashLoopBackOff, "Pod b:"},
		{"back to Ready", down, ready, "", ""},
		{"a starting model", ready, statusWith(isvc, 0, Cause{RankStarting, ReasonStarting, "x"}), "", ""},
	} {
		reason, msg, ok := NewWarning(&c.stored, &c.next)
		if ok != (c.reason != "") || reason != c.reason || !strings.HasPrefix(msg, c.prefix) {
			t.Errorf("%s: got %v %s %q, want %s %q", c.name, ok, reason, msg, c.reason, c.prefix)
		}
	}
}
