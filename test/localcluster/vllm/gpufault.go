// How the fake vLLM dies on a sick GPU (the kubelet reads the fault from its node's
// kubelet.fake/gpu-fault annotation, gpufault.go in the kubelet): at start, the engine core
// cannot open the device; serving, torch's CUDA error kills the engine and the API server follows.

package vllm

import "github.com/example/inferenceservice-operator/test/localcluster/proc"

// runningError is what torch raises in a process whose GPU fails under it.
func runningError(f proc.GPUFault) string {
	if f == proc.FaultLost {
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
func startupTraceback(f proc.GPUFault) []string {
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
	if f == proc.FaultLost {
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
func (s *Server) failGPUStart(f proc.GPUFault) {
	s.core("ERROR", "core.py:708", "EngineCore failed to start.")
	s.raw(corePrefix(), startupTraceback(f)...)
	s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

// GPUFault is the process's GPU failing under it: a serving engine dies as crash() tells it,
// with the fault's CUDA error; one still starting fails its start. A process that is not vLLM
// (another command) never touched the GPU and lives on.
func (s *Server) GPUFault(f proc.GPUFault) {
	s.life.Lock()
	serving := s.life.Serving()
	if s.life.Over() || s.args == nil || f == proc.FaultNone {
		s.life.Unlock()
		return
	}
	if !serving {
		// the loading goroutine stops at its next wait; its last progress line may follow
		s.life.Unlock()
		s.failGPUStart(f)
		return
	}
	s.life.Unlock()
	s.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.")
	s.raw(corePrefix(), append([]string{"Traceback (most recent call last):",
		`  File "` + pyLib + `/vllm/v1/engine/core.py", line 701, in run_engine_core`,
		"    engine_core.run_busy_loop()",
		`  File "` + pyLib + `/vllm/v1/worker/gpu_model_runner.py", line 2258, in execute_model`,
		"    valid_sampled_token_ids = sampled_token_ids.tolist()",
		runningError(f)}, cudaHints...)...)
	s.engineDeadShutdown()
}

// engineDeadShutdown is the API server noticing its engine died while serving: its own
// error, uvicorn's shutdown, exit 1.
func (s *Server) engineDeadShutdown() {
	s.api("ERROR", "async_llm.py:480", "AsyncLLM output_handler failed.")
	s.raw(apiPrefix, "Traceback (most recent call last):",
		`  File "`+pyLib+`/vllm/v1/engine/async_llm.py", line 439, in output_handler`,
		"    outputs = await engine_core.get_output_async()",
		"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
	s.uvicorn("Shutting down")
	s.uvicorn("Waiting for application shutdown.")
	s.uvicorn("Application shutdown complete.")
	s.uvicorn("Finished server process [1]")
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}
