// The fake SGLang's start, told as SGLang v0.5.3 logs it (the lines controller/engine/sglang's
// startphases.go and lastwords.go read): ServerArgs, the scheduler's torch.distributed init,
// the weights' load, the KV cache, the CUDA graphs, the scheduler's limits, uvicorn, the
// warm-up request and "The server is fired up and ready to roll!". Times follow the model's
// geometry (package hfmodel's catalog) under the kubelet's time scale. Each failure ends the
// log the way SGLang's does:
//   - argparse's refusal: exit 2;
//   - an exception in the launcher's own process (ServerArgs' checks, the model's config):
//     its traceback, exit 1;
//   - an exception in a scheduler (CUDA out of memory, not enough memory for the KV cache, a
//     GPU fault, a lost peer of a multi-node group): "Scheduler hit an exception: <traceback>",
//     then the launcher's "Received sigquit from a child process. It usually means the child
//     failed." and kill_process_tree(os.getpid()), which SIGKILLs the children, then itself and
//     calls sys.exit(0): the launcher is the container's PID 1 (the operator's command has no
//     shell, its multi-node script execs), and a PID 1 ignores a SIGKILL sent from inside its
//     namespace, so the process ends through sys.exit(0): exit code 0, reason Completed
//     (childFailed).

package sglang

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/argparse"
	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

const (
	sglangVersion = "0.5.3"
	// srcDir is where the lmsysorg/sglang images install SGLang (pip install -e from the
	// checkout in /sgl-workspace).
	srcDir = "/sgl-workspace/sglang/python/sglang/srt"
	pyLib  = "/usr/local/lib/python3.12/dist-packages"
	// shardBytes is one safetensors shard, as Hugging Face checkpoints split.
	shardBytes = 5 * hfmodel.GiB
	// hostBaseBytes is the host memory the launcher and its scheduler take before weights.
	hostBaseBytes = 2 * hfmodel.GiB
	// cudaContext is what the CUDA context and NCCL take of a GPU before the weights.
	cudaContext = hfmodel.GiB * 3 / 2
	// kvBytesPerToken is one token's KV cache for a model outside the catalog: a Llama-8B-like
	// figure (32 layers x 8 KV heads x 128 x 2 x bf16), spread over the ranks.
	kvBytesPerToken = 128 << 10
)

// childFailed is how the launcher ends when a child (a scheduler) failed: sys.exit(0) as PID 1.
var childFailed = proc.Exit{Code: 0, Reason: "Completed"}

// stamp is SGLang's logger's asctime: "%Y-%m-%d %H:%M:%S", the container's local time (UTC).
func stamp() string { return time.Now().UTC().Format(time.DateTime) }

// info logs a line of the launcher or the HTTP server (no rank prefix).
func (s *Server) info(format string, args ...any) {
	s.log.Printf("[%s] %s", stamp(), fmt.Sprintf(format, args...))
}

// rank is the scheduler's prefix: " TP<n>", " PP<p> TP<n>" with pipeline stages.
func (s *Server) rank() string {
	tp := 0
	if s.args != nil && s.args.nnodes > 1 { // this node's first rank
		tp = s.args.nodeRank * max(1, s.args.tp*s.args.pp/s.args.nnodes) % max(1, s.args.tp)
	}
	if s.args != nil && s.args.pp > 1 {
		return fmt.Sprintf(" PP0 TP%d", tp)
	}
	return fmt.Sprintf(" TP%d", tp)
}

// sched logs a line of the (first) scheduler process of this node.
func (s *Server) sched(format string, args ...any) {
	s.log.Printf("[%s%s] %s", stamp(), s.rank(), fmt.Sprintf(format, args...))
}

// uvicorn logs a line of uvicorn's loggers, as set_uvicorn_logging_configs formats them.
func (s *Server) uvicorn(format string, args ...any) {
	switch s.args.logLevelHTTP {
	case "warning", "error", "critical":
		return
	}
	s.info("INFO:     %s", fmt.Sprintf(format, args...))
}

// raw writes lines as a process prints them to stderr (a traceback's lines after the first).
func (s *Server) raw(lines ...string) {
	for _, l := range lines {
		for _, part := range strings.Split(l, "\n") {
			s.log.Printf("%s", part)
		}
	}
}

// launcherFrames lead from `python3 -m sglang.launch_server` into prepare_server_args.
var launcherFrames = []string{
	"Traceback (most recent call last):",
	`  File "<frozen runpy>", line 198, in _run_module_as_main`,
	`  File "<frozen runpy>", line 88, in _run_code`,
	`  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 11, in <module>`,
	"    server_args = prepare_server_args(sys.argv[1:])",
}

// failLauncher ends the process on an exception in the launcher itself, exit 1.
func (s *Server) failLauncher(frames []string, last ...string) {
	lines := append(append(append([]string(nil), launcherFrames...), frames...), last...)
	s.raw(lines...)
	s.life.Exit(proc.Exit{Code: 1, Reason: "Error"})
}

// argFailure is argparse refusing the command line: its usage block and error, exit 2; -h
// prints the usage and exits 0.
func (s *Server) argFailure(err error) {
	var help *argparse.HelpRequest
	var ae *argparse.Error
	switch {
	case asError(err, &help):
		s.raw(help.Usage)
		s.life.Exit(proc.Exit{Code: 0, Reason: "Completed"})
	case asError(err, &ae):
		s.raw(ae.Lines()...)
		s.life.Exit(proc.Exit{Code: 2, Reason: "Error"})
	default:
		s.raw(err.Error())
		s.life.Exit(proc.Exit{Code: 2, Reason: "Error"})
	}
}

// schedulerFrames lead into a scheduler's failure at start (run_scheduler_process).
var schedulerFrames = []string{
	`  File "` + srcDir + `/managers/scheduler.py", line 2887, in run_scheduler_process`,
	"    scheduler = Scheduler(",
	`  File "` + srcDir + `/managers/scheduler.py", line 331, in __init__`,
	"    self.tp_worker = TpWorkerClass(",
	`  File "` + srcDir + `/managers/tp_worker.py", line 84, in __init__`,
	"    self.model_runner = ModelRunner(",
}

// schedulerDied is a scheduler's exception: its traceback in one logged message, the
// launcher's reaction, and the process's end (childFailed).
func (s *Server) schedulerDied(frames []string, exc ...string) {
	s.sched("Scheduler hit an exception: Traceback (most recent call last):")
	s.raw(frames...)
	s.raw(exc...)
	s.raw("")
	s.info("Received sigquit from a child process. It usually means the child failed.")
	s.life.Exit(childFailed)
}

// imageEntrypoint is an SGLang image run without a command: the CUDA base image's
// nvidia_entrypoint.sh prints its banner and, given nothing to run, ends: the lmsysorg/sglang
// images start no server by themselves.
func (s *Server) imageEntrypoint() {
	s.raw("", "==========", "== CUDA ==", "==========", "", "CUDA Version 12.6.1", "",
		"Container image Copyright (c) 2016-2024, NVIDIA CORPORATION & AFFILIATES. All rights reserved.", "",
		"This container image and its contents are governed by the NVIDIA Deep Learning Container License.",
		"By pulling and using the container, you accept the terms and conditions of this license:",
		"https://developer.nvidia.com/ngc/nvidia-deep-learning-container-license", "",
		"A copy of this license is made available in this container at /NGC-DL-CONTAINER-LICENSE for your convenience.", "")
	s.life.Exit(proc.Exit{Code: 0, Reason: "Completed"})
}

// memFraction is --mem-fraction-static, or ServerArgs' default for the world size.
func (a *serverArgs) memFractionStatic() float64 {
	if a.memFraction > 0 {
		return a.memFraction
	}
	switch world := a.tp * a.pp; {
	case world >= 16:
		return 0.79
	case world >= 8:
		return 0.81
	case world >= 4:
		return 0.85
	case world >= 2:
		return 0.87
	}
	return 0.88
}

// repr is the ServerArgs(...) line: every option's value as the dataclass prints it, in
// registration order, with the defaults launch_server fills in.
func (a *serverArgs) repr() string {
	var b strings.Builder
	b.WriteString("ServerArgs(")
	for i, o := range serverOptions() {
		if o.Action == argparse.Help {
			continue
		}
		dest := o.Dest
		switch dest {
		case "tensor_parallel_size":
			dest = "tp_size"
		case "pipeline_parallel_size":
			dest = "pp_size"
		case "data_parallel_size":
			dest = "dp_size"
		case "expert_parallel_size":
			dest = "ep_size"
		}
		v, ok := a.ns[o.Dest]
		if !ok {
			v = defaultOf(a, o)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(dest + "=" + pyRepr(v))
	}
	b.WriteString(")")
	return b.String()
}

// defaultOf is an option's value when not given, as ServerArgs fills it.
func defaultOf(a *serverArgs, o argparse.Option) any {
	switch o.Dest {
	case "tokenizer_path":
		return a.modelPath
	case "served_model_name":
		return a.servedName
	case "host":
		return a.host
	case "port":
		return a.port
	case "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "expert_parallel_size", "nnodes", "stream_interval":
		return 1
	case "mem_fraction_static":
		return a.memFractionStatic()
	case "max_loras_per_batch":
		return 8
	case "chunked_prefill_size":
		return a.chunkedPrefill
	case "max_prefill_tokens":
		return a.maxPrefillTokens
	case "tokenizer_mode", "load_format", "dtype", "kv_cache_dtype":
		return "auto"
	case "schedule_policy":
		return "fcfs"
	case "log_level":
		return "info"
	case "device":
		return "cuda"
	case "lora_backend":
		return "triton"
	case "node_rank", "base_gpu_id":
		return 0
	case "decode_log_interval":
		return 40
	}
	if o.Action == argparse.StoreTrue {
		return false
	}
	return nil
}

// kvCellBytes is one token's KV cache on one GPU, as ModelRunner.cell_size computes it: K and
// V for the GPU's share of the KV heads over every layer of its stage in bf16, or DeepSeek's
// MLA latent vector (kv_lora_rank + qk_rope_head_dim) whole on every rank.
func kvCellBytes(g hfmodel.Geometry, known bool, tp, pp int) int64 {
	if !known {
		return max(1, int64(kvBytesPerToken)/int64(tp*pp))
	}
	layers := int64(max(1, g.Layers/max(pp, 1)))
	if g.MLA > 0 {
		return int64(g.MLA) * layers * 2
	}
	hd := g.HeadDim
	if hd == 0 && g.Heads > 0 {
		hd = g.Hidden / g.Heads
	}
	return int64(max(1, g.KVHeads/tp)*hd) * layers * 2 * 2
}

// contextLen is the model's context: --context-length, else config.json's
// max_position_embeddings (yarn: its original length times the factor), else a guess.
func contextLen(a *serverArgs, g hfmodel.Geometry, known bool) int {
	if a.contextLength > 0 {
		return a.contextLength
	}
	if known {
		if g.Rope.Type == "yarn" {
			return int(float64(g.Rope.Original) * g.Rope.Factor)
		}
		return g.MaxPosition
	}
	l := strings.ToLower(a.modelPath)
	switch {
	case strings.Contains(l, "llama-3"):
		return 131072
	case strings.Contains(l, "qwen3"):
		return 40960
	case strings.Contains(l, "qwen2.5"), strings.Contains(l, "mistral"):
		return 32768
	}
	return 8192
}

func gb(b int64) string { return strconv.FormatFloat(float64(b)/float64(hfmodel.GiB), 'f', 2, 64) }

// run is the process from its first log line to serving (or its death).
func (s *Server) run() {
	a, sp := s.args, s.spec
	gpus := sp.GPUs
	if gpus == 0 && strings.HasPrefix(sp.Image, proc.FakeRegistry) {
		gpus = 1 // a kubelet.fake/ image plays its behavior on any pod
	}
	// ServerArgs.__post_init__: the GPU's memory from nvidia-smi, which the NVIDIA runtime
	// mounts only into a container that was given a GPU
	if gpus == 0 {
		s.failLauncher(gpuMemFrames, "RuntimeError: nvidia-smi not found. Ensure NVIDIA drivers are installed and accessible.")
		return
	}
	if err := a.check(); err != nil {
		pe := err.(*postInitError)
		s.failLauncher(pe.frames, pe.exc)
		return
	}
	// ... and the model's config.json (get_hf_config), from the Hub or a directory
	model := a.modelPath
	local := strings.HasPrefix(model, "/") || strings.HasPrefix(model, "./")
	var cacheVolume string
	if local {
		mount, volume, ok := hfmodel.MountFor(sp.Mounts, model)
		if ok && s.cfg.Weights.HasDirs(volume) && !s.cfg.Weights.Has(volume, "dir:"+strings.TrimSuffix(strings.TrimPrefix(model, mount), "/")) {
			ok = false
		}
		if !ok {
			s.failLauncher(hfConfigFrames, fmt.Sprintf("OSError: Incorrect path_or_model_id: '%s'. Please provide either the path to a local folder or the repo_id of a model on the Hub.", model))
			return
		}
	} else {
		home := sp.Env["HF_HOME"]
		if home == "" {
			home = "/root/.cache/huggingface"
		}
		if a.downloadDir != "" {
			home = a.downloadDir
		}
		_, cacheVolume, _ = hfmodel.MountFor(sp.Mounts, home)
		if hfmodel.Gated(model) && sp.Env["HF_TOKEN"] == "" && sp.Env["HUGGING_FACE_HUB_TOKEN"] == "" {
			s.failLauncher(hfConfigFrames, "OSError: You are trying to access a gated repo.",
				fmt.Sprintf("Make sure to have access to it at https://huggingface.co/%s.", model),
				"401 Client Error. (Request ID: Root=1-6750a1f2-3c5e0b4d2a1f6e7c8b9d0a1e;5f0e9c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b)",
				"",
				fmt.Sprintf("Cannot access gated repo for url https://huggingface.co/%s/resolve/main/config.json.", model),
				fmt.Sprintf("Access to model %s is restricted. You must have access to it and be authenticated to access it. Please log in.", model))
			return
		}
		if envTrue(sp.Env["HF_HUB_OFFLINE"]) && !s.cfg.Weights.Has(cacheVolume, model) {
			s.failLauncher(hfConfigFrames, fmt.Sprintf("OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files.\n"+
				"Check your internet connection or see how to run the library in offline mode at 'https://huggingface.co/docs/transformers/installation#offline-mode'."))
			return
		}
	}
	s.info("server_args=%s", a.repr())
	s.lora = newLoRARegistry(a)
	s.lora.find = s.findAdapter

	geo, known := hfmodel.Lookup(model)
	world := a.tp * a.pp
	perNode := max(1, world/max(1, a.nnodes)) // the GPUs each node's ranks need
	if a.nodeRank == 0 {
		s.info("Using default HuggingFace chat template with detected content format: string")
	}
	if !s.life.Wait(s.cfg.modelled(8)) { // spawning the scheduler: python, torch and CUDA imports
		return
	}
	s.sched("Attention backend not explicitly specified. Use flashinfer backend by default.")
	s.sched("Init torch distributed begin.")
	if sp.GPUFault != proc.FaultNone {
		s.gpuFaultAtStart(sp.GPUFault)
		return
	}
	if perNode > gpus {
		// a rank's torch.cuda.set_device(gpu_id) for a device the container was not given
		s.schedulerDied(append(append([]string(nil), schedulerFrames...),
			`  File "`+srcDir+`/model_executor/model_runner.py", line 610, in init_torch_distributed`,
			"    torch.get_device_module(self.device).set_device(self.gpu_id)",
			`  File "`+pyLib+`/torch/cuda/__init__.py", line 567, in set_device`,
			"    torch._C._cuda_setDevice(device)"),
			"RuntimeError: CUDA error: invalid device ordinal", "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
			"For debugging consider passing CUDA_LAUNCH_BLOCKING=1", "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
		return
	}
	if perNode > 1 && sp.ShmSize == -1 {
		s.schedulerDied(append(append([]string(nil), schedulerFrames...),
			`  File "`+srcDir+`/distributed/parallel_state.py", line 1375, in init_distributed_environment`,
			"    torch.distributed.barrier()"),
			"torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3353, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.27.3",
			"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
			"Last error:",
			"Error while creating shared memory segment /dev/shm/nccl-8vjLq2 (size 9637888)")
		return
	}
	if a.nnodes > 1 {
		g, ok := s.rendezvous()
		if !ok {
			return
		}
		s.group = g
	}
	s.sched("Init torch distributed ends. mem usage=0.00 GB")

	// loading: each GPU holds its share of the weights
	weights := hfmodel.WeightBytes(model)
	perGPU := weights / int64(world)
	capacity := s.cfg.GPUMemory - s.cfg.GPUMemory/99 // as torch sees 79.19 of 80 GiB
	avail := capacity - cudaContext
	s.sched("Load weight begin. avail mem=%s GB", gb(avail))
	if !local {
		s.sched("Using model weights format ['*.safetensors']")
	}
	if !local && !s.cfg.Weights.Has(cacheVolume, model) {
		took := s.cfg.DownloadTime
		if took == 0 {
			took = s.cfg.scaled(weights, s.cfg.DownloadBandwidth)
		}
		if sp.DownloadMBPerS > 0 {
			took = s.cfg.scaled(weights, sp.DownloadMBPerS*1e6)
		}
		if !s.life.Wait(took) {
			return
		}
		s.cfg.Weights.Put(cacheVolume, model)
	}
	n := int(max(1, (weights+shardBytes-1)/shardBytes))
	oomShard := -1
	if perGPU > avail {
		oomShard = int(float64(n) * float64(avail) / float64(perGPU))
	}
	killShard := -1
	if staged := perGPU / 4; sp.MemoryLimit > 0 && hostBaseBytes+staged > sp.MemoryLimit {
		killShard = int(float64(n) * math.Max(0, float64(sp.MemoryLimit-hostBaseBytes)) / float64(staged))
	}
	if sp.Behavior.Kind == proc.OOMKilled {
		killShard = n / 2
	}
	load := s.cfg.LoadTime
	if load == 0 {
		load = max(100*time.Millisecond, s.cfg.scaled(perGPU, s.cfg.LoadBandwidth))
	}
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
		s.log.Printf("Loading safetensors checkpoint shards: %3d%% Completed | %d/%d [%s<%s, %s]", 100*i/n, i, n, clock(el), "00:00", rate)
		if i == n {
			break
		}
		if i == killShard {
			if sp.Behavior.Kind == proc.OOMKilled && !s.life.Wait(s.cfg.CrashRun) {
				return
			}
			s.life.Exit(proc.Exit{Code: 137, Reason: "OOMKilled"}) // the kernel's SIGKILL: not a word more
			return
		}
		if i == oomShard {
			s.cudaOOM(perGPU, avail)
			return
		}
		if !s.life.Wait(per) {
			return
		}
	}
	avail -= perGPU
	dtype := "torch.bfloat16"
	if known {
		dtype = geo.Dtype
	}
	s.sched("Load weight end. type=%s, dtype=%s, avail mem=%s GB, mem usage=%s GB.", hfmodel.Architecture(model), dtype, gb(avail), gb(perGPU))

	// the KV cache: what the static fraction leaves after the weights (profile_max_num_token)
	ctx := contextLen(a, geo, known)
	rest := avail - int64(float64(capacity)*(1-a.memFractionStatic()))
	cell := kvCellBytes(geo, known, a.tp, a.pp)
	tokens := 0
	if rest > 0 {
		tokens = int(rest / cell)
	}
	if a.maxTotalTokens > 0 {
		tokens = min(tokens, a.maxTotalTokens)
	}
	if tokens <= 0 {
		s.schedulerDied(append(append([]string(nil), schedulerFrames...),
			`  File "`+srcDir+`/model_executor/model_runner.py", line 312, in __init__`,
			"    self.initialize(min_per_gpu_memory)",
			`  File "`+srcDir+`/model_executor/model_runner.py", line 392, in initialize`,
			"    self.init_memory_pool(",
			`  File "`+srcDir+`/model_executor/model_runner.py", line 1622, in init_memory_pool`,
			"    raise RuntimeError("),
			"RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
		return
	}
	kv := int64(tokens) * cell
	avail -= kv
	s.sched("KV Cache is allocated. #tokens: %d, K size: %s GB, V size: %s GB", tokens, gb(kv/2), gb(kv/2))
	s.sched("Memory pool end. avail mem=%s GB", gb(avail))
	if a.enableLoRA && len(a.loraPaths) == 0 && (a.maxLoRARank == 0 || len(a.loraTargets) == 0) {
		s.schedulerDied(append(append([]string(nil), schedulerFrames...),
			`  File "`+srcDir+`/model_executor/model_runner.py", line 1211, in init_lora_manager`,
			"    self.lora_manager = LoRAManager(",
			`  File "`+srcDir+`/lora/lora_manager.py", line 85, in __init__`,
			"    self.init_state(",
			`  File "`+srcDir+`/lora/lora_manager.py", line 300, in init_state`,
			"    assert lora_paths or ("),
			"AssertionError: When no initial --lora-paths is provided, you need to specify both --max-lora-rank and --lora-target-modules for LoRA initialization.")
		return
	}
	if !a.disableCUDAGraph {
		maxBS := a.cudaGraphMaxBS
		if maxBS == 0 {
			maxBS = 160
		}
		s.sched("Capture cuda graph begin. This can take up to several minutes. avail mem=%s GB", gb(avail))
		s.sched("Capture cuda graph bs %s", graphSizes(maxBS))
		g0 := time.Now()
		if !s.life.Wait(s.cfg.modelled(10)) {
			return
		}
		secs := time.Since(g0).Seconds()
		n := len(strings.Split(graphSizes(maxBS), ","))
		s.log.Printf("Capturing batches (bs=1 avail_mem=%s GB): 100%%|██████████| %d/%d [%s<00:00, %5.2fit/s]", gb(avail-gibFrac(0.58)), n, n, clock(secs), float64(n)/math.Max(secs, 1e-3))
		avail -= gibFrac(0.6)
		s.sched("Capture cuda graph end. Time elapsed: %.2f s. mem usage=0.60 GB. avail mem=%s GB.", secs, gb(avail))
	}
	if s.group != nil && !s.group.loaded(s) {
		return
	}
	maxRunning := a.maxRunning
	if maxRunning == 0 {
		maxRunning = s.cfg.MaxRunning
	}
	if maxRunning == 0 {
		maxRunning = min(max(int(float64(tokens)/float64(ctx)*512), 2048), 4096)
	}
	s.sched("max_total_num_tokens=%d, chunked_prefill_size=%d, max_prefill_tokens=%d, max_running_requests=%d, context_len=%d, available_gpu_mem=%s GB",
		tokens, a.chunkedPrefill, a.maxPrefillTokens, maxRunning, ctx, gb(avail))
	for _, ref := range a.loraPaths {
		if msg := s.lora.load(ref.Name, ref.Path, ref.Pinned); msg != "" {
			s.schedulerDied(append(append([]string(nil), schedulerFrames...),
				`  File "`+srcDir+`/lora/lora_manager.py", line 322, in init_lora_adapters`,
				"    raise RuntimeError("), fmt.Sprintf("RuntimeError: Failed to load LoRA adapter %s: %s", ref.Name, msg))
			return
		}
	}
	s.lora.mu.Lock()
	s.lora.pool = true // runtime loads are checked against the pool's rank from now on
	s.lora.mu.Unlock()
	eng := newEngine(maxRunning, a.maxQueued, tokens, ctx, a)
	s.life.Lock()
	s.eng = eng
	s.life.Unlock()
	if a.nodeRank >= 1 {
		s.serveWorker()
		return
	}
	s.serve()
}

// serve is the leader's (or a single node's) HTTP server: uvicorn, then the warm-up.
func (s *Server) serve() {
	a, sp := s.args, s.spec
	s.dying = sp.Behavior.Kind == proc.NeverReady // set before the handlers can read it
	if !s.listen(s) {
		return
	}
	s.uvicorn("Started server process [1]")
	s.uvicorn("Waiting for application startup.")
	s.uvicorn("Application startup complete.")
	host := a.host
	s.uvicorn("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", host, a.port)
	if !a.skipWarmup {
		// _execute_server_warmup: GET /get_model_info after a second, then one /generate
		if !s.life.Wait(s.cfg.modelled(1)) {
			return
		}
		s.accessLine("127.0.0.1:40512", "GET", "/get_model_info", 200)
		s.info("Start of co-locate warmup ...")
		_, err := s.generate(nil, "The capital city of France is", 8, "", nil)
		if err != nil {
			return
		}
		s.accessLine("127.0.0.1:40520", "POST", "/generate", 200)
	}
	s.up.Store(true)
	s.info("The server is fired up and ready to roll!")
	if sp.Behavior.Kind == proc.CrashLoop {
		s.life.CrashAfter(s.cfg.CrashRun, s.crash)
	}
}

// listen opens the HTTP port with h; false: stopped meanwhile, or the address is taken
// (uvicorn's error, and the launcher exits 1).
func (s *Server) listen(h http.Handler) bool {
	// uvicorn's timeout_keep_alive=5 (launch_server passes it)
	return s.life.Listen(net.JoinHostPort(s.spec.IP, strconv.Itoa(s.port)), h, s.guard, func() {
		s.log.Printf("[%s] ERROR:    [Errno 98] error while attempting to bind on address ('%s', %d): address already in use", stamp(), s.args.host, s.port)
	})
}

func (s *Server) guard(l net.Listener) net.Listener { return proc.Guard(s.cfg.Ingress, l) }

// cudaOOM is torch running out of GPU memory while a scheduler loads its shard of the weights.
func (s *Server) cudaOOM(perGPU, avail int64) {
	capacity := s.cfg.GPUMemory - s.cfg.GPUMemory/99
	used := capacity - hfmodel.GiB/2
	s.schedulerDied(append(append([]string(nil), schedulerFrames...),
		`  File "`+srcDir+`/model_executor/model_runner.py", line 790, in load_model`,
		"    self.model = get_model(",
		`  File "`+srcDir+`/model_loader/loader.py", line 542, in load_model`,
		"    self.load_weights_and_postprocess(",
		`  File "`+pyLib+`/torch/utils/_device.py", line 104, in __torch_function__`,
		"    return func(*args, **kwargs)"),
		fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s GiB. GPU 0 has a total capacity of %s GiB of which %s MiB is free. "+
			"Including non-PyTorch memory, this process has %s GiB memory in use. Of the allocated memory %s GiB is allocated by PyTorch, and 48.83 MiB is reserved by PyTorch but unallocated. "+
			"If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "+
			"See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
			gb(min(perGPU-avail, shardBytes)+hfmodel.GiB/2), gb(capacity), strconv.FormatFloat(float64(hfmodel.GiB/2)/float64(1<<20), 'f', 2, 64),
			gb(used), gb(used-hfmodel.GiB)))
}

// crash is a crashloop server's scheduler dying while serving.
func (s *Server) crash() {
	if s.life.Ended() {
		return
	}
	s.schedulerDied([]string{
		`  File "` + srcDir + `/managers/scheduler.py", line 2917, in run_scheduler_process`,
		"    scheduler.event_loop_overlap()",
		`  File "` + srcDir + `/managers/scheduler.py", line 1001, in event_loop_overlap`,
		"    self.process_batch_result(tmp_batch, tmp_result)",
		`  File "` + srcDir + `/managers/scheduler_output_processor_mixin.py", line 216, in process_batch_result_decode`,
		"    next_token_ids = next_token_ids.tolist()",
	}, "RuntimeError: CUDA error: an illegal memory access was encountered",
		"CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
		"For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
		"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
}

// graphSizes is the batch sizes SGLang captures graphs for, up to maxBS (server_args'
// cuda_graph_bs: 1, 2, 4, 8, 12, then by 8 to 256, by 16 beyond), as Python prints the list.
func graphSizes(maxBS int) string {
	var bs []string
	for _, b := range []int{1, 2, 4, 8, 12} {
		if b <= maxBS {
			bs = append(bs, strconv.Itoa(b))
		}
	}
	for b := 16; b <= maxBS; b += map[bool]int{true: 8, false: 16}[b < 256] {
		bs = append(bs, strconv.Itoa(b))
	}
	return "[" + strings.Join(bs, ", ") + "]"
}

func gibFrac(f float64) int64 { return int64(f * float64(hfmodel.GiB)) }

func envTrue(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	return v == "1" || v == "true" || v == "yes"
}

// clock is tqdm's mm:ss.
func clock(sec float64) string {
	n := int(sec)
	return fmt.Sprintf("%02d:%02d", n/60, n%60)
}

// asError is errors.As for the argparse types.
func asError[T error](err error, target *T) bool {
	t, ok := err.(T)
	if ok {
		*target = t
	}
	return ok
}
