package reconcile

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/informers/kinds"
)

// groupPod is a pod of group g of the LeaderWorkerSet qwen3, worker index i.
func groupPod(g, i int, mutate func(p *corev1.Pod)) *corev1.Pod {
	name := fmt.Sprintf("qwen3-%d", g)
	owner := "qwen3"
	if i > 0 {
		owner, name = name, fmt.Sprintf("qwen3-%d-%d", g, i)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			Labels:          map[string]string{kinds.InstanceLabel: "qwen3", kinds.LWSNameLabel: "qwen3", kinds.LWSGroupLabel: fmt.Sprint(g), kinds.LWSWorkerLabel: fmt.Sprint(i)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: owner, UID: types.UID("sts-" + owner), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("fake-node-%d", 2*g+i)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{running(true, true, 0)}},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// TestGroupReadiness: a group is ready when all its pods are, whatever LWS counts (it counts
// a group whose worker is pending); a worker that cannot be placed is reported with the
// scheduler's message.
func TestGroupReadiness(t *testing.T) {
	w := multiNodeWorld()
	w.apply(w.reconcile().Actions)
	l := w.obs.LeaderWorkerSet
	l.SetUID("lws-uid")
	unstructured.SetNestedField(l.Object, map[string]interface{}{"readyReplicas": int64(2), "replicas": int64(2), "updatedReplicas": int64(2)}, "status")
	pending := groupPod(1, 1, func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses = "", corev1.PodPending, nil
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}}
	})
	w.obs.Pods = []*corev1.Pod{groupPod(0, 0, nil), groupPod(0, 1, nil), groupPod(1, 0, nil), pending}
	out := w.reconcile()
	if out.Status.Replicas != 2 || out.Status.ReadyReplicas != 1 {
		t.Fatalf("replicas %d ready %d, want 2 groups, 1 ready", out.Status.Replicas, out.Status.ReadyReplicas)
	}
	if out.Status.Reason != ReasonInsufficientGPU || !strings.Contains(condMsg(out.Status, crd.ConditionReady), "Pod qwen3-1-1") ||
		!strings.Contains(condMsg(out.Status, crd.ConditionReady), "LeaderWorkerSet qwen3: 1/2 replicas ready") {
		t.Fatalf("reason %s: %s", out.Status.Reason, condMsg(out.Status, crd.ConditionReady))
	}
	w.obs.Pods[3] = groupPod(1, 1, nil)
	if out := w.reconcile(); out.Status.Phase != crd.PhaseReady || out.Status.ReadyReplicas != 2 {
		t.Fatalf("all groups ready: %s %d", out.Status.Phase, out.Status.ReadyReplicas)
	}
}

func condMsg(st crd.InferenceServiceStatus, t string) string {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Message
		}
	}
	return ""
}

// TestGroupCreationRefused: a group's pods refused by a ResourceQuota exist nowhere; the
// StatefulSet's FailedCreate, handed in by the I/O layer, is the cause, as a ReplicaSet's
// ReplicaFailure is for a Deployment, and the model looks again while pods are missing.
func TestGroupCreationRefused(t *testing.T) {
	w := multiNodeWorld()
	w.apply(w.reconcile().Actions)
	l := w.obs.LeaderWorkerSet
	l.SetUID("lws-uid")
	unstructured.SetNestedField(l.Object, map[string]interface{}{"readyReplicas": int64(1), "replicas": int64(2), "updatedReplicas": int64(2)}, "status")
	w.obs.Pods = []*corev1.Pod{groupPod(0, 0, nil), groupPod(0, 1, nil)}
	in := Input{ISVC: w.isvc, Ext: w.ext, Features: w.f, Observed: w.cached(), Now: w.now()}
	if !WantsGroupFailures(in) {
		t.Fatal("a model missing a group's pods does not read its StatefulSets' failures")
	}
	out := w.reconcile()
	if out.Status.Reason == ReasonQuotaExceeded || out.Recheck <= 0 || out.Recheck > groupFailuresRecheck {
		t.Fatalf("without the Events: reason %s, recheck %s", out.Status.Reason, out.Recheck)
	}
	refused := `create Pod qwen3-1 in StatefulSet qwen3 failed error: pods "qwen3-1" is forbidden: exceeded quota: gpus, requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, limited: requests.nvidia.com/gpu=16`
	w.obs.GroupFailures = map[string]string{"qwen3": refused}
	out = w.reconcile()
	if msg := condMsg(out.Status, crd.ConditionReady); out.Status.Reason != ReasonQuotaExceeded || !strings.Contains(msg, "StatefulSet qwen3: "+refused) {
		t.Fatalf("reason %s: %s", out.Status.Reason, msg)
	}
	// All pods there: nothing to read, whatever old Events say.
	w.obs.Pods = append(w.obs.Pods, groupPod(1, 0, nil), groupPod(1, 1, nil))
	if WantsGroupFailures(Input{ISVC: w.isvc, Ext: w.ext, Features: w.f, Observed: w.cached(), Now: w.now()}) {
		t.Fatal("failures read for a model with every pod")
	}
}

func TestIsGroupStatefulSet(t *testing.T) {
	for name, want := range map[string]bool{"big": true, "big-0": true, "big-12": true, "big-x": false, "bigger": false, "big-": false, "big-0-1": false, "other": false} {
		if got := IsGroupStatefulSet("big", name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
}

// The GPU metrics count a multi-node model's every pod: groups (the LeaderWorkerSet's, the
// HPA's choice) times the nodes of each.
func TestDesiredPods(t *testing.T) {
	w := multiNodeWorld()
	w.apply(w.reconcile().Actions)
	if got, want := DesiredPods(w.isvc, &w.ext, w.obs), int64(w.isvc.Spec.Replicas)*int64(w.ext.Nodes()); got != want {
		t.Fatalf("desired pods %d, want %d", got, want)
	}
	unstructured.SetNestedField(w.obs.LeaderWorkerSet.Object, int64(5), "spec", "replicas") // the HPA's
	if got, want := DesiredPods(w.isvc, &w.ext, w.obs), 5*int64(w.ext.Nodes()); got != want {
		t.Fatalf("desired pods %d after the HPA's scale, want %d", got, want)
	}
	one := newWorld(3)
	one.apply(one.reconcile().Actions)
	if got := DesiredPods(one.isvc, &one.ext, one.obs); got != 3 {
		t.Fatalf("one node: %d", got)
	}
}
