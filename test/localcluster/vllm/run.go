// The fake vLLM's start, told as vLLM v0.11 logs it: configuration, the checks that make a
// real start fail (bad environment, missing or gated weights, too few GPUs, GPU or host
// out of memory, no /dev/shm for NCCL), the download and the load with the port closed,
// then the API server. Each failure ends the log the way the real one does.

package vllm

import (
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	vllmVersion = "0.11.0"
	enginePID   = 243 // the EngineCore process's pid in log prefixes
	pyLib       = "/usr/local/lib/python3.12/dist-packages"
)

// now is the time as vLLM's logger prints it.
func logStamp() string { return time.Now().UTC().Format("01-02 15:04:05") }

// procPrefix is a process's tag on each line it writes, in vLLM v0.11's colours (vllm/utils
// _add_prefix: CYAN "\033[1;36m", RESET "\033[0;0m"), which pods/log keeps.
func procPrefix(name string, pid int) string {
	return fmt.Sprintf("\x1b[1;36m(%s pid=%d)\x1b[0;0m ", name, pid)
}

// api logs a line of the API server process (pid 1).
func (s *Server) api(level, src, format string, args ...any) {
	s.log.Printf("%s%s %s [%s] %s", apiPrefix, level, logStamp(), src, fmt.Sprintf(format, args...))
}

// core logs a line of the engine core process.
func (s *Server) core(level, src, format string, args ...any) {
	s.log.Printf("%s%s %s [%s] %s", corePrefix(), level, logStamp(), src, fmt.Sprintf(format, args...))
}

// uvicorn logs a line of uvicorn's own logger.
func (s *Server) uvicorn(format string, args ...any) {
	switch s.args.uvicornLevel {
	case "warning", "error", "critical":
		return
	}
	s.log.Printf("%sINFO:     %s", apiPrefix, fmt.Sprintf(format, args...))
}

// raw writes lines with a process prefix as that process prints to stderr (tracebacks).
func (s *Server) raw(prefix string, lines ...string) {
	for _, l := range lines {
		for _, part := range strings.Split(l, "\n") {
			s.log.Printf("%s%s", prefix, part)
		}
	}
}

var apiPrefix = procPrefix("APIServer", 1)

func corePrefix() string { return procPrefix("EngineCore_DP0", enginePID) }

// failPython ends the process with a Python traceback from the API server, exit 1.
func (s *Server) failPython(frames []string, last ...string) {
	lines := []string{"Traceback (most recent call last):",
		`  File "/usr/local/bin/vllm", line 10, in <module>`, "    sys.exit(main())",
		`  File "` + pyLib + `/vllm/entrypoints/cli/main.py", line 54, in main`, "    args.dispatch_function(args)",
		`  File "` + pyLib + `/vllm/entrypoints/cli/serve.py", line 57, in cmd`, "    uvloop.run(run_server(args))"}
	lines = append(lines, frames...)
	lines = append(lines, last...)
	s.raw(apiPrefix, lines...)
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}

// engineInitFailed is how the API server reports an engine core that died starting.
var engineInitFailed = []string{
	`  File "` + pyLib + `/vllm/v1/engine/core_client.py", line 96, in make_async_mp_client`,
	"    return AsyncMPClient(*client_args)",
	`  File "` + pyLib + `/vllm/v1/engine/utils.py", line 880, in wait_for_engine_startup`,
	"    raise RuntimeError(\"Engine core initialization failed. \"",
}

// run is the process from its first log line to serving (or its death).
func (s *Server) run() {
	a, sp := s.args, s.spec
	if sp.GPUs == 0 && strings.HasPrefix(sp.Image, proc.FakeRegistry) {
		// a kubelet.fake/ image plays its behavior on any pod, GPUs requested or not
		sp.GPUs = 1
	}
	if sp.GPUs == 0 {
		s.log.Printf("INFO %s [__init__.py:224] No platform detected, vLLM is running on UnspecifiedPlatform", logStamp())
	} else {
		s.log.Printf("INFO %s [__init__.py:216] Automatically detected platform cuda.", logStamp())
	}
	if a.modelFlag && a.prog == "vllm serve" {
		s.log.Printf("WARNING %s [argparse_utils.py:195] With `vllm serve`, you should provide the model as a positional argument or in a config file instead of via the `--model` option. The `--model` option will be removed in v0.13.", logStamp())
	}
	s.api("INFO", "api_server.py:1842", "vLLM API server version %s", vllmVersion)
	s.api("INFO", "utils.py:233", "non-default args: {%s}", strings.Join(a.nonDefault, ", "))

	if port, ok := sp.Env["VLLM_PORT"]; ok {
		if _, err := strconv.Atoi(port); err != nil {
			msg := fmt.Sprintf("ValueError: VLLM_PORT '%s' must be a valid integer", port)
			if i := strings.Index(port, "://"); i > 0 {
				msg = fmt.Sprintf("ValueError: VLLM_PORT '%s' appears to be a URI. This may be caused by a Kubernetes service discovery issue,check the warning in: https://docs.vllm.ai/en/stable/serving/env_vars.html", port)
			}
			s.failPython([]string{
				`  File "` + pyLib + `/vllm/utils/__init__.py", line 655, in get_open_port`,
				"    port = envs.VLLM_PORT",
				`  File "` + pyLib + `/vllm/envs.py", line 1217, in __getattr__`,
				"    value = environment_variables[name]()",
				`  File "` + pyLib + `/vllm/envs.py", line 242, in get_vllm_port`,
				"    raise ValueError(",
			}, msg)
			return
		}
	}
	if k := sp.Env["VLLM_API_KEY"]; k != "" && len(a.apiKeys) == 0 {
		s.apiKeys = []string{k}
	} else {
		s.apiKeys = a.apiKeys
	}
	s.runtimeLoRA = envTrue(sp.Env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"])
	if f, err := parseFaults(sp.Env); err != nil {
		s.failPython(nil, "ValueError: "+err.Error())
		return
	} else if f.active() != "" {
		s.faults = f
		s.api("WARNING", "faults.go:1", "the fake's fault knobs are set: %s", f.active())
	}

	// where the weights come from
	model := a.model
	var cacheVolume string
	local := strings.HasPrefix(model, "/") || strings.HasPrefix(model, "./")
	if local {
		// a directory on a volume a fill copied weights to is there only if that fill copied it
		mount, volume, ok := hfmodel.MountFor(sp.Mounts, model)
		if ok && s.cfg.Weights.HasDirs(volume) && !s.cfg.Weights.Has(volume, "dir:"+strings.TrimSuffix(strings.TrimPrefix(model, mount), "/")) {
			ok = false
		}
		if !ok {
			s.failPython([]string{
				`  File "` + pyLib + `/vllm/transformers_utils/config.py", line 633, in get_config`,
				"    raise ValueError(",
			}, fmt.Sprintf("ValueError: Invalid repository ID or local directory specified: '%s'.", model),
				"Please verify the following requirements:",
				"1. Provide a valid Hugging Face repository ID.",
				"2. Specify a local directory that contains a recognized configuration file.",
				"   - For Hugging Face models: ensure the presence of a 'config.json'.",
				"   - For Mistral models: ensure the presence of a 'params.json'.")
			return
		}
	} else {
		if hfmodel.Gated(model) && sp.Env["HF_TOKEN"] == "" && sp.Env["HUGGING_FACE_HUB_TOKEN"] == "" {
			s.failPython([]string{
				`  File "` + pyLib + `/huggingface_hub/file_download.py", line 1531, in _get_metadata_or_catch_error`,
				"    metadata = get_hf_file_metadata(",
				`  File "` + pyLib + `/huggingface_hub/utils/_http.py", line 426, in hf_raise_for_status`,
				"    raise _format(GatedRepoError, message, response) from e",
			}, "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6750a1f2-3c5e0b4d2a1f6e7c8b9d0a1e;5f0e9c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b)",
				"",
				fmt.Sprintf("Cannot access gated repo for url https://huggingface.co/%s/resolve/main/config.json.", model),
				fmt.Sprintf("Access to model %s is restricted. You must have access to it and be authenticated to access it. Please log in.", model))
			return
		}
		home := sp.Env["HF_HOME"]
		if home == "" {
			home = "/root/.cache/huggingface"
		}
		if a.downloadDir != "" {
			home = a.downloadDir
		}
		_, cacheVolume, _ = hfmodel.MountFor(sp.Mounts, home)
		if customCode(model) && slices.Contains(a.nonDefault, "'trust_remote_code': True") {
			// transformers' init_hf_modules creates HF_MODULES_CACHE ($HF_HOME/modules unless
			// set) to import the repo's code from, before any config is read
			modules := sp.Env["HF_MODULES_CACHE"]
			if modules == "" {
				modules = sp.Env["HF_HOME"]
				if modules == "" {
					modules = "/root/.cache/huggingface"
				}
				modules += "/modules"
			}
			if mp, _, ok := hfmodel.MountFor(sp.Mounts, modules); ok && sp.ReadOnly[mp] {
				s.failPython([]string{
					`  File "` + pyLib + `/transformers/dynamic_module_utils.py", line 67, in init_hf_modules`,
					"    os.makedirs(HF_MODULES_CACHE, exist_ok=True)",
					`  File "<frozen os>", line 225, in makedirs`,
				}, fmt.Sprintf("OSError: [Errno 30] Read-only file system: '%s'", modules))
				return
			}
		}
	}
	weights := hfmodel.WeightBytes(model)
	geo, known := geometryOf(model) // unknown models skip the checks on a model's shape
	s.api("INFO", "model.py:547", "Resolved architecture: %s", hfmodel.Architecture(model))
	maxLen := a.maxModelLen
	if maxLen == 0 {
		maxLen = defaultMaxModelLen(model)
	} else if known {
		if msg, warning, ok := geo.maxLenTooLong(maxLen); !ok {
			if !envTrue(sp.Env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"]) {
				s.failConfig("ModelConfig", maxLenError(msg, warning))
				return
			}
			s.api("WARNING", "model.py:2106", "%s %s", msg, warning)
		}
	}
	s.api("INFO", "model.py:1510", "Using max model len %d", maxLen)
	s.api("INFO", "scheduler.py:205", "Chunked prefill is enabled with max_num_batched_tokens=2048.")

	world := a.tp * a.pp
	if sp.GPUs == 0 { // no GPU allocated: the runtime exposes no device to the container
		s.failPython([]string{
			`  File "` + pyLib + `/vllm/config/device.py", line 58, in __post_init__`,
			"    raise RuntimeError(",
		}, "RuntimeError: Failed to infer device type")
		return
	}
	if known && a.tp > 0 { // VllmConfig checks the model against its parallel config
		if msg := geo.parallelError(a.tp); msg != "" {
			s.failConfig("VllmConfig", msg)
			return
		}
	}
	gpus := sp.GPUs
	if s.rayGPUs > 0 {
		// --distributed-executor-backend ray on the cluster the leader script formed: its
		// placement group spans every node's GPUs
		gpus = s.rayGPUs
		s.api("INFO", "worker.py:1660", "Connecting to existing Ray cluster at address: %s...", s.rayAddress)
		s.api("INFO", "worker.py:1843", "Connected to Ray cluster.")
	}
	if world > gpus {
		if s.rayGPUs == 0 {
			s.api("INFO", "worker.py:1951", "Started a local Ray instance.")
		}
		s.failPython([]string{
			`  File "` + pyLib + `/vllm/v1/executor/ray_utils.py", line 366, in initialize_ray_cluster`,
			"    raise ValueError(",
		}, "ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group.")
		return
	}
	s.core("INFO", "core.py:644", "Waiting for init message from front-end.")
	dtype, quant := "torch.bfloat16", "None"
	if known {
		dtype = geo.dtype
		if geo.quant != "" {
			quant = geo.quant
		}
	}
	s.core("INFO", "core.py:77", "Initializing a V1 LLM engine (v%s) with config: model='%s', speculative_config=None, tokenizer='%s', "+
		"trust_remote_code=False, dtype=%s, max_seq_len=%d, download_dir=None, load_format=auto, tensor_parallel_size=%d, "+
		"pipeline_parallel_size=%d, data_parallel_size=1, quantization=%s, enforce_eager=%s, kv_cache_dtype=auto, device_config=cuda, "+
		"seed=0, served_model_name=%s, enable_prefix_caching=%s, chunked_prefill_enabled=True",
		vllmVersion, model, model, dtype, maxLen, a.tp, a.pp, quant, pyBoolStr(a.enforceEager), strings.Join(a.served, ","), pyBoolStr(a.prefixCaching))
	if sp.GPUFault != proc.FaultNone {
		s.failGPUStart(sp.GPUFault)
		return
	}
	if world > 1 && sp.ShmSize == -1 {
		cp := corePrefix()
		s.core("ERROR", "core.py:708", "EngineCore failed to start.")
		s.raw(cp, "Traceback (most recent call last):",
			`  File "`+pyLib+`/vllm/distributed/parallel_state.py", line 1017, in init_distributed_environment`,
			"    torch.distributed.barrier()",
			"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3353, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3",
			"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
			"Last error:",
			"Error while creating shared memory segment /dev/shm/nccl-8vjLq2 (size 9637888)")
		s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return
	}
	for r := 0; r < world; r++ {
		s.core("INFO", "parallel_state.py:1208", "rank %d in world size %d is assigned as DP rank 0, PP rank %d, TP rank %d, EP rank %d",
			r, world, r/a.tp, r%a.tp, r%a.tp)
	}
	s.core("INFO", "gpu_model_runner.py:2602", "Starting to load model %s...", model)
	if known && a.pp > 1 {
		if parts, uneven := ppPartition(geo.layers, a.pp); uneven {
			s.core("INFO", "utils.py:106", "Hidden layers were unevenly partitioned: [%s]. This can be manually overridden using the VLLM_PP_LAYER_PARTITION environment variable", joinInts(parts))
		}
	}

	loadStart := time.Now() // gpu_model_runner's time_before_load: the download is a part of loading
	if !local {
		// download_weights_from_hf names the format first, cached or not
		s.core("INFO", "weight_utils.py:392", "Using model weights format ['*.safetensors']")
	}
	if !local && !s.cfg.Weights.Has(cacheVolume, model) {
		if envTrue(sp.Env["HF_HUB_OFFLINE"]) { // huggingface_hub looks only in the cache
			s.failPython([]string{
				`  File "` + pyLib + `/huggingface_hub/file_download.py", line 1123, in _hf_hub_download_to_cache_dir`,
				"    _raise_on_head_call_error(head_call_error, force_download, local_files_only)",
			}, "huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set 'local_files_only' to False.")
			return
		}
		took := s.cfg.downloadTime(weights)
		if sp.DownloadMBPerS > 0 {
			took = s.cfg.scaled(weights, sp.DownloadMBPerS*1e6)
		}
		t0 := time.Now()
		if !s.life.Wait(took) {
			return
		}
		s.cfg.Weights.Put(cacheVolume, model)
		// vLLM says so only past half a second; the threshold is applied to the modelled
		// (unscaled) time, so a download a real start would report is reported
		if took := time.Since(t0).Seconds(); took/s.cfg.TimeScale > 0.5 {
			s.core("INFO", "weight_utils.py:413", "Time spent downloading weights for %s: %.6f seconds", model, took)
		}
	}

	// loading: each GPU holds its share of the weights; the host stages them
	perGPU := weights / int64(world)
	budget := int64(a.gpuUtil * float64(s.cfg.GPUMemory))
	n := shards(weights)
	oomShard := -1 // the shard during which the GPU runs out of memory
	if perGPU > budget {
		oomShard = int(float64(n) * float64(budget) / float64(perGPU))
	}
	// host memory: the base process plus a quarter of one rank's share staged at a time
	killShard := -1 // the shard during which the kernel kills the container
	staged := perGPU / 4
	if sp.MemoryLimit > 0 && hostBaseBytes+staged > sp.MemoryLimit {
		killShard = int(float64(n) * math.Max(0, float64(sp.MemoryLimit-hostBaseBytes)) / float64(staged))
	}
	if sp.Behavior.Kind == proc.OOMKilled {
		killShard = n / 2
	}
	load := s.cfg.loadTime(perGPU)
	if sp.Behavior.Kind == proc.SlowReady {
		load = sp.Behavior.Delay
	}
	per := load / time.Duration(n+1)
	t0 := time.Now()
	for i := 0; i <= n; i++ {
		el := time.Since(t0).Seconds()
		rate := "?it/s"
		if i > 0 {
			rate = fmt.Sprintf("%5.2fs/it", el/float64(i))
		}
		s.log.Printf("Loading safetensors checkpoint shards: %3d%% Completed | %d/%d [%s<%s, %s]", 100*i/n, i, n,
			clock(el), "00:00", rate)
		if i == n {
			break
		}
		if i == killShard {
			if sp.Behavior.Kind == proc.OOMKilled && !s.life.Wait(s.cfg.CrashRun) {
				return
			}
			s.life.Exit(proc.Exit{Code: 137, Reason: "OOMKilled"}) // SIGKILL: not a word more
			return
		}
		if i == oomShard {
			s.gpuOOM(perGPU, budget)
			return
		}
		if !s.life.Wait(per) {
			return
		}
	}
	loadSecs := time.Since(t0).Seconds()
	s.log.Printf("%s", corePrefix())
	s.core("INFO", "default_loader.py:267", "Loading weights took %.2f seconds", loadSecs)
	s.core("INFO", "gpu_model_runner.py:2653", "Model loading took %.4f GiB and %.6f seconds", float64(perGPU)/float64(gib), time.Since(loadStart).Seconds())
	initStart := time.Now() // core.py's _initialize_kv_caches: profile (torch.compile), KV cache, graphs
	if !a.enforceEager && !s.compile() {
		return
	}
	free := budget - perGPU - gib // activations and CUDA graphs take about 1 GiB
	if free <= 0 {
		s.core("ERROR", "core.py:708", "EngineCore failed to start.")
		s.raw(corePrefix(), "Traceback (most recent call last):",
			`  File "`+pyLib+`/vllm/v1/core/kv_cache_utils.py", line 686, in check_enough_kv_cache_memory`,
			"    raise ValueError(\"No available memory for the cache blocks. \"",
			"ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
		s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return
	}
	// the cache is checked against one max_model_len request before its size is reported
	kv := kvCacheOf(geo, known, a.tp, a.pp, maxLen, free)
	s.core("INFO", "gpu_worker.py:298", "Available KV cache memory: %s GiB", gibs(free))
	if kv.short {
		s.core("ERROR", "core.py:708", "EngineCore failed to start.")
		s.raw(corePrefix(), "Traceback (most recent call last):",
			`  File "`+pyLib+`/vllm/v1/core/kv_cache_utils.py", line 706, in check_enough_kv_cache_memory`,
			"    raise ValueError(",
			kvShortError(maxLen, kv, free))
		s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
		return
	}
	kvTokens := kv.tokens
	s.core("INFO", "kv_cache_utils.py:1087", "GPU KV cache size: %s tokens", thousands(kvTokens))
	s.core("INFO", "kv_cache_utils.py:1091", "Maximum concurrency for %s tokens per request: %.2fx", thousands(maxLen), float64(kvTokens)/float64(maxLen))
	if !a.enforceEager && !s.captureGraphs(a.maxNumSeqs) {
		return
	}
	s.core("INFO", "core.py:210", "init engine (profile, create kv cache, warmup model) took %.2f seconds", time.Since(initStart).Seconds())
	numBlocks := kvTokens / a.blockSize
	if a.gpuBlocksOverride > 0 {
		s.core("INFO", "kv_cache_utils.py:1051", "Overriding num_gpu_blocks=%d with num_gpu_blocks_override=%d", numBlocks, a.gpuBlocksOverride)
		numBlocks = a.gpuBlocksOverride
	}
	s.api("INFO", "loggers.py:147", "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: %d", numBlocks)
	s.eng = newEngine(a.maxNumSeqs, s.cfg.MaxWaiting, maxLen,
		newBlockPool(numBlocks, a.blockSize, a.prefixCaching, sp.Env["PYTHONHASHSEED"]))
	s.eng.cacheInfo = cacheConfigLabels(a.blockSize, numBlocks, a.gpuUtil, a.prefixCaching, a.gpuBlocksOverride)
	s.eng.lora = loraStats{enabled: a.enableLoRA, maxLora: a.maxLoras}
	s.eng.steps = newStepModel(s.cfg, a.maxBatchedTokens, kvBytesPerToken/int64(world), perGPU)
	s.eng.stop = s.life.Stopped()

	for _, m := range a.loraModules {
		if msg, _, _ := s.addLoRA(m.Name, m.Path, m.BaseName); msg != "" {
			s.failPython([]string{
				`  File "` + pyLib + `/vllm/entrypoints/openai/serving_models.py", line 105, in init_static_loras`,
				"    raise ValueError(load_result.error.message)",
			}, "ValueError: "+msg)
			return
		}
	}
	if s.runtimeLoRA {
		s.api("WARNING", "api_server.py:1016", "LoRA dynamic loading & unloading is enabled in the API server. This should ONLY be used for local development!")
	}
	s.api("INFO", "api_server.py:1637", "Supported_tasks: ['generate']")
	host := a.host
	if host == "" {
		host = "0.0.0.0"
	}
	s.api("INFO", "api_server.py:1915", "Starting vLLM API server 0 on http://%s:%d", host, a.port)
	s.api("INFO", "launcher.py:34", "Available routes are:")
	for _, r := range s.routes() {
		s.api("INFO", "launcher.py:42", "Route: %s, Methods: %s", r[0], r[1])
	}
	s.dying = sp.Behavior.Kind == proc.NeverReady // set before the handlers can read it
	if !s.listen() {
		return
	}
	s.uvicorn("Started server process [1]")
	s.uvicorn("Waiting for application startup.")
	s.uvicorn("Application startup complete.")
	if sp.Behavior.Kind == proc.CrashLoop {
		s.life.CrashAfter(s.cfg.CrashRun, s.crash)
	}
}

// compile is vLLM's torch.compile during the profile run, as v0.11 logs it (compilation/
// backends.py, monitor.py): Dynamo's bytecode transform, then Inductor's compile of the graph
// for dynamic shapes, the total last. False: stopped meanwhile.
func (s *Server) compile() bool {
	total := s.cfg.compileTime()
	t0 := time.Now()
	s.core("INFO", "backends.py:548", "Using cache directory: /root/.cache/vllm/torch_compile_cache/%s/rank_0_0/backbone for vLLM's torch.compile", compileHash(s.args.model))
	if !s.life.Wait(total / 5) {
		return false
	}
	s.core("INFO", "backends.py:559", "Dynamo bytecode transform time: %.2f s", time.Since(t0).Seconds())
	s.core("INFO", "backends.py:197", "Cache the graph for dynamic shape for later use")
	t1 := time.Now()
	if !s.life.Wait(total - time.Since(t0)) {
		return false
	}
	s.core("INFO", "backends.py:218", "Compiling a graph for dynamic shape takes %.2f s", time.Since(t1).Seconds())
	s.core("INFO", "monitor.py:34", "torch.compile takes %.2f s in total", time.Since(t0).Seconds())
	return true
}

// captureGraphs is the CUDA graph capture after the KV cache is allocated (gpu_model_runner
// capture_model): tqdm's bars for the mixed and the decode batch sizes, then the summary.
// False: stopped meanwhile.
func (s *Server) captureGraphs(maxNumSeqs int) bool {
	t0 := time.Now()
	// v0.11 captures up to 512 sizes, capped by max_num_seqs: 1, 2, 4, then multiples of 8
	sizes := 3 + min(512, max(maxNumSeqs, 8))/8
	d := s.cfg.graphTime()
	if !s.life.Wait(d * 2 / 3) {
		return false
	}
	s.log.Printf("%sCapturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%%|██████████| %d/%d [%s<00:00, %.2fit/s]",
		corePrefix(), sizes, sizes, clock(time.Since(t0).Seconds()), float64(sizes)/math.Max(time.Since(t0).Seconds(), 1e-3))
	t1 := time.Now()
	if !s.life.Wait(d - time.Since(t0)) {
		return false
	}
	decode := (sizes + 1) / 2
	s.log.Printf("%sCapturing CUDA graphs (decode, FULL): 100%%|██████████| %d/%d [%s<00:00, %.2fit/s]",
		corePrefix(), decode, decode, clock(time.Since(t1).Seconds()), float64(decode)/math.Max(time.Since(t1).Seconds(), 1e-3))
	s.core("INFO", "gpu_model_runner.py:3480", "Graph capturing finished in %.0f secs, took %.2f GiB", time.Since(t0).Seconds(), 0.85)
	return true
}

// compileHash is the cache directory's name for the model's compile (vLLM hashes the config).
func compileHash(model string) string {
	h := fnv.New32a()
	h.Write([]byte(model))
	return fmt.Sprintf("%010x", h.Sum32())
}

// gpuOOM is torch running out of GPU memory while loading: the engine core's traceback,
// then the API server's, exit 1.
func (s *Server) gpuOOM(perGPU, budget int64) {
	capacity := s.cfg.GPUMemory - s.cfg.GPUMemory/99 // as nvidia-smi shows 79.19 of 80 GiB
	used := budget
	s.core("ERROR", "core.py:708", "EngineCore failed to start.")
	s.raw(corePrefix(), "Traceback (most recent call last):",
		`  File "`+pyLib+`/vllm/model_executor/model_loader/default_loader.py", line 264, in load_weights`,
		"    loaded_weights = model.load_weights(",
		`  File "`+pyLib+`/torch/utils/_device.py", line 104, in __torch_function__`,
		"    return func(*args, **kwargs)",
		fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s GiB. GPU 0 has a total capacity of %s GiB of which %s MiB is free. "+
			"Including non-PyTorch memory, this process has %s GiB memory in use. Of the allocated memory %s GiB is allocated by PyTorch, and 48.83 MiB is reserved by PyTorch but unallocated. "+
			"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
			"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
			gibs(min(perGPU-used, shardBytes)+gib/2), gibs(capacity), strconv.FormatFloat(float64(max(0, capacity-used))/float64(1<<20), 'f', 2, 64),
			gibs(used), gibs(used-gib/4)))
	s.failPython(engineInitFailed, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

// crash is a crashloop server's engine dying while serving: the server shuts down, exit 1.
func (s *Server) crash() {
	if s.life.Ended() {
		return
	}
	s.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.")
	s.raw(corePrefix(), "Traceback (most recent call last):",
		`  File "`+pyLib+`/vllm/v1/engine/core.py", line 701, in run_engine_core`,
		"    engine_core.run_busy_loop()",
		`  File "`+pyLib+`/vllm/v1/worker/gpu_model_runner.py", line 2258, in execute_model`,
		"    valid_sampled_token_ids = sampled_token_ids.tolist()",
		"RuntimeError: CUDA error: an illegal memory access was encountered",
		"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
		"For debugging consider passing CUDA_LAUNCH_BLOCKING=1")
	s.engineDeadShutdown()
}

// listen opens the port once the engine is up; false: stopped meanwhile, or the address
// is taken (the process exits as uvicorn does).
func (s *Server) listen() bool {
	// uvicorn closes an idle keep-alive connection after 5 s
	return s.life.Listen(net.JoinHostPort(s.spec.IP, strconv.Itoa(s.port)), s, s.cfg.guard, func() {
		s.log.Printf("%sERROR:    [Errno 98] error while attempting to bind on address ('%s', %d): address already in use", apiPrefix, s.spec.IP, s.port)
	})
}

func envTrue(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true"
}

// clock is tqdm's mm:ss.
func clock(sec float64) string {
	n := int(sec)
	return fmt.Sprintf("%02d:%02d", n/60, n%60)
}

// thousands is Python's "{:,}".
func thousands(n int) string {
	s := strconv.Itoa(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// engineDied logs what a never-ready server's engine core says when it dies after start.
func (s *Server) engineDied() {
	s.core("ERROR", "core.py:710", "EngineCore encountered a fatal error.")
	s.raw(corePrefix(), "Traceback (most recent call last):",
		`  File "`+pyLib+`/vllm/v1/engine/core.py", line 701, in run_engine_core`,
		"    engine_core.run_busy_loop()",
		"RuntimeError: CUDA error: unspecified launch failure")
}

// pyBoolStr is Python's str() of a bool.
func pyBoolStr(b bool) string {
	if b {
		return "True"
	}
	return "False"
}
