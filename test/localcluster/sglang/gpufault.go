// How the fake SGLang dies on a sick GPU (the kubelet reads the fault from its node's
// kubelet.fake/gpu-fault annotation): at start, a scheduler cannot open its device; serving,
// torch's CUDA error kills the scheduler and the launcher follows. The CUDA texts are torch's,
// the same under vLLM; the frames are SGLang's scheduler's.

package sglang

import (
	"context"
	"net/http"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// cudaHints are the lines torch appends to every CUDA error it raises.
var cudaHints = []string{
	"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
	"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
	"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
}

// gpuFaultAtStart is a scheduler failing to set its device: a GPU fallen off the bus leaves
// none; an ECC-poisoned one fails the first CUDA call.
func (s *Server) gpuFaultAtStart(f proc.GPUFault) {
	frames := append(append([]string(nil), schedulerFrames...),
		`  File "`+srcDir+`/model_executor/model_runner.py", line 610, in init_torch_distributed`,
		"    torch.get_device_module(self.device).set_device(self.gpu_id)",
		`  File "`+pyLib+`/torch/cuda/__init__.py", line 567, in set_device`,
		"    torch._C._cuda_setDevice(device)")
	if f == proc.FaultLost {
		s.schedulerDied(append(frames,
			`  File "`+pyLib+`/torch/cuda/__init__.py", line 372, in _lazy_init`,
			"    torch._C._cuda_init()"), "RuntimeError: No CUDA GPUs are available")
		return
	}
	s.schedulerDied(frames, append([]string{"RuntimeError: CUDA error: uncorrectable ECC error encountered"}, cudaHints...)...)
}

// GPUFault is the process's GPU failing under it: a serving scheduler dies with the fault's
// CUDA error; one still starting fails its start. A process that is not SGLang's launcher
// never touched the GPU and lives on.
func (s *Server) GPUFault(f proc.GPUFault) {
	s.life.Lock()
	serving := s.eng != nil
	if s.life.Over() || s.args == nil || f == proc.FaultNone {
		s.life.Unlock()
		return
	}
	s.life.Unlock()
	if !serving {
		s.gpuFaultAtStart(f)
		return
	}
	msg := "RuntimeError: CUDA error: uncorrectable ECC error encountered"
	if f == proc.FaultLost {
		msg = "RuntimeError: CUDA error: unspecified launch failure"
	}
	s.schedulerDied([]string{
		`  File "` + srcDir + `/managers/scheduler.py", line 2917, in run_scheduler_process`,
		"    scheduler.event_loop_overlap()",
		`  File "` + srcDir + `/managers/scheduler.py", line 1001, in event_loop_overlap`,
		"    self.process_batch_result(tmp_batch, tmp_result)",
		`  File "` + srcDir + `/managers/scheduler_output_processor_mixin.py", line 216, in process_batch_result_decode`,
		"    next_token_ids = next_token_ids.tolist()",
	}, append([]string{msg}, cudaHints...)...)
}

// stopContext is the request's context, also cancelled when the process ends; r nil: the
// server's own request. The caller cancels it when done.
func (s *Server) stopContext(r *http.Request) (context.Context, context.CancelFunc) {
	parent := context.Background()
	if r != nil {
		parent = r.Context()
	}
	ctx, cancel := context.WithCancel(parent)
	go func() {
		select {
		case <-s.life.Stopped():
		case <-ctx.Done():
		}
		cancel()
	}()
	return ctx, cancel
}

// sleep waits d unless the request or the process ends first; false: it ended.
func (s *Server) sleep(r *http.Request, d time.Duration) bool {
	ctx := context.Background()
	if r != nil {
		ctx = r.Context()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.life.Stopped():
		return false
	}
}

// sleepCtx waits d unless ctx ends first.
func (s *Server) sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
