package vllm

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/vllm/vllmtest"
)

type wantPhase struct {
	name    string
	seconds float64
	source  string // a part of the Source line
	going   bool
}

func TestStartPhasesOf(t *testing.T) {
	full := []wantPhase{
		{engine.PhaseProcessStart, 31, "Starting to load model Qwen/Qwen3-8B...", false},
		{engine.PhaseWeightsDownload, 840.123456, "Time spent downloading weights for Qwen/Qwen3-8B: 840.123456 seconds", false},
		{engine.PhaseWeightsLoad, 25.07, "Loading weights took 25.07 seconds", false},
		{engine.PhaseModelLoad, 867.532101 - 840.123456 - 25.07, "Model loading took 15.2683 GiB and 867.532101 seconds", false},
		{engine.PhaseCompile, 41.26, "torch.compile takes 41.26 s in total", false},
		{engine.PhaseCUDAGraphs, 10, "Graph capturing finished in 10 secs, took 0.85 GiB", false},
		{engine.PhaseEngineInit, 61.84 - 41.26 - 10, "init engine (profile, create kv cache, warmup model) took 61.84 seconds", false},
		{engine.PhaseAPIServer, 3, "Application startup complete.", false},
		{engine.PhaseServing, 964, "Application startup complete.", false},
	}
	// the same, read with the kubelet's timestamps: uvicorn's line has its own time
	stamped := append([]wantPhase(nil), full...)
	stamped[0].seconds, stamped[7].seconds, stamped[8].seconds = 31.25, 3.5, 964.75

	restart := append(vllmtest.UpTo("Loading safetensors checkpoint shards:   0%"),
		vllmtest.Core+"ERROR 12-05 14:14:40 [core.py:708] EngineCore failed to start.",
		vllmtest.Core+"Traceback (most recent call last):",
		vllmtest.Core+"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.16 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
		vllmtest.API+"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
		// the second run: the weights are on the volume now, no download
		"INFO 12-05 14:15:10 [__init__.py:216] Automatically detected platform cuda.",
		vllmtest.API+"INFO 12-05 14:15:13 [api_server.py:1839] vLLM API server version 0.11.0",
		"INFO 12-05 14:15:25 [__init__.py:216] Automatically detected platform cuda.",
		vllmtest.Core+"INFO 12-05 14:15:27 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
		vllmtest.Core+"INFO 12-05 14:15:28 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		vllmtest.Core+"INFO 12-05 14:15:41 [default_loader.py:267] Loading weights took 12.40 seconds",
		vllmtest.Core+"INFO 12-05 14:15:42 [gpu_model_runner.py:2653] Model loading took 15.2683 GiB and 14.102355 seconds",
		vllmtest.Core+"INFO 12-05 14:15:50 [backends.py:164] Directly load the compiled graph(s) for dynamic shape from the cache, took 6.912 s",
		vllmtest.Core+"INFO 12-05 14:15:51 [monitor.py:34] torch.compile takes 9.31 s in total",
		vllmtest.Core+"INFO 12-05 14:15:53 [kv_cache_utils.py:1087] GPU KV cache size: 379,648 tokens",
		vllmtest.Core+"INFO 12-05 14:16:02 [gpu_model_runner.py:3480] Graph capturing finished in 9 secs, took 0.85 GiB",
		vllmtest.Core+"INFO 12-05 14:16:02 [core.py:210] init engine (profile, create kv cache, warmup model) took 20.15 seconds",
		vllmtest.API+"INFO 12-05 14:16:05 [launcher.py:42] Route: /health, Methods: GET",
		vllmtest.API+"INFO:     Application startup complete.",
	)

	// tensor parallelism: the API server, the engine core and two workers write at once, each
	// line whole; the engine waits for the slower worker
	w0, w1 := vllmtest.Cyan+"(Worker_TP0 pid=310)"+vllmtest.Reset+" ", vllmtest.Cyan+"(Worker_TP1 pid=311)"+vllmtest.Reset+" "
	interleaved := []string{
		vllmtest.API + "INFO 12-05 14:00:12 [api_server.py:1839] vLLM API server version 0.11.0",
		vllmtest.Core + "INFO 12-05 14:00:29 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: model='Qwen/Qwen3-32B', tensor_parallel_size=2, enforce_eager=False, kv_cache_dtype=auto",
		w1 + "INFO 12-05 14:00:40 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...",
		w0 + "INFO 12-05 14:00:40 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-32B...",
		w0 + "INFO 12-05 14:00:41 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		vllmtest.API + "INFO 12-05 14:00:45 [loggers.py:127] Waiting for the engine",
		w1 + "INFO 12-05 14:00:41 [weight_utils.py:392] Using model weights format ['*.safetensors']",
		w0 + "INFO 12-05 14:01:41 [default_loader.py:267] Loading weights took 60.12 seconds",
		w1 + "INFO 12-05 14:02:01 [default_loader.py:267] Loading weights took 80.50 seconds",
		w0 + "INFO 12-05 14:01:42 [gpu_model_runner.py:2653] Model loading took 30.6012 GiB and 61.000000 seconds",
		w1 + "INFO 12-05 14:02:02 [gpu_model_runner.py:2653] Model loading took 30.6012 GiB and 81.250000 seconds",
		w0 + "INFO 12-05 14:02:30 [monitor.py:34] torch.compile takes 27.00 s in total",
		w1 + "INFO 12-05 14:02:31 [monitor.py:34] torch.compile takes 28.00 s in total",
		vllmtest.Core + "INFO 12-05 14:02:33 [kv_cache_utils.py:1087] GPU KV cache size: 310,000 tokens",
		w1 + "INFO 12-05 14:02:45 [gpu_model_runner.py:3480] Graph capturing finished in 12 secs, took 1.02 GiB",
		w0 + "INFO 12-05 14:02:44 [gpu_model_runner.py:3480] Graph capturing finished in 11 secs, took 1.02 GiB",
		vllmtest.Core + "INFO 12-05 14:02:46 [core.py:210] init engine (profile, create kv cache, warmup model) took 43.90 seconds",
		vllmtest.API + "INFO 12-05 14:02:48 [launcher.py:42] Route: /health, Methods: GET",
		vllmtest.API + "INFO:     Application startup complete.",
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

	// the fake vLLM of test/localcluster, as it logs (test/localcluster/vllm/run.go): no colours, no compile,
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
		{"a whole start", vllmtest.Start, vllmtest.StartedAt, full, time.Time{}},
		{"read with the kubelet's timestamps", vllmtest.KubeletStamped(vllmtest.Start, ".25"), vllmtest.StartedAt, stamped, time.Time{}},
		{"stamps a run before the container's start are its previous run's",
			append([]string{"2026-12-05T13:59:58.5Z (APIServer pid=1) INFO:     Application startup complete."}, vllmtest.KubeletStamped(vllmtest.Start, ".25")...),
			vllmtest.StartedAt, stamped, time.Time{}},
		{"cut short in the download: silent while it lasts", vllmtest.UpTo("Using model weights format"), vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 31, "Starting to load model", false},
			{engine.PhaseWeightsDownload, 0, "Using model weights format ['*.safetensors']", true},
		}, time.Date(2026, 12, 5, 14, 0, 32, 0, time.UTC)},
		{"cut short loading the shards, read with timestamps",
			vllmtest.KubeletStamped(vllmtest.UpTo("Loading safetensors checkpoint shards: 100%"), ".5"), vllmtest.StartedAt, []wantPhase{
				{engine.PhaseProcessStart, 31.5, "Starting to load model", false},
				{engine.PhaseWeightsDownload, 840.123456, "Time spent downloading", false},
				{engine.PhaseWeightsLoad, 0.25, "Time spent downloading", true},
			}, time.Date(2026, 12, 5, 14, 14, 32, 5e8, time.UTC)},
		{"tqdm's bar, carriage returns and all, after its process's prefix", append(vllmtest.UpTo("Time spent downloading"),
			vllmtest.Core+"\rLoading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]\rLoading safetensors checkpoint shards:  20% Completed | 1/5 [00:05<00:20,  5.01s/it]"),
			vllmtest.StartedAt, []wantPhase{full[0], full[1],
				{engine.PhaseWeightsLoad, 0, "Time spent downloading", true},
			}, time.Date(2026, 12, 5, 14, 14, 32, 0, time.UTC)},
		{"cut short in torch.compile", vllmtest.UpTo("Compiling a graph for dynamic shape"), vllmtest.StartedAt, []wantPhase{
			full[0], full[1], full[2], full[3],
			{engine.PhaseCompile, 42, "Model loading took", true},
		}, time.Date(2026, 12, 5, 14, 14, 59, 0, time.UTC)},
		{"cut short capturing the graphs", vllmtest.UpTo("Capturing CUDA graphs (decode"), vllmtest.StartedAt, []wantPhase{
			full[0], full[1], full[2], full[3], full[4],
			{engine.PhaseCUDAGraphs, 0, "GPU KV cache size: 379,648 tokens", true},
		}, time.Date(2026, 12, 5, 14, 15, 51, 0, time.UTC)},
		{"cut short starting the API server", vllmtest.UpTo("Route: /health"), vllmtest.StartedAt, append(append([]wantPhase(nil), full[:7]...),
			wantPhase{engine.PhaseAPIServer, 3, "init engine", true}), time.Date(2026, 12, 5, 14, 16, 1, 0, time.UTC)},
		{"no line of the engine yet", vllmtest.UpTo("Using max model len"), vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 20, "", true},
		}, vllmtest.StartedAt},
		{"a restart: the last run's, from its own first line", restart, vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 17, "Starting to load model", false},
			{engine.PhaseWeightsLoad, 12.40, "Loading weights took 12.40 seconds", false},
			{engine.PhaseModelLoad, 14.102355 - 12.40, "Model loading took", false},
			{engine.PhaseCompile, 9.31, "torch.compile takes 9.31 s in total", false},
			{engine.PhaseCUDAGraphs, 9, "Graph capturing finished in 9 secs", false},
			{engine.PhaseEngineInit, 20.15 - 9.31 - 9, "init engine", false},
			{engine.PhaseAPIServer, 3, "Application startup complete.", false},
			{engine.PhaseServing, 55, "Application startup complete.", false},
		}, time.Time{}},
		{"a restart without a version line: from its first engine line", append(vllmtest.UpTo("Using model weights format"),
			"(EngineCore_DP0 pid=243) INFO 12-05 14:20:00 [gpu_model_runner.py:2602] Starting to load model Qwen/Qwen3-8B...",
			"(EngineCore_DP0 pid=243) INFO 12-05 14:20:09 [default_loader.py:267] Loading weights took 9.00 seconds"),
			vllmtest.StartedAt, []wantPhase{
				{engine.PhaseProcessStart, 0, "Starting to load model", false},
				{engine.PhaseWeightsLoad, 9, "Loading weights took 9.00 seconds", false},
				{engine.PhaseModelLoad, 0, "Loading weights took", true},
			}, time.Date(2026, 12, 5, 14, 20, 9, 0, time.UTC)},
		{"processes interleaved: the slowest worker's", interleaved, vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 40, "Starting to load model Qwen/Qwen3-32B", false},
			{engine.PhaseWeightsLoad, 80.50, "Loading weights took 80.50 seconds", false},
			{engine.PhaseModelLoad, 81.25 - 80.50, "Model loading took 30.6012 GiB and 81.250000 seconds", false},
			{engine.PhaseCompile, 28, "torch.compile takes 28.00 s in total", false},
			{engine.PhaseCUDAGraphs, 12, "Graph capturing finished in 12 secs", false},
			{engine.PhaseEngineInit, 43.90 - 28 - 12, "init engine", false},
			{engine.PhaseAPIServer, 2, "Application startup complete.", false},
			{engine.PhaseServing, 168, "Application startup complete.", false},
		}, time.Time{}},
		{"enforce_eager: no compile, no graphs", eager, vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 31, "Starting to load model", false},
			{engine.PhaseWeightsLoad, 24.5, "Loading weights took", false},
			{engine.PhaseModelLoad, 1.4, "Model loading took", false},
			{engine.PhaseEngineInit, 8, "Model loading took", true},
		}, time.Date(2026, 12, 5, 14, 0, 57, 0, time.UTC)},
		{"the fake vLLM's start", fake, vllmtest.StartedAt, []wantPhase{
			{engine.PhaseProcessStart, 1, "Starting to load model", false},
			{engine.PhaseWeightsDownload, 2.001234, "Time spent downloading", false},
			{engine.PhaseWeightsLoad, 1, "Loading weights took", false},
			{engine.PhaseModelLoad, 0, "Model loading took", false},
			{engine.PhaseEngineInit, 1, "init engine", false},
			{engine.PhaseAPIServer, 0, "Application startup complete.", false},
			{engine.PhaseServing, 4, "Application startup complete.", false},
		}, time.Time{}},
		{"a start across New Year's Eve", newYear, time.Date(2026, 12, 31, 23, 59, 50, 0, time.UTC), []wantPhase{
			{engine.PhaseProcessStart, 30, "Starting to load model", false},
			{engine.PhaseWeightsDownload, 0, "Starting to load model", true},
		}, time.Date(2027, 1, 1, 0, 0, 20, 0, time.UTC)},
		{"no container start: timed from the run's first line", vllmtest.Start, time.Time{}, append([]wantPhase{
			{engine.PhaseProcessStart, 22, "Starting to load model", false}}, append(append([]wantPhase(nil), full[1:8]...),
			wantPhase{engine.PhaseServing, 955, "Application startup complete.", false})...), time.Time{}},
		{"no vLLM line", []string{"exec /usr/bin/vllm: exec format error"}, vllmtest.StartedAt, nil, time.Time{}},
		{"an empty log", nil, vllmtest.StartedAt, nil, time.Time{}},
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

func dumpPhases(ps []engine.Phase) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "  %-18s %10.6f going=%-5v %q\n", p.Name, p.Seconds, p.Going, p.Source)
	}
	return b.String()
}

// TestStartPhasesSlowestPart: the whole start's slowest part is the download, and so is that
// of a start still going (reconcile's SlowestPhase says it in the status).
func TestStartPhasesSlowestPart(t *testing.T) {
	for name, ps := range map[string][]engine.Phase{
		"a whole start": StartPhasesOf(strings.Join(vllmtest.Start, "\n"), vllmtest.StartedAt),
		"still going":   StartPhasesOf(strings.Join(vllmtest.UpTo("Compiling a graph for dynamic shape"), "\n"), vllmtest.StartedAt),
	} {
		var slowest engine.Phase
		for _, p := range ps {
			if p.Name != engine.PhaseServing && p.Seconds > slowest.Seconds {
				slowest = p
			}
		}
		if slowest.Name != engine.PhaseWeightsDownload || math.Round(slowest.Seconds/60) != 14 {
			t.Errorf("%s: slowest %s %vs, want the weights download's 14m", name, slowest.Name, slowest.Seconds)
		}
	}
}
