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
)

// gpuFaultAnnotation on a node makes its GPUs fail: "ecc" (an uncorrectable ECC error) or
// "lost" (a GPU fell off the bus). Removing it heals the node.
const gpuFaultAnnotation = "kubelet.fake/gpu-fault"

type gpuFault string

const (
	faultNone gpuFault = ""
	faultECC  gpuFault = "ecc"
	faultLost gpuFault = "lost"
)

// nodeGPUFault reads the annotation; an unknown value is no fault, as a typo must not look
// like a sick node.
func nodeGPUFault(node *v1.Node) gpuFault {
	switch f := gpuFault(strings.TrimSpace(strings.ToLower(node.Annotations[gpuFaultAnnotation]))); f {
	case faultECC, faultLost:
		return f
	}
	return faultNone
}

// runningError is what torch raises in a process whose GPU fails under it.
func (f gpuFault) runningError() string {
	if f == faultLost {
		return "RuntimeError: CUDA error: unspecified launch failure"
	}
	return "RuntimeError: CUDA error: uncorrectable ECC error encountered"
}

// cudaHints are the lines torch appends to every CUDA error it raises.
var cudaHints = []string{
	"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
	"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
	"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
	"",
}

// startupTraceback is the engine core's traceback when its worker cannot open the device:
// torch's lazy CUDA init finds no device left on the bus; an ECC-poisoned device fails the
// first CUDA call, setting the device.
func (f gpuFault) startupTraceback() []string {
	lines := []string{"Traceback (most recent call last):",
		`  File "` + pyLib + `/vllm/v1/engine/core.py", line 699, in run_engine_core`,
		"    engine_core = EngineCoreProc(*args, **kwargs)",
		`  File "` + pyLib + `/vllm/v1/executor/uniproc_executor.py", line 54, in _init_executor`,
		"    self.collective_rpc(\"init_device\")",
		`  File "` + pyLib + `/vllm/v1/worker/gpu_worker.py", line 165, in init_device`,
		"    current_platform.set_device(self.device)",
		`  File "` + pyLib + `/vllm/platforms/cuda.py", line 80, in set_device`,
		"    torch.cuda.set_device(device)",
		`  File "` + pyLib + `/torch/cuda/__init__.py", line 567, in set_device`,
		"    torch._C._cuda_setDevice(device)",
	}
	if f == faultLost {
		return append(lines,
			`  File "`+pyLib+`/torch/cuda/__init__.py", line 372, in _lazy_init`,
			"    torch._C._cuda_init()",
			"RuntimeError: No CUDA GPUs are available")
	}
	lines = append(lines, "RuntimeError: CUDA error: uncorrectable ECC error encountered")
	return append(lines, cudaHints...)
}

// failGPUStart ends a starting process on a sick GPU: the engine core's root cause, then the
// API server's start-up failure pointing at it, exit 1 (as gpuOOM).
func (s *modelServer) failGPUStart(f gpuFault) {
	s.core("ERROR", "core.py:708", "EngineCore failed to start.")
	s.raw(corePrefix(), f.startupTraceback()...)
	s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

// GPUFault is the process's GPU failing under it: a serving engine dies as crash() tells it,
// with the fault's CUDA error; one still starting fails its start. A process that is not vLLM
// (another command) never touched the GPU and lives on.
func (s *modelServer) GPUFault(f gpuFault) {
	s.stopMu.Lock()
	serving := s.srv != nil
	if s.done || s.args == nil || f == faultNone {
		s.stopMu.Unlock()
		return
	}
	if !serving {
		// the loading goroutine stops at its next wait; its last progress line may follow
		s.stopMu.Unlock()
		s.failGPUStart(f)
		return
	}
	s.stopMu.Unlock()
	s.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.")
	s.raw(corePrefix(), append([]string{"Traceback (most recent call last):",
		`  File "` + pyLib + `/vllm/v1/engine/core.py", line 701, in run_engine_core`,
		"    engine_core.run_busy_loop()",
		`  File "` + pyLib + `/vllm/v1/worker/gpu_model_runner.py", line 2258, in execute_model`,
		"    valid_sampled_token_ids = sampled_token_ids.tolist()",
		f.runningError()}, cudaHints...)...)
	s.engineDeadShutdown()
}

// engineDeadShutdown is the API server noticing its engine died while serving: its own
// error, uvicorn's shutdown, exit 1.
func (s *modelServer) engineDeadShutdown() {
	s.api("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.")
	s.raw(apiPrefix, "Traceback (most recent call last):",
		`  File "`+pyLib+`/vllm/v1/engine/async_llm.py", line 439, in output_handler`,
		"    outputs = await engine_core.get_output_async()",
		"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
	s.uvicorn("Shutting down")
	s.uvicorn("Waiting for application shutdown.")
	s.uvicorn("Application shutdown complete.")
	s.uvicorn("Finished server process [1]")
	s.exit(exitStatus{Code: 1, Reason: "Error"})
}

// gpuFault is the fault of the node's GPUs as last seen by the node informer.
func (k *kubelet) gpuFault(node string) gpuFault {
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
func allocatablePatch(node *v1.Node, f gpuFault) []byte {
	capacity, ok := node.Status.Capacity[gpuResource]
	if !ok {
		return nil
	}
	want := capacity.Value()
	if f != faultNone {
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

// applyGPUFault kills the pod's running serving containers that hold GPUs when the node's
// GPUs are faulty; their exit goes through the usual crash and back-off, and each restart
// fails at start while the fault lasts (serverSpec).
func (ps *podState) applyGPUFault() {
	f := ps.k.gpuFault(ps.pod.Spec.NodeName)
	if f == faultNone {
		return
	}
	for _, c := range ps.ctrs {
		if ms, ok := c.srv.(*modelServer); ok && c.state == csRunning && gpuCount(&c.spec) > 0 {
			ms.GPUFault(f)
		}
	}
}
