package main

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

func TestNodeGPUFault(t *testing.T) {
	for v, want := range map[string]proc.GPUFault{"ecc": proc.FaultECC, " LOST ": proc.FaultLost, "": proc.FaultNone, "xid79": proc.FaultNone} {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{gpuFaultAnnotation: v}}}
		if got := nodeGPUFault(n); got != want {
			t.Errorf("%q: %q, want %q", v, got, want)
		}
	}
}

// TestAllocatablePatch: a sick node's allocatable GPUs are 0 and come back to capacity when it
// heals; nothing is written when they already are what the device plugin reports.
func TestAllocatablePatch(t *testing.T) {
	node := func(capacity, allocatable string) *v1.Node {
		n := &v1.Node{Status: v1.NodeStatus{Capacity: v1.ResourceList{}, Allocatable: v1.ResourceList{}}}
		if capacity != "" {
			n.Status.Capacity[gpuResource] = resource.MustParse(capacity)
		}
		if allocatable != "" {
			n.Status.Allocatable[gpuResource] = resource.MustParse(allocatable)
		}
		return n
	}
	for _, tc := range []struct {
		name  string
		node  *v1.Node
		fault proc.GPUFault
		want  string
	}{
		{"sick", node("8", "8"), proc.FaultECC, `{"status":{"allocatable":{"nvidia.com/gpu":"0"}}}`},
		{"sick, already 0", node("8", "0"), proc.FaultLost, ""},
		{"healed", node("8", "0"), proc.FaultNone, `{"status":{"allocatable":{"nvidia.com/gpu":"8"}}}`},
		{"healthy", node("8", "8"), proc.FaultNone, ""},
		{"no GPUs", node("", ""), proc.FaultECC, ""},
	} {
		if got := string(allocatablePatch(tc.node, tc.fault)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestGPUFaultFollowsNode: the fake kubelet's node informer zeroes a sick node's allocatable
// GPUs, undoes a status write that restores them while the fault lasts (a heartbeat racing
// the fault), wakes that node's pod workers, and restores the GPUs when the node heals.
func TestGPUFaultFollowsNode(t *testing.T) {
	nc := nodeConfig{count: 2, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110}
	ctx, client, k := nodesKubelet(t, nc, 200)
	sick := &podWorker{node: nodeName(1), faults: make(chan struct{}, 1)}
	other := &podWorker{node: nodeName(0), faults: make(chan struct{}, 1)}
	k.workers["sick"], k.workers["other"] = sick, other
	if err := k.watchNodes(ctx, k.followGPUFault); err != nil {
		t.Fatal(err)
	}
	allocatable := func(name string) string {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		q := n.Status.Allocatable[gpuResource]
		return q.String()
	}
	annotate := func(v string) { annotateFakeNode(t, client, nodeName(1), gpuFaultAnnotation, v) }

	annotate("ecc")
	pollUntil(t, "allocatable 0 on the sick node", func() (bool, string) {
		return allocatable(nodeName(1)) == "0" && k.gpuFault(nodeName(1)) == proc.FaultECC, allocatable(nodeName(1))
	})
	select {
	case <-sick.faults:
	default:
		t.Fatal("the sick node's pod worker was not woken")
	}
	select {
	case <-other.faults:
		t.Fatal("another node's pod worker was woken")
	default:
	}
	if a := allocatable(nodeName(0)); a != "8" || k.gpuFault(nodeName(0)) != proc.FaultNone {
		t.Fatalf("the healthy node: allocatable %s, fault %q", a, k.gpuFault(nodeName(0)))
	}

	n, _ := client.CoreV1().Nodes().Get(ctx, nodeName(1), metav1.GetOptions{})
	n.Status = nc.nodeStatus(1, n.Status.Conditions)
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "a write of the full count undone", func() (bool, string) {
		return allocatable(nodeName(1)) == "0", allocatable(nodeName(1))
	})

	annotate("")
	pollUntil(t, "allocatable back to capacity", func() (bool, string) {
		return allocatable(nodeName(1)) == "8" && k.gpuFault(nodeName(1)) == proc.FaultNone, allocatable(nodeName(1))
	})
}

// createFakeNodes creates nc's nodes, labelled as the kubelet's, with their status.
func createFakeNodes(t *testing.T, client kubernetes.Interface, nc nodeConfig) {
	t.Helper()
	for i := 0; i < nc.count; i++ {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName(i), Labels: map[string]string{fakeNodeLabel: "true"}}, Status: nc.nodeStatus(i, nil)}
		if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// annotateFakeNode leaves the node one annotation, key=v, or none when v is empty.
func annotateFakeNode(t *testing.T, client kubernetes.Interface, node, key, v string) {
	t.Helper()
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{}
	if v != "" {
		n.Annotations[key] = v
	}
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
