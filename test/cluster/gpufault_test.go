// A node whose GPUs fail (kubelet.fake/gpu-fault): what a user sees of a model server on it,
// from kubectl, and that the node heals when the annotation goes.

package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine/vllm"
)

const eccLine = "RuntimeError: CUDA error: uncorrectable ECC error encountered"

// TestGPUFaultECC: an uncorrectable ECC error on the node of a serving pod kills its vLLM,
// every restart fails opening the device with the ECC error as the previous log's decisive
// line, and the node's allocatable GPUs drop to 0; removing the annotation restores them and
// the next restart serves again.
func TestGPUFaultECC(t *testing.T) {
	ns := namespace(t)
	apply(t, ns, servingPod("sick", vllmImage, "    readinessProbe:\n      httpGet: {path: /health, port: http}\n      periodSeconds: 1\n", ""))
	eventually(t, 90*time.Second, func() (bool, string) {
		s := podState(t, ns, "sick")
		return s == "Running/true/true/0", s + "\n" + events(t, ns, "sick")
	})
	node := jsonpath(t, ns, "pod/sick", "{.spec.nodeName}")
	gpus := func() string {
		out, _, _ := c.Kubectl(context.Background(), "get", "node", node, "-o", `jsonpath={.status.capacity.nvidia\.com/gpu}/{.status.allocatable.nvidia\.com/gpu}`)
		return out
	}
	if g := gpus(); g != "8/8" {
		t.Fatalf("node %s capacity/allocatable GPUs %q before the fault, want 8/8", node, g)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c.Kubectl(ctx, "annotate", "node", node, "kubelet.fake/gpu-fault-")
	})

	faultAt := time.Now()
	kubectl(t, "annotate", "node", node, "kubelet.fake/gpu-fault=ecc")
	eventually(t, 30*time.Second, func() (bool, string) {
		last := jsonpath(t, ns, "pod/sick", "{.status.containerStatuses[0].lastState.terminated.exitCode}/{.status.containerStatuses[0].lastState.terminated.reason}")
		return last == "1/Error", "lastState.terminated " + last + ", state " + podState(t, ns, "sick")
	})
	t.Logf("the running container died %v after the annotation", time.Since(faultAt).Round(100*time.Millisecond))
	eventually(t, 30*time.Second, func() (bool, string) {
		g := gpus()
		return g == "8/0", "capacity/allocatable " + g
	})
	out, _, err := c.Kubectl(context.Background(), "logs", "sick", "-n", ns, "--previous")
	if err != nil || !strings.Contains(out, eccLine) || vllm.DecisiveLine(out) != eccLine {
		t.Fatalf("logs --previous of the run the fault killed (decisive line %q, err %v):\n%s", vllm.DecisiveLine(out), err, out)
	}

	// The restarts fail at start, on the same root cause.
	eventually(t, 90*time.Second, func() (bool, string) {
		n := jsonpath(t, ns, "pod/sick", "{.status.containerStatuses[0].restartCount}")
		return n != "" && n != "0" && n != "1", "restartCount=" + n + ", state " + podState(t, ns, "sick")
	})
	out, _, err = c.Kubectl(context.Background(), "logs", "sick", "-n", ns, "--previous")
	if err != nil || vllm.DecisiveLine(out) != eccLine || strings.Contains(out, "Application startup complete.") {
		t.Fatalf("logs --previous of a restart on the sick node (decisive line %q, err %v):\n%s", vllm.DecisiveLine(out), err, out)
	}
	tail := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("kubectl logs --previous, last lines:\n%s", strings.Join(tail[max(0, len(tail)-18):], "\n"))
	t.Logf("kubectl get pod:\n%s", kubectl(t, "get", "pod", "sick", "-n", ns))

	kubectl(t, "annotate", "node", node, "kubelet.fake/gpu-fault-")
	eventually(t, 30*time.Second, func() (bool, string) {
		g := gpus()
		return g == "8/8", "capacity/allocatable " + g
	})
	eventually(t, 90*time.Second, func() (bool, string) {
		s := podState(t, ns, "sick")
		return strings.HasPrefix(s, "Running/true/true/"), s + "\n" + events(t, ns, "sick")
	})
}
