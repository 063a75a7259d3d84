package main

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodePartitioned(t *testing.T) {
	for v, want := range map[string]bool{"true": true, "TRUE": true, " true ": true, "": false, "false": false, "yes": false, "1": false} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{partitionAnnotation: v}}}
		if got := nodePartitioned(n); got != want {
			t.Errorf("%q: cut %v, want %v", v, got, want)
		}
	}
	var none *partitions
	if none.isCut("n") {
		t.Error("a kubelet without partitions cut a node")
	}
}

// TestPartitionStopsTheNodesWrites: while a node is cut its Lease is not renewed and a pod
// update does not reach its worker; when it comes back the node posts Ready at once and its
// pods are synced again.
func TestPartitionStopsTheNodesWrites(t *testing.T) {
	ctx, client, k := nodesKubelet(t, nodeConfig{count: 2}, 201)
	cut := &podWorker{node: nodeName(1), updates: make(chan *v1.Pod, 1), faults: make(chan struct{}, 1)}
	k.workers["p"] = cut
	if err := k.watchNodes(ctx, k.followPartition); err != nil {
		t.Fatal(err)
	}
	annotate := func(v string) { annotateFakeNode(t, client, nodeName(1), partitionAnnotation, v) }
	annotate("true")
	pollUntil(t, "the node cut", func() (bool, string) { return k.parts.isCut(nodeName(1)), "not cut" })
	if k.parts.isCut(nodeName(0)) {
		t.Fatal("the other node is cut too")
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "p"}, Spec: v1.PodSpec{NodeName: nodeName(1)}}
	k.sync(ctx, pod)
	select {
	case <-cut.updates:
		t.Fatal("a pod update reached a worker on a cut node")
	default:
	}

	before := time.Now()
	annotate("")
	pollUntil(t, "the node back, its Lease renewed", func() (bool, string) {
		l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(ctx, nodeName(1), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return !k.parts.isCut(nodeName(1)) && !l.Spec.RenewTime.Time.Before(before.Truncate(time.Microsecond)), "lease " + l.Spec.RenewTime.String()
	})
	k.sync(ctx, pod)
	select {
	case <-cut.updates:
	default:
		t.Fatal("a pod update did not reach the worker once the node came back")
	}
}
