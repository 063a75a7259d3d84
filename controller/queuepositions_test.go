package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"

	"github.com/example/inferenceservice-operator/controller/reconcile"
)

// pendingSummary is a PendingWorkloadsSummary as Kueue's visibility API returns it.
func pendingSummary(items ...map[string]any) *unstructured.Unstructured {
	list := make([]any, len(items))
	for i, it := range items {
		list[i] = it
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "visibility.kueue.x-k8s.io/v1beta2", "kind": "PendingWorkloadsSummary",
		"metadata": map[string]any{"name": "q", "namespace": "default"}, "items": list,
	}}
}

func pendingItem(name string, inLQ, inCQ int64) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "namespace": "default"},
		"localQueueName": "q", "priority": int64(1000), "positionInLocalQueue": inLQ, "positionInClusterQueue": inCQ}
}

// A waiting model's pending Workloads get their positions from one read of the LocalQueue's
// pendingworkloads, shared by the models of that queue for a period; an admitted Workload
// gets none, and a failed read leaves them all without one.
func TestQueuePositionsRead(t *testing.T) {
	isvc := newISVCObject(2)
	isvc.Spec.QueueName = "q"
	f := newFixture(t, isvc, nil)
	f.ctrl.features = reconcile.Features{KueueWorkloads: true, KueueVisibility: true}
	reads := 0
	var fail error
	f.dyn.PrependReactor("get", "localqueues", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "pendingworkloads" || a.GetNamespace() != "default" || a.(clienttesting.GetAction).GetName() != "q" {
			t.Errorf("unexpected read %s %s/%s", a.GetSubresource(), a.GetNamespace(), a.(clienttesting.GetAction).GetName())
		}
		reads++
		if fail != nil {
			return true, nil, fail
		}
		return true, pendingSummary(pendingItem("wb", 1, 3), pendingItem("other", 0, 0)), nil
	})
	workloads := func() map[types.UID]reconcile.Workload {
		return map[types.UID]reconcile.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}, "b": {Name: "wb", Pending: "short"}}
	}
	ws := workloads()
	f.ctrl.observeQueuePositions(context.Background(), isvc, ws, t0)
	if p := ws["b"].Position; p == nil || *p != (reconcile.QueuePosition{InLocalQueue: 1, InClusterQueue: 3}) {
		t.Fatalf("pending Workload's position: %+v", p)
	}
	if ws["a"].Position != nil {
		t.Fatalf("an admitted Workload given a position: %+v", ws["a"].Position)
	}
	f.ctrl.observeQueuePositions(context.Background(), isvc, workloads(), t0.Add(time.Second))
	if reads != 1 {
		t.Fatalf("%d reads within the period, want 1", reads)
	}
	fail = errors.New("the server is currently unable to handle the request")
	ws = workloads()
	f.ctrl.observeQueuePositions(context.Background(), isvc, ws, t0.Add(queuePositionsPeriod+time.Second))
	if reads != 2 || ws["b"].Position != nil {
		t.Fatalf("after a failed read: %d reads, position %+v", reads, ws["b"].Position)
	}
	// Nothing pending: no read.
	f.ctrl.observeQueuePositions(context.Background(), isvc, map[types.UID]reconcile.Workload{"a": {Name: "wa", ClusterQueue: "team-a"}}, t0.Add(time.Hour))
	if reads != 2 {
		t.Fatalf("read with nothing pending")
	}
}
