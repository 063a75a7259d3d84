package evidence

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/crd"
	"github.com/example/inferenceservice-operator/queue"
)

func creating(name string, scheduled time.Time) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodPending,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(scheduled)}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}}
}

// Events are read only for pods still being created past the threshold, each once per period
// while it stays (the first three by name), by the pod's UID; a refusal is counted and leaves
// the status as without the read; a model whose pods started forgets them.
func TestPodEventsReadOncePerPeriod(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "default"}, InvolvedObject: corev1.ObjectReference{UID: "p-a"},
		Type: corev1.EventTypeWarning, Reason: "FailedMount", Message: "MountVolume.SetUp failed", FirstTimestamp: metav1.NewTime(t0), LastTimestamp: metav1.NewTime(t0)}
	kube := fake.NewSimpleClientset(ev)
	reads := map[string]int{}
	r := New(Config{Kube: kube, CountEventRead: func(result string) { reads[result]++ }})
	isvc := &crd.InferenceService{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "default"}}
	key := queue.Key{Namespace: "default", Name: "m"}
	obs := reconcile.Observed{Pods: []*corev1.Pod{creating("p-e", t0), creating("p-d", t0), creating("p-c", t0), creating("p-b", t0), creating("p-a", t0)}}
	observe := func(at time.Duration) map[types.UID][]reconcile.PodEvent {
		got, _ := r.podEvents(context.Background(), key, reconcile.Input{ISVC: isvc, Observed: obs, Now: metav1.NewTime(t0.Add(at)),
			Features: reconcile.Features{CreatingEvidenceAfter: 2 * time.Minute}})
		return got
	}
	lists := func() (n int, selectors []string) {
		for _, a := range kube.Actions() {
			if l, ok := a.(k8stesting.ListAction); ok && a.GetResource().Resource == "events" {
				n++
				selectors = append(selectors, l.GetListRestrictions().Fields.String())
			}
		}
		kube.ClearActions()
		return n, selectors
	}
	if got := observe(time.Minute); got != nil {
		t.Fatalf("read before the threshold: %v", got)
	}
	got := observe(3 * time.Minute)
	n, sel := lists()
	if n != 3 || sel[0] != "involvedObject.uid=p-a" || len(got["p-a"]) == 0 || got["p-a"][0].Reason != "FailedMount" || got["p-d"] != nil {
		t.Fatalf("past the threshold: %d reads %v, events %v", n, sel, got)
	}
	observe(4 * time.Minute)
	if n, _ := lists(); n != 0 {
		t.Fatalf("%d reads within the period", n)
	}
	observe(5 * time.Minute)
	if n, _ := lists(); n != 3 {
		t.Fatalf("%d reads after the period, want 3", n)
	}
	kube.PrependReactor("list", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "", fmt.Errorf("denied"))
	})
	if got := observe(8 * time.Minute); got["p-a"] != nil || reads["forbidden"] != 3 || reads["ok"] != 6 {
		t.Fatalf("refused: %v, counts %v", got, reads)
	}
	obs.Pods = nil
	observe(9 * time.Minute)
	if last, _ := r.events.get(key); last.v["p-a"].v != nil || len(last.v) != 0 {
		t.Fatal("a pod no longer being created is still remembered")
	}
}
