package reconcile

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// The lines below are vLLM v0.11's, in its words (format strings of vllm-project/vllm at
// v0.11.0's branch point, file:line as v0.11.0 prints them), with the format verbs filled. The
// process prefixes carry the colour codes vLLM writes (vllm/utils _add_prefix).
const (
	cyan  = "\x1b[1;36m"
	reset = "\x1b[0;0m"
	api   = cyan + "(APIServer pid=1)" + reset + " "
	core  = cyan + "(EngineCore_DP0 pid=243)" + reset + " "
)

// v011Start is a one-GPU start of Qwen/Qwen3-8B whose weights were not cached: 14 minutes
// of download in a 16-minute start. The container started at 14:00:00.
var v011Start = []string{
	"INFO 12-05 14:00:09 [__init__.py:216] Automatically detected platform cuda.",
	api + "INFO 12-05 14:00:12 [api_server.py:1839] vLLM API server version 0.11.0",
	api + "INFO 12-05 14:00:12 [utils.py:233] non-default args: {'model_tag': 'Qwen/Qwen3-8B', 'port': 8000, 'model': 'Qwen/Qwen3-8B'}",
	api + "INFO 12-05 14:00:20 [model.py:547] Resolved architecture: Qwen3ForCausalLM",
	api + "INFO 12-05 14:00:20 [model.py:1510] Using max model len 40960",
	"INFO 12-05 14:00:27 [__init__.py:216] Automatically detected platform cuda.",
	core + "INFO 12-05 14:00:29 [core.py:644] Waiting for init message from front-end.",
	core + "INFO 12-05 14:00:29 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-8B', speculative_config=None, tokenizer='Qwen/Qwen3-8B', dtype=torch.bfloat16, max_seq_len=40960, tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, seed=0, served_model_name=Qwen/Qwen3-8B, enable_prefix_caching=True, chunked_prefill_enabled=True",
	core + "INFO 12-05 14:00:31 [parallel_state.py:1208] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0, TP rank 0, EP rank 0",
	core + "INFO 12-05 14:00:31 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
	core + "INFO 12-05 14:00:32 [gpu_model_runner.py:2634] Loading model from scratch...",
	core + "INFO 12-05 14:00:32 [cuda.py:366] Using Flash Attention backend on V1 engine.",
	core + "INFO 12-05 14:00:32 [weight_utils.py:392] Using model weights format ['*.safetensors']",
	core + "INFO 12-05 14:14:32 [weight_utils.py:413] Time spent downloading weights for Qwen/Qwen3-8B: 840.123456 seconds",
	core,
	"Loading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]",
	core,
	"Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:25<00:00,  5.01s/it]",
	core,
	core + "INFO 12-05 14:14:58 [default_loader.py:267] Loading weights took 25.07 seconds",
	core + "INFO 12-05 14:14:59 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 867.532101 seconds",
	core + "INFO 12-05 14:15:07 [backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/1f2e3d4c5b/rank_0_0/backbone for vLLM's torch.compile",
	core + "INFO 12-05 14:15:07 [backends.py:559] Dynamo bytecode transform time: 7.85 s",
	core + "INFO 12-05 14:15:13 [backends.py:197] Cache the graph for dynamic shape for later use",
	core + "INFO 12-05 14:15:41 [backends.py:218] Compiling a graph for dynamic shape takes 33.41 s",
	core + "INFO 12-05 14:15:49 [monitor.py:34] torch.compile takes 41.26 s in total",
	core + "INFO 12-05 14:15:51 [gpu_worker.py:298] Available KV cache memory: 52.14 GiB",
	core + "INFO 12-05 14:15:51 [kv_cache_utils.py:1087] GPU KV cache size: 379,648 tokens",
	core + "INFO 12-05 14:15:51 [kv_cache_utils.py:1091] Maximum concurrency for 40,960 tokens per request: 9.27x",
	core + "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:05<00:00, 12.10it/s]",
	core + "Capturing CUDA graphs (decode, FULL): 100%|██████████| 35/35 [00:03<00:00, 10.52it/s]",
	core + "INFO 12-05 14:16:01 [gpu_model_runner.py:3480] Graph capturing finished in 10 secs, took 0.85 GiB",
	core + "INFO 12-05 14:16:01 [core.py:210] init engine (profile, create kv cache, warmup model) took 61.84 seconds",
	api + "INFO 12-05 14:16:02 [loggers.py:147] Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: 23728",
	api + "INFO 12-05 14:16:03 [api_server.py:1634] Supported_tasks: ['generate']",
	api + "INFO 12-05 14:16:04 [api_server.py:1912] Starting vLLM API server 0 on http://0.0.0.0:8000",
	api + "INFO 12-05 14:16:04 [launcher.py:34] Available routes are:",
	api + "INFO 12-05 14:16:04 [launcher.py:42] Route: /health, Methods: GET",
	api + "INFO:     Started server process [1]",
	api + "INFO:     Waiting for application startup.",
	api + "INFO:     Application startup complete.",
	api + "INFO 12-05 14:16:14 [loggers.py:127] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 0.0%",
	api + "INFO:     10.0.0.7:51234 - \"GET /health HTTP/1.1\" 200 OK",
}

var startedAt = time.Date(2026, 12, 5, 14, 0, 0, 0, time.UTC)

// upTo is v011Start to its first line containing s, included.
func upTo(s string) []string {
	for i, l := range v011Start {
		if strings.Contains(l, s) {
			return append([]string(nil), v011Start[:i+1]...)
		}
	}
	panic(s)
}

// kubeletStamped is lines as read with timestamps: each line the kubelet's RFC 3339 time, from
// its vLLM stamp where it has one (with the given sub-second), else the last one's and 0.75 s.
func kubeletStamped(lines []string, frac string) []string {
	out := make([]string, len(lines))
	last := "2026-12-05T14:00:00"
	for i, l := range lines {
		if m := vllmLine.FindStringSubmatch(ansiEscape.ReplaceAllString(l, "")); m != nil {
			last = "2026-" + strings.Replace(m[1], " ", "T", 1)
			out[i] = last + frac + "Z " + l
		} else {
			out[i] = last + ".75Z " + l
		}
	}
	return out
}

type wantPhase struct {
	name    string
	seconds float64
	source  string // a part of the Source line
	going   bool
}

func TestStartPhasesOf(t *testing.T) {
	full := []wantPhase{
		{PhaseProcessStart, 31, "Starting to load model Qwen/Qwen3-8B...", false},
		{PhaseWeightsDownload, 840.123456, "Time spent downloading weights for Qwen/Qwen3-8B: 840.123456 seconds", false},
		{PhaseWeightsLoad, 25.07, "Loading weights took 25.07 seconds", false},
		{PhaseModelLoad, 867.532101 - 840.123456 - 25.07, "Model loading took 15.2683 GiB and 867.532101 seconds", false},
		{PhaseCompile, 41.26, "torch.compile takes 41.26 s in total", false},
		{PhaseCUDAGraphs, 10, "Graph capturing finished in 10 secs, took 0.85 GiB", false},
		{PhaseEngineInit, 61.84 - 41.26 - 10, "init engine (profile, create kv cache, warmup model) took 61.84 seconds", false},
		{PhaseAPIServer, 3, "Application startup complete.", false},
		{PhaseServing, 964, "Application startup complete.", false},
	}
	// the same, read with the kubelet's timestamps: uvicorn's line has its own time
	stamped := append([]wantPhase(nil), full...)
	stamped[0].seconds, stamped[7].seconds, stamped[8].seconds = 31.25, 3.5, 964.75

	restart := append(upTo("Loading safetensors checkpoint shards:   0%"),
		core+"ERROR 12-05 14:14:40 [core.py:708] EngineCore failed to start.",
		core+"Traceback (most recent call last):",
		core+"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
		api+"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
		// the second run: the weights are on the volume now, no download
		"INFO 12-05 14:15:10 [__init__.py:216] Automatically detected platform cuda.",
		api+"INFO 12-05 14:15:13 [api_server.py:1839] vLLM API server version 0.11.0",
		"INFO 12-05 14:15:25 [__init__.py:216] Automatically detected platform cuda.",
		core+"INFO 12-05 14:15:27 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
		core+"INFO 12-05 14:15:28 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		core+"INFO 12-05 14:15:41 [default_loader.py:267] Loading weights took 12.40 seconds",
		core+"INFO 12-05 14:15:42 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 14.102355 seconds",
		core+"INFO 12-05 14:15:50 [backends.py:164] Directly load the compiled graph(s) for dynamic shape from the cache, took 6.912 s",
		core+"INFO 12-05 14:15:51 [monitor.py:34] torch.compile takes 9.31 s in total",
		core+"INFO 12-05 14:15:53 [kv_cache_utils.py:1087] GPU KV cache size: 379,648 tokens",
		core+"INFO 12-05 14:16:02 [gpu_model_runner.py:3480] Graph capturing finished in 9 secs, took 0.85 GiB",
		core+"INFO 12-05 14:16:02 [core.py:210] init engine (profile, create kv cache, warmup model) took 20.15 seconds",
		api+"INFO 12-05 14:16:05 [launcher.py:42] Route: /health, Methods: GET",
		api+"INFO:     Application startup complete.",
	)

	// tensor parallelism: the API server, the engine core and two workers write at once, each
	// line whole; the engine waits for the slower worker
	w0, w1 := cyan+"(Worker_TP0 pid=310)"+reset+" ", cyan+"(Worker_TP1 pid=311)"+reset+" "
	interleaved := []string{
		api + "INFO 12-05 14:00:12 [api_server.py:1839] vLLM API server version 0.11.0",
		core + "INFO 12-05 14:00:29 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-32B', tensor_parallel_size=2, enforce_eager=False, kv_cache_dtype=auto",
		w1 + "INFO 12-05 14:00:40 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...",
		w0 + "INFO 12-05 14:00:40 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...",
		w0 + "INFO 12-05 14:00:41 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		api + "INFO 12-05 14:00:45 [loggers.py:127] Waiting for the engine",
		w1 + "INFO 12-05 14:00:41 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		w0 + "INFO 12-05 14:01:41 [default_loader.py:267] Loading weights took 60.12 seconds",
		w1 + "INFO 12-05 14:02:01 [default_loader.py:267] Loading weights took 80.50 seconds",
		w0 + "INFO 12-05 14:01:42 [gpu_model_runner.py:2653] Model loading took 30.6012 GiB and 61.000000 seconds",
		w1 + "INFO 12-05 14:02:02 [gpu_model_runner.py:2653] Model loading took 30.6012 GiB and 81.250000 seconds",
		w0 + "INFO 12-05 14:02:30 [monitor.py:34] torch.compile takes 27.00 s in total",
		w1 + "INFO 12-05 14:02:31 [monitor.py:34] torch.compile takes 28.00 s in total",
		core + "INFO 12-05 14:02:33 [kv_cache_utils.py:1087] GPU KV cache size: 310,000 tokens",
		w1 + "INFO 12-05 14:02:45 [gpu_model_runner.py:3480] Graph capturing finished in 12 secs, took 1.02 GiB",
		w0 + "INFO 12-05 14:02:44 [gpu_model_runner.py:3480] Graph capturing finished in 11 secs, took 1.02 GiB",
		core + "INFO 12-05 14:02:46 [core.py:210] init engine (profile, create kv cache, warmup model) took 43.90 seconds",
		api + "INFO 12-05 14:02:48 [launcher.py:42] Route: /health, Methods: GET",
		api + "INFO:     Application startup complete.",
	}

	eager := []string{
		"(APIServer pid=1) INFO 12-05 14:00:12 [api_server.py:1839] vLLM API server version 0.11.0",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:29 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/Qwen3-8B', enforce_eager=True, kv_cache_dtype=auto",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:31 [gpu_model_runner.py:2602] Starting to load model /models/Qwen3-8B...",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:56 [default_loader.py:267] Loading weights took 24.50 seconds",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:57 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 25.900000 seconds",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:01:04 [gpu_worker.py:298] Available KV cache memory: 53.00 GiB",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:01:05 [kv_cache_utils.py:1087] GPU KV cache size: 385,920 tokens",
	}

	// the fake vLLM of test/localcluster, as it logs (vllm_run.go): no colours, no compile,
	// no graphs
	fake := []string{
		"INFO 12-05 14:00:01 [__init__.py:216] Automatically detected platform cuda.",
		"(APIServer pid=1) INFO 12-05 14:00:01 [api_server.py:1842] vLLM API server version 0.11.0",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:01 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-0.6B...",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:03 [weight_utils.py:392] Time spent downloading weights for Qwen/Qwen3-0.6B: 2.001234 seconds",
		"Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 0.50s/it]",
		"(EngineCore_DP0 pid=243) ",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:04 [default_loader.py:267] Loading weights took 1.00 seconds",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:04 [gpu_model_runner.py:2653] Model loading took 1.1201 GiB and 1.000000 seconds",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:04 [gpu_worker.py:298] Available KV cache memory: 70.84 GiB",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:04 [kv_cache_utils.py:1087] GPU KV cache size: 663,168 tokens",
		"(EngineCore_DP0 pid=243) INFO 12-05 14:00:04 [core.py:210] init engine (profile, create kv cache, warmup model) took 1.00 seconds",
		"(APIServer pid=1) INFO 12-05 14:00:04 [launcher.py:42] Route: /health, Methods: GET",
		"(APIServer pid=1) INFO:     Application startup complete.",
	}

	newYear := []string{
		"(APIServer pid=1) INFO 12-31 23:59:58 [api_server.py:1839] vLLM API server version 0.11.0",
		"(EngineCore_DP0 pid=243) INFO 01-01 00:00:20 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
	}

	cases := []struct {
		name    string
		log     []string
		started time.Time
		want    []wantPhase
		since   time.Time // of the phase still going
	}{
		{"a whole start", v011Start, startedAt, full, time.Time{}},
		{"read with the kubelet's timestamps", kubeletStamped(v011Start, ".25"), startedAt, stamped, time.Time{}},
		{"stamps a run before the container's start are its previous run's",
			append([]string{"2026-12-05T13:59:58.5Z (APIServer pid=1) INFO:     Application startup complete."}, kubeletStamped(v011Start, ".25")...),
			startedAt, stamped, time.Time{}},
		{"cut short in the download: silent while it lasts", upTo("Using model weights format"), startedAt, []wantPhase{
			{PhaseProcessStart, 31, "Starting to load model", false},
			{PhaseWeightsDownload, 0, "Using model weights format ['*.safetensors']", true},
		}, time.Date(2026, 12, 5, 14, 0, 32, 0, time.UTC)},
		{"cut short loading the shards, read with timestamps",
			kubeletStamped(upTo("Loading safetensors checkpoint shards: 100%"), ".5"), startedAt, []wantPhase{
				{PhaseProcessStart, 31.5, "Starting to load model", false},
				{PhaseWeightsDownload, 840.123456, "Time spent downloading", false},
				{PhaseWeightsLoad, 0.25, "Time spent downloading", true},
			}, time.Date(2026, 12, 5, 14, 14, 32, 5e8, time.UTC)},
		{"tqdm's bar, carriage returns and all, after its process's prefix", append(upTo("Time spent downloading"),
			core+"\rLoading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:  20% Completed | 1/5 [00:05<00:20,  5.01s/it]"),
			startedAt, []wantPhase{full[0], full[1],
				{PhaseWeightsLoad, 0, "Time spent downloading", true},
			}, time.Date(2026, 12, 5, 14, 14, 32, 0, time.UTC)},
		{"cut short in torch.compile", upTo("Compiling a graph for dynamic shape"), startedAt, []wantPhase{
			full[0], full[1], full[2], full[3],
			{PhaseCompile, 42, "Model loading took", true},
		}, time.Date(2026, 12, 5, 14, 14, 59, 0, time.UTC)},
		{"cut short capturing the graphs", upTo("Capturing CUDA graphs (decode"), startedAt, []wantPhase{
			full[0], full[1], full[2], full[3], full[4],
			{PhaseCUDAGraphs, 0, "GPU KV cache size: 379,648 tokens", true},
		}, time.Date(2026, 12, 5, 14, 15, 51, 0, time.UTC)},
		{"cut short starting the API server", upTo("Route: /health"), startedAt, append(append([]wantPhase(nil), full[:7]...),
			wantPhase{PhaseAPIServer, 3, "init engine", true}), time.Date(2026, 12, 5, 14, 16, 1, 0, time.UTC)},
		{"no line of the engine yet", upTo("Using max model len"), startedAt, []wantPhase{
			{PhaseProcessStart, 20, "", true},
		}, startedAt},
		{"a restart: the last run's, from its own first line", restart, startedAt, []wantPhase{
			{PhaseProcessStart, 17, "Starting to load model", false},
			{PhaseWeightsLoad, 12.40, "Loading weights took 12.40 seconds", false},
			{PhaseModelLoad, 14.102355 - 12.40, "Model loading took", false},
			{PhaseCompile, 9.31, "torch.compile takes 9.31 s in total", false},
			{PhaseCUDAGraphs, 9, "Graph capturing finished in 9 secs", false},
			{PhaseEngineInit, 20.15 - 9.31 - 9, "init engine", false},
			{PhaseAPIServer, 3, "Application startup complete.", false},
			{PhaseServing, 55, "Application startup complete.", false},
		}, time.Time{}},
		{"a restart without a version line: from its first engine line", append(upTo("Using model weights format"),
			"(EngineCore_DP0 pid=243) INFO 12-05 14:20:00 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
			"(EngineCore_DP0 pid=243) INFO 12-05 14:20:09 [default_loader.py:267] Loading weights took 9.00 seconds"),
			startedAt, []wantPhase{
				{PhaseProcessStart, 0, "Starting to load model", false},
				{PhaseWeightsLoad, 9, "Loading weights took 9.00 seconds", false},
				{PhaseModelLoad, 0, "Loading weights took", true},
			}, time.Date(2026, 12, 5, 14, 20, 9, 0, time.UTC)},
		{"processes interleaved: the slowest worker's", interleaved, startedAt, []wantPhase{
			{PhaseProcessStart, 40, "Starting to load model Qwen/Qwen3-32B", false},
			{PhaseWeightsLoad, 80.50, "Loading weights took 80.50 seconds", false},
			{PhaseModelLoad, 81.25 - 80.50, "Model loading took 30.6012 GiB and 81.250000 seconds", false},
			{PhaseCompile, 28, "torch.compile takes 28.00 s in total", false},
			{PhaseCUDAGraphs, 12, "Graph capturing finished in 12 secs", false},
			{PhaseEngineInit, 43.90 - 28 - 12, "init engine", false},
			{PhaseAPIServer, 2, "Application startup complete.", false},
			{PhaseServing, 168, "Application startup complete.", false},
		}, time.Time{}},
		{"enforce_eager: no compile, no graphs", eager, startedAt, []wantPhase{
			{PhaseProcessStart, 31, "Starting to load model", false},
			{PhaseWeightsLoad, 24.5, "Loading weights took", false},
			{PhaseModelLoad, 1.4, "Model loading took", false},
			{PhaseEngineInit, 8, "Model loading took", true},
		}, time.Date(2026, 12, 5, 14, 0, 57, 0, time.UTC)},
		{"the fake vLLM's start", fake, startedAt, []wantPhase{
			{PhaseProcessStart, 1, "Starting to load model", false},
			{PhaseWeightsDownload, 2.001234, "Time spent downloading", false},
			{PhaseWeightsLoad, 1, "Loading weights took", false},
			{PhaseModelLoad, 0, "Model loading took", false},
			{PhaseEngineInit, 1, "init engine", false},
			{PhaseAPIServer, 0, "Application startup complete.", false},
			{PhaseServing, 4, "Application startup complete.", false},
		}, time.Time{}},
		{"a start across New Year's Eve", newYear, time.Date(2026, 12, 31, 23, 59, 50, 0, time.UTC), []wantPhase{
			{PhaseProcessStart, 30, "Starting to load model", false},
			{PhaseWeightsDownload, 0, "Starting to load model", true},
		}, time.Date(2027, 1, 1, 0, 0, 20, 0, time.UTC)},
		{"no container start: timed from the run's first line", v011Start, time.Time{}, append([]wantPhase{
			{PhaseProcessStart, 22, "Starting to load model", false}}, append(append([]wantPhase(nil), full[1:8]...),
			wantPhase{PhaseServing, 955, "Application startup complete.", false})...), time.Time{}},
		{"no vLLM line", []string{"exec /usr/bin/vllm: exec format error"}, startedAt, nil, time.Time{}},
		{"an empty log", nil, startedAt, nil, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := StartPhasesOf(strings.Join(c.log, "\n"), c.started)
			if len(got) != len(c.want) {
				t.Fatalf("got %d phases, want %d:\n%s", len(got), len(c.want), dumpPhases(got))
			}
			for i, w := range c.want {
				g := got[i]
				if g.Name != w.name || math.Abs(g.Seconds-w.seconds) > 1e-6 || g.Going != w.going || !strings.Contains(g.Source, w.source) {
					t.Errorf("phase %d: got %s, want %+v", i, dumpPhases(got[i:i+1]), w)
				}
				if strings.Contains(g.Source, "\x1b") || strings.Contains(g.Source, "pid=") {
					t.Errorf("phase %d: source %q keeps its prefix", i, g.Source)
				}
				if g.Going && !g.Since.Equal(c.since) {
					t.Errorf("phase %d: since %v, want %v", i, g.Since, c.since)
				}
				if !g.Going && !g.Since.IsZero() {
					t.Errorf("phase %d: finished, with since %v", i, g.Since)
				}
			}
		})
	}
}

func dumpPhases(ps []Phase) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %-18s %10.6f going=%-5v %q\n", p.Name, p.Seconds, p.Going, p.Source)
	}
	return b.String()
}

func TestStartPhasesSlowest(t *testing.T) {
	cases := []struct {
		name    string
		phases  []Phase
		slowest string
		message string
	}{
		{"a whole start", StartPhasesOf(strings.Join(v011Start, "\n"), startedAt), PhaseWeightsDownload,
			"SlowStart: weights download 14m of 16m"},
		{"the issue's", []Phase{{Name: PhaseProcessStart, Seconds: 40}, {Name: PhaseWeightsDownload, Seconds: 840},
			{Name: PhaseWeightsLoad, Seconds: 100}, {Name: PhaseServing, Seconds: 1020}}, PhaseWeightsDownload,
			"SlowStart: weights download 14m of 17m"},
		{"still going", StartPhasesOf(strings.Join(upTo("Compiling a graph for dynamic shape"), "\n"), startedAt),
			PhaseWeightsDownload, "SlowStart: weights download 14m of 16m so far"},
		{"seconds", []Phase{{Name: PhaseProcessStart, Seconds: 12}, {Name: PhaseCompile, Seconds: 41.26},
			{Name: PhaseServing, Seconds: 80}}, PhaseCompile, "SlowStart: torch.compile 41s of 80s"},
		{"hours", []Phase{{Name: PhaseWeightsDownload, Seconds: 3900}, {Name: PhaseServing, Seconds: 4000}},
			PhaseWeightsDownload, "SlowStart: weights download 1h05m of 1h07m"},
		{"a total shorter than its part (stamps to the second)", []Phase{{Name: PhaseWeightsLoad, Seconds: 25.07},
			{Name: PhaseServing, Seconds: 25}}, PhaseWeightsLoad, "SlowStart: weights load 25s of 25s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, msg, ok := SlowestPhase(c.phases)
			if !ok || p.Name != c.slowest || msg != c.message {
				t.Errorf("got %q %q %v, want %q %q", p.Name, msg, ok, c.slowest, c.message)
			}
		})
	}
	for _, ps := range [][]Phase{nil, {{Name: PhaseServing, Seconds: 10}}} {
		if p, msg, ok := SlowestPhase(ps); ok || msg != "" || p.Name != "" {
			t.Errorf("SlowestPhase(%v) = %v %q %v, want nothing", ps, p, msg, ok)
		}
	}
}
