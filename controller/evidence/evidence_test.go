package evidence

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newISVC is a one-replica model of one GPU.
func newISVC() *crd.InferenceService {
	return &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "qwen3", Namespace: "default", UID: "isvc-uid", Generation: 1},
		Spec: crd.InferenceServiceSpec{Model: "Qwen/Qwen3-0.6B", Replicas: 1, GPUsPerReplica: ptr.To[int32](1)}}
}

// calls lists the API calls made, as "verb resource[/subresource]", typed then dynamic.
func calls(kube *fake.Clientset, dyn *dynamicfake.FakeDynamicClient) string {
	var out []string
	for _, a := range append(kube.Actions(), dyn.Actions()...) {
		s := a.GetVerb() + " " + a.GetResource().Resource
		if sub := a.GetSubresource(); sub != "" {
			s += "/" + sub
		}
		out = append(out, s)
	}
	kube.ClearActions()
	dyn.ClearActions()
	return strings.Join(out, ", ")
}

// Read reads only the evidence the diagnosis wants, sets it on the caches' view, and says when
// to look again; Forget drops a deleted model's reads, so the next Read reads afresh.
func TestReadThenForget(t *testing.T) {
	kube := fake.NewClientset()
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	r := New(Config{Kube: kube, Dynamic: dyn, Nodes: nodeList{}, Queue: queue.New(queue.DefaultConfig("test"), nil)})
	key := queue.Key{Namespace: "default", Name: "qwen3"}
	isvc := newISVC()
	started := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-1", Namespace: "default", UID: "p-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	in := func(at time.Duration, pods ...*corev1.Pod) reconcile.Input {
		return reconcile.Input{ISVC: isvc, Observed: reconcile.Observed{Pods: pods}, Now: metav1.NewTime(t0.Add(at)),
			Features: reconcile.Features{CreatingEvidenceAfter: 2 * time.Minute}}
	}

	ev, again := r.Read(context.Background(), key, in(0, started))
	if got := calls(kube, dyn); got != "" || again != 0 || ev.PodEvents != nil || ev.LastWords != nil || ev.GPUSurvey != nil || ev.GroupFailures != nil {
		t.Fatalf("a model with nothing to diagnose: calls %q, again %v, evidence %+v", got, again, ev)
	}

	pod := creating("p-a", t0)
	ev, again = r.Read(context.Background(), key, in(3*time.Minute, pod))
	if got := calls(kube, dyn); got != "list events" || again != 2*time.Minute {
		t.Fatalf("a pod still being created: calls %q, look again in %v", got, again)
	}
	var obs reconcile.Observed
	ev.AddTo(&obs)
	if events, ok := obs.PodEvents["p-a"]; !ok || events == nil {
		t.Fatalf("the pod's Events not set on the view: %+v", obs.PodEvents)
	}
	r.Read(context.Background(), key, in(4*time.Minute, pod))
	if got := calls(kube, dyn); got != "" {
		t.Fatalf("read again within the period: %q", got)
	}
	r.Forget(key)
	r.Read(context.Background(), key, in(4*time.Minute, pod))
	if got := calls(kube, dyn); got != "list events" {
		t.Fatalf("after Forget: calls %q, want the pod's Events read afresh", got)
	}
}
