// Package vllmtest holds vLLM v0.11's logs as tests read them: a whole start, in its words,
// and the helpers that cut it short or stamp it as the kubelet does. The engine's own tests and
// the decision's (controller/reconcile) read the same start.
package vllmtest

import (
	"regexp"
	"strings"
	"time"
)

// stamp is vLLM's logger's "MM-DD hh:mm:ss" after its level.
var stamp = regexp.MustCompile(`(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d) \[`)

// The lines below are vLLM v0.11's, in its words (format strings of vllm-project/vllm at
// v0.11.0's branch point, file:line as v0.11.0 prints them), with the format verbs filled. The
// process prefixes carry the colour codes vLLM writes (vllm/utils _add_prefix).
const (
	Cyan  = "\x1b[1;36m"
	Reset = "\x1b[0;0m"
	API   = Cyan + "(APIServer pid=1)" + Reset + " "
	Core  = Cyan + "(EngineCore_DP0 pid=243)" + Reset + " "
)

// Start is a one-GPU start of Qwen/Qwen3-8B whose weights were not cached: 14 minutes
// of download in a 16-minute start. The container started at 14:00:00.
var Start = []string{
	"INFO 12-05 14:00:09 [__init__.py:216] Automatically detected platform cuda.",
	API + "INFO 12-05 14:00:12 [api_server.py:1839] vLLM API server version 0.11.0",
	API + "INFO 12-05 14:00:12 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'port': 8000, 'model': 'Qwen/Qwen3-8B'}",
	API + "INFO 12-05 14:00:20 [model.py:547] Resolved architecture: Qwen3ForCausalLM",
	API + "INFO 12-05 14:00:20 [model.py:1510] Using max model len 40960",
	"INFO 12-05 14:00:27 [__init__.py:216] Automatically detected platform cuda.",
	Core + "INFO 12-05 14:00:29 [core.py:644] Waiting for init message from front-end.",
	Core + "INFO 12-05 14:00:29 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B', dtype=torch.bfloat16, max_seq_len=40960, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name=Qwen/Qwen3-8B, enable_prefix_caching=True, chunked_prefill_enabled=True",
	Core + "INFO 12-05 14:00:31 [parallel_state.py:1208] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
	Core + "INFO 12-05 14:00:31 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
	Core + "INFO 12-05 14:00:32 [gpu_model_runner.py:2634] Loading model from scratch...",
	Core + "INFO 12-05 14:00:32 [cuda.py:366] Using Flash Attention backend on V1 engine.",
	Core + "INFO 12-05 14:00:32 [weight_utils.py:392] Using model weights format ['*.safetensors']",
	Core + "INFO 12-05 14:14:32 [weight_utils.py:413] Time spent downloading weights for Qwen/Qwen3-8B: 840.123456 seconds",
	Core,
	"Loading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]",
	Core,
	"Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:25<00:00,  5.01s/it]",
	Core,
	Core + "INFO 12-05 14:14:58 [default_loader.py:267] Loading weights took 25.07 seconds",
	Core + "INFO 12-05 14:14:59 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 867.532101 seconds",
	Core + "INFO 12-05 14:15:07 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/1f2e3d4c5b/rank_0_0/backbone for vLLM's torch.compile",
	Core + "INFO 12-05 14:15:07 [backends.py:559] Dynamo bytecode transform time: 7.85 s",
	Core + "INFO 12-05 14:15:13 [backends.py:197] Cache the graph for dynamic shape for later use",
	Core + "INFO 12-05 14:15:41 [backends.py:218] Compiling a graph for dynamic shape takes 33.41 s",
	Core + "INFO 12-05 14:15:49 [monitor.py:34] torch.compile takes 41.26 s in total",
	Core + "INFO 12-05 14:15:51 [gpu_worker.py:298] Available KV cache memory: 52.14 GiB",
	Core + "INFO 12-05 14:15:51 [kv_cache_utils.py:1087] GPU KV cache size: 379,648 tokens",
	Core + "INFO 12-05 14:15:51 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 9.27x",
	Core + "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:05<00:00, 12.10it/s]",
	Core + "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:03<00:00, 10.52it/s]",
	Core + "INFO 12-05 14:16:01 [gpu_model_runner.py:3480] Graph capturing finished in 10 secs, took 0.85 GiB",
	Core + "INFO 12-05 14:16:01 [core.py:210] init engine (profile, create kv cache, warmup model) took 61.84 seconds",
	API + "INFO 12-05 14:16:02 [loggers.py:147] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 23728",
	API + "INFO 12-05 14:16:03 [api_server.py:1634] Supported_tasks: ['generate']",
	API + "INFO 12-05 14:16:04 [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000",
	API + "INFO 12-05 14:16:04 [launcher.py:34] Available routes are:",
	API + "INFO 12-05 14:16:04 [launcher.py:42] Route: /health, Methods: GET",
	API + "INFO:     Started server process [1]",
	API + "INFO:     Waiting for application startup.",
	API + "INFO:     Application startup complete.",
	API + "INFO 12-05 14:16:14 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
	API + "INFO:     10.0.0.7:51234 - \"GET /health HTTP/1.1\" 200 OK",
}

// StartedAt is when Start's container started.
var StartedAt = time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)

// UpTo is Start to its first line containing s, included.
func UpTo(s string) []string {
	for i, l := range Start {
		if strings.Contains(l, s) {
			return append([]string(nil), Start[:i+1]...)
		}
	}
	panic(s)
}

// KubeletStamped is lines as read with timestamps: each line the kubelet's RFC 3339 time, from
// its vLLM stamp where it has one (with the given sub-second), else the last one's and 0.75 s.
func KubeletStamped(lines []string, frac string) []string {
	out := make([]string, len(lines))
	last := "2026-12-05T14:00:00"
	for i, l := range lines {
		if m := stamp.FindStringSubmatch(l); m != nil {
			last = "2026-" + strings.Replace(m[1], " ", "T", 1)
			out[i] = last + frac + "Z " + l
		} else {
			out[i] = last + ".75Z " + l
		}
	}
	return out
}
