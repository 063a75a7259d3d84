package sglang

import (
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// The crashes below are written as SGLang v0.5 logs them: the scheduler's
// "Scheduler hit an exception: " + traceback (managers/scheduler.py run_scheduler_process),
// then the launcher's sigquit_handler line; argparse's error for a bad flag.
const (
	logNotEnoughMemory = `[2025-12-05 14:02:57 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2805, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", line 1312, in init_memory_pool
    raise RuntimeError(
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.

[2025-12-05 14:02:57] Received sigquit from a child process. It usually means the child failed.
`
	logCUDAOOM = `[2025-12-05 14:02:40 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 2805, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, pp_rank, dp_rank)
  File "/usr/local/lib/python3.12/dist-packages/torch/nn/modules/module.py", line 1355, in convert
    return t.to(
           ^^^^^
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 23.55 GiB of which 512.00 MiB is free.

[2025-12-05 14:02:40] Received sigquit from a child process. It usually means the child failed.
Killed
`
	logBadArgument = `usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
                        [--host HOST] [--port PORT]
launch_server.py: error: unrecognized arguments: --foo
`
	logNoTraceback = `[2025-12-05 14:00:08] server_args=ServerArgs(model_path='x')
[2025-12-05 14:00:26 TP0] Load weight begin. avail mem=78.50 GB
Loading safetensors checkpoint shards:  40% Completed | 2/5 [00:08<00:12,  4.01s/it]
[2025-12-05 14:00:40] Received sigquit from a child process. It usually means the child failed.
`
)

func TestDecisiveLine(t *testing.T) {
	for _, c := range []struct{ name, log, want string }{
		{"not enough memory: the exception, not the launcher's pointer", logNotEnoughMemory, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."},
		{"CUDA out of memory", logCUDAOOM, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB."},
		{"unknown argument: argparse's error, not its usage", logBadArgument, "launch_server.py: error: unrecognized arguments: --foo"},
		{"no traceback: the last line before the sigquit", logNoTraceback, "Loading safetensors checkpoint shards:  40% Completed"},
		{"kubelet stamps", "2025-12-05T14:00:00Z " + strings.ReplaceAll(logNotEnoughMemory, "\n", "\n2025-12-05T14:00:00Z "), "RuntimeError: Not enough memory."},
		{"empty", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := SGLang{}.DecisiveLine(strings.Split(c.log, "\n"))
			if !strings.HasPrefix(got, c.want) || c.want == "" && got != "" {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
			if len(got) > engine.MaxLastWords {
				t.Fatalf("%d bytes", len(got))
			}
		})
	}
}
