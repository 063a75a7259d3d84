// A node's sick GPUs: the node annotation kubelet.fake/gpu-fault, what the device plugin then
// reports (no allocatable GPU), and how the fake vLLM dies on such a node, running or starting.

package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// gpuFaultAnnotation on a node makes its GPUs fail: "ecc" (an uncorrectable ECC error) or
// "lost" (a GPU fell off the bus). Removing it heals the node.
const gpuFaultAnnotation = "kubelet.fake/gpu-fault"

// nodeGPUFault reads the annotation; an unknown value is no fault, as a typo must not look
// like a sick node.
func nodeGPUFault(node *v1.Node) proc.GPUFault {
	switch f := proc.GPUFault(strings.TrimSpace(strings.ToLower(node.Annotations[gpuFaultAnnotation]))); f {
	case proc.FaultECC, proc.FaultLost:
		return f
	}
	return proc.FaultNone
}

// gpuFault is the fault of the node's GPUs as last seen by the node informer.
func (k *kubelet) gpuFault(node string) proc.GPUFault {
	k.faultsMu.Lock()
	defer k.faultsMu.Unlock()
	return k.faults[node]
}

// followGPUFault applies the node's kubelet.fake/gpu-fault (watchNodes calls it on every add
// and update of a fake node): a changed fault reaches the pod workers of that node at once,
// and the node's allocatable GPUs follow it.
func (k *kubelet) followGPUFault(ctx context.Context, node *v1.Node) {
	f := nodeGPUFault(node)
	k.faultsMu.Lock()
	changed := k.faults[node.Name] != f
	k.faults[node.Name] = f
	k.faultsMu.Unlock()
	if changed {
		klog.InfoS("fake kubelet: node GPU fault", "node", node.Name, "fault", string(f))
		k.notifyNode(node.Name)
	}
	if patch := allocatablePatch(node, f); patch != nil {
		k.wg.Go(func() {
			_, err := k.client.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
			if err != nil && ctx.Err() == nil {
				klog.ErrorS(err, "fake kubelet: allocatable GPUs update failed", "node", node.Name)
			}
		})
	}
}

// allocatablePatch is the status patch that makes the node's allocatable GPUs what the
// device plugin reports: none while its GPUs are faulty (NVIDIA's plugin marks unhealthy
// devices, and the kubelet subtracts them), all of capacity otherwise. nil: already so. Every
// node update checks it, so a status write that restored the full count is undone at once.
func allocatablePatch(node *v1.Node, f proc.GPUFault) []byte {
	capacity, ok := node.Status.Capacity[gpuResource]
	if !ok {
		return nil
	}
	want := capacity.Value()
	if f != proc.FaultNone {
		want = 0
	}
	if have, ok := node.Status.Allocatable[gpuResource]; ok && have.Value() == want {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"allocatable": map[string]string{string(gpuResource): strconv.FormatInt(want, 10)}}})
	return patch
}

// notifyNode wakes the pod workers of node to apply its GPU fault.
func (k *kubelet) notifyNode(node string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, w := range k.workers {
		if w.node != node {
			continue
		}
		select {
		case w.faults <- struct{}{}:
		default: // one pending wake-up is enough: the worker reads the current fault
		}
	}
}

// gpuHolder is a process that holds GPUs: a fake model server (vllm.Server, sglang.Server).
type gpuHolder interface{ GPUFault(proc.GPUFault) }

// applyGPUFault kills the pod's running serving containers that hold GPUs when the node's
// GPUs are faulty; their exit goes through the usual crash and back-off, and each restart
// fails at start while the fault lasts (serverSpec).
func (ps *podState) applyGPUFault() {
	f := ps.k.gpuFault(ps.pod.Spec.NodeName)
	if f == proc.FaultNone {
		return
	}
	for _, c := range ps.ctrs {
		if ms, ok := c.srv.(gpuHolder); ok && c.state == csRunning && gpuCount(&c.spec) > 0 {
			ms.GPUFault(f)
		}
	}
}
