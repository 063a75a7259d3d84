package main

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
)

const (
	eccLine       = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
	noGPULine     = "RuntimeError: No CUDA GPUs are available"
	launchLine    = "RuntimeError: CUDA error: unspecified launch failure"
	engineInitErr = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"
	engineDeadErr = "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause."
)

// vtRootCause is the engine core's exception line: the last unprefixed-by-spaces line of its
// traceback, the one the API server's error points "above" to.
func vtRootCause(log *containerLog) string {
	cause := ""
	for _, l := range strings.Split(log.Render(logOptions{TailLines: -1}), "\n") {
		rest, ok := strings.CutPrefix(l, corePrefix())
		if ok && (strings.HasPrefix(rest, "RuntimeError: ") || strings.HasPrefix(rest, "torch.")) {
			cause = rest
		}
	}
	return cause
}

// TestGPUFaultStartFails: on a node with sick GPUs every start of vLLM fails opening the
// device: the engine core's root cause, the API server's start-up error pointing at it, exit 1.
func TestGPUFaultStartFails(t *testing.T) {
	for _, tc := range []struct {
		fault gpuFault
		cause string
	}{{faultECC, eccLine}, {faultLost, noGPULine}} {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel()
			s, log, _ := vtStart(t, modelServerSpec{Args: []string{"Qwen/Qwen3-0.6B"}, GPUFault: tc.fault}, serverConfig{})
			st := vtExit(t, s, log)
			if st.Code != 1 || st.Reason != "Error" {
				t.Fatalf("exit %+v, want 1 Error", st)
			}
			if got := vtRootCause(log); got != tc.cause {
				t.Fatalf("root cause %q, want %q; log:\n%s", got, tc.cause, log.Render(logOptions{TailLines: -1}))
			}
			if got := vtLastLine(log); got != apiPrefix+engineInitErr {
				t.Fatalf("last line %q", got)
			}
			if text := log.Render(logOptions{TailLines: -1}); strings.Contains(text, "Loading safetensors") {
				t.Fatalf("the engine loaded weights on a device it could not open:\n%s", text)
			}
		})
	}
}

// TestGPUFaultKillsServing: a serving engine whose GPU fails dies at once as vLLM does: the
// engine core's CUDA error, the API server's EngineDeadError, uvicorn's shutdown, exit 1, the
// port closed. One still loading fails its start.
func TestGPUFaultKillsServing(t *testing.T) {
	for _, tc := range []struct {
		fault gpuFault
		cause string
	}{{faultECC, eccLine}, {faultLost, launchLine}} {
		t.Run(string(tc.fault), func(t *testing.T) {
			t.Parallel()
			s, log, url := vtStart(t, modelServerSpec{Args: []string{"Qwen/Qwen3-0.6B"}}, serverConfig{})
			vtWaitStatus(t, "GET", url+"/health", "", 200)
			s.GPUFault(tc.fault)
			st := vtExit(t, s, log)
			text := log.Render(logOptions{TailLines: -1})
			if st.Code != 1 || st.Reason != "Error" {
				t.Fatalf("exit %+v, want 1 Error", st)
			}
			if got := vtRootCause(log); got != tc.cause {
				t.Fatalf("root cause %q, want %q; log:\n%s", got, tc.cause, text)
			}
			if !strings.Contains(text, apiPrefix+engineDeadErr) || !strings.HasSuffix(vtLastLine(log), "INFO:     Finished server process [1]") {
				t.Fatalf("no API server death after the engine's:\n%s", text)
			}
			if code, _ := vtCall("GET", url+"/health", ""); code != -1 {
				t.Fatalf("health after the fault: %d, want connection refused", code)
			}
			s.GPUFault(tc.fault) // an ended process says nothing more
			if got := vtLastLine(log); !strings.HasSuffix(got, "Finished server process [1]") {
				t.Fatalf("a second fault wrote %q", got)
			}
		})
	}
	t.Run("loading", func(t *testing.T) {
		t.Parallel()
		s, log, _ := vtStart(t, modelServerSpec{Args: []string{"Qwen/Qwen3-0.6B"}}, serverConfig{LoadTime: time.Minute})
		vtEventually(t, "loading", func() (bool, string) {
			return strings.Contains(log.Render(logOptions{TailLines: -1}), "Loading safetensors"), vtLastLine(log)
		})
		s.GPUFault(faultECC)
		if st := vtExit(t, s, log); st.Code != 1 || vtRootCause(log) != eccLine {
			t.Fatalf("exit %+v, root cause %q; log:\n%s", st, vtRootCause(log), log.Render(logOptions{TailLines: -1}))
		}
	})
}

// TestGPUFaultOtherCommand: a container that does not run vLLM never touched the GPU.
func TestGPUFaultOtherCommand(t *testing.T) {
	s, log, _ := vtStart(t, modelServerSpec{Command: []string{"sleep", "infinity"}}, serverConfig{})
	s.GPUFault(faultECC)
	select {
	case st := <-s.Exited():
		t.Fatalf("exit %+v; log:\n%s", st, log.Render(logOptions{TailLines: -1}))
	default:
	}
}

func TestNodeGPUFault(t *testing.T) {
	for v, want := range map[string]gpuFault{"ecc": faultECC, " LOST ": faultLost, "": faultNone, "xid79": faultNone} {
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
		fault gpuFault
		want  string
	}{
		{"sick", node("8", "8"), faultECC, `{"status":{"allocatable":{"nvidia.com/gpu":"0"}}}`},
		{"sick, already 0", node("8", "0"), faultLost, ""},
		{"healed", node("8", "0"), faultNone, `{"status":{"allocatable":{"nvidia.com/gpu":"8"}}}`},
		{"healthy", node("8", "8"), faultNone, ""},
		{"no GPUs", node("", ""), faultECC, ""},
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	k := newKubelet(client, kubeletConfig{}, 2, newIPAllocator(200))
	defer k.broadcaster.Shutdown()
	nc := nodeConfig{count: 2, cpu: resource.MustParse("32"), memory: resource.MustParse("256Gi"), gpus: 8, pods: 110}
	createFakeNodes(t, client, nc)
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
	vtEventually(t, "allocatable 0 on the sick node", func() (bool, string) {
		return allocatable(nodeName(1)) == "0" && k.gpuFault(nodeName(1)) == faultECC, allocatable(nodeName(1))
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
	if a := allocatable(nodeName(0)); a != "8" || k.gpuFault(nodeName(0)) != faultNone {
		t.Fatalf("the healthy node: allocatable %s, fault %q", a, k.gpuFault(nodeName(0)))
	}

	n, _ := client.CoreV1().Nodes().Get(ctx, nodeName(1), metav1.GetOptions{})
	n.Status = nc.nodeStatus(1, n.Status.Conditions)
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vtEventually(t, "a write of the full count undone", func() (bool, string) {
		return allocatable(nodeName(1)) == "0", allocatable(nodeName(1))
	})

	annotate("")
	vtEventually(t, "allocatable back to capacity", func() (bool, string) {
		return allocatable(nodeName(1)) == "8" && k.gpuFault(nodeName(1)) == faultNone, allocatable(nodeName(1))
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
