// Package sglang is what the operator knows of SGLang v0.5 (sgl-project/sglang, the v0.5.3
// line): the flags it refuses in a spec (args.go), its command line and container (this file),
// its metric names, and its log readers: the phases of a start (startphases.go) and the last
// words of a crash (lastwords.go). Pure, standard library only (and vLLM's package, for what
// torch, CUDA and huggingface_hub print alike under both); registered as Name.
package sglang

import (
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// Name is the engine's registered name, as spec.engine will spell it.
const Name = "sglang"

func init() { engine.Register(SGLang{}) }

// SGLang is SGLang v0.5 as an engine.Engine.
type SGLang struct{}

var _ engine.Engine = SGLang{}

// Name is Name.
func (SGLang) Name() string { return Name }

// RefusedArgs are the flags spec.engineArgs may not carry (args.go).
func (SGLang) RefusedArgs() (always, withAdapters []engine.OwnedArg) {
	return refusedArgs, refusedArgsWithAdapters
}

// RefusedEnv is none: no variable SGLang reads (python/sglang/srt/environ.py's SGLANG_*) moves
// the port, the served name or the adapter endpoints the operator relies on, and runtime LoRA
// needs no switch (RuntimeAdaptersEnv).
func (SGLang) RefusedEnv() (always, withAdapters []engine.OwnedName) { return nil, nil }

// The series SGLang exports on /metrics (python/sglang/srt/metrics/collector.py:
// SchedulerMetricsCollector's gauges, TokenizerMetricsCollector's histograms), each labelled
// model_name (the served name) and only with --enable-metrics: without it http_server.py
// mounts no /metrics and the collectors are not made.
const (
	// QueueMetric is the queue's length, the HPA's signal, without SGLang's prefix.
	QueueMetric = "num_queue_reqs"
	// QueueSeries is the series SGLang exports the queue as: the scheduler's waiting queue.
	QueueSeries = "sglang:" + QueueMetric
	// RunningSeries is the count of requests in the running batch.
	RunningSeries = "sglang:num_running_reqs"
	// KVCacheUsageSeries is the token pool's use, 0 to 1: SGLang's KV cache is its token pool.
	KVCacheUsageSeries = "sglang:" + KVCacheUsageMetric
	// KVCacheUsageMetric is the name the custom metrics API serves the token pool's use under.
	KVCacheUsageMetric = "token_usage"
	// TTFTSeries is the time-to-first-token histogram, in seconds.
	TTFTSeries = "sglang:time_to_first_token_seconds"
)

// Metrics are SGLang's series names.
func (SGLang) Metrics() engine.Metrics {
	return engine.Metrics{Queue: QueueSeries, QueueName: QueueMetric, Running: RunningSeries,
		KVCacheUsage: KVCacheUsageSeries, KVCacheName: KVCacheUsageMetric, TTFT: TTFTSeries, TTFTName: engine.TTFTP95Name}
}

// The container's parts.
const (
	// PortName and Port are the HTTP endpoint, vLLM's 8000 rather than SGLang's default 30000,
	// so the Service, the gateway's target port and the network policies are the same whatever
	// the engine; the operator passes it.
	PortName = "http"
	Port     = 8000
	// Host is every address: SGLang's --host defaults to 127.0.0.1, which no probe reaches.
	Host = "0.0.0.0"
	// HealthPath is the readiness path. http_server.py (v0.5) routes both /health and
	// /health_generate to health_generate: it answers 503 while the tokenizer manager's
	// server_status is Starting (until _wait_and_warmup's warm-up request has run and set it
	// Up) and while it exits; then /health answers 200 without a generation unless
	// SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is set, while /health_generate always sends a
	// one-token request and waits for it up to SGLANG_HEALTH_CHECK_TIMEOUT (20 s): on a busy
	// server a probe would wait behind the batch and fail, taking a loaded pod out of the
	// Service. /health thus says "warmed up and serving" at no cost.
	HealthPath = "/health"
	// LoadAdapterPath and UnloadAdapterPath are SGLang's runtime LoRA endpoints
	// (http_server.py: POST /load_lora_adapter {lora_name, lora_path}, POST /unload_lora_adapter
	// {lora_name}): at the root, not under /v1 as vLLM's are. Both answer a LoRAUpdateOutput
	// (managers/io_struct.py: success, error_message, loaded_adapters), 200 on success and 400
	// otherwise; the scheduler's LoRAManager.create_lora_update_result fills loaded_adapters
	// with every adapter loaded after the call, name to path.
	LoadAdapterPath   = "/load_lora_adapter"
	UnloadAdapterPath = "/unload_lora_adapter"
	// UnloadMissing is how SGLang refuses to unload an adapter it does not have: the tokenizer
	// manager's LoRARegistry.unregister raises "LoRA with name X does not exist. Loaded LoRAs:
	// ...", answered 400 with no loaded_adapters.
	UnloadMissing = "does not exist"
	// LoadPresent is how SGLang refuses to load a name it has loaded: the scheduler's
	// LoRAManager.validate_new_adapter raises "Failed to load LoRA adapter X because it is
	// already loaded" before reading the path, answered 400 with loaded_adapters listing every
	// adapter loaded (X among them, from the path it was first loaded from). The name then is
	// loaded; whether from the path asked for, only loaded_adapters says.
	LoadPresent = "because it is already loaded"
	// Image is the image an SGLang model without spec.image runs: the release this package is
	// read from, its CUDA 12.6 build (the lmsysorg/sglang tags are vX.Y.Z-cuNNN).
	Image = "lmsysorg/sglang:v0.5.3-cu126"
	// DefaultLoRARank is --max-lora-rank when the spec gives none: with no --lora-paths at start
	// SGLang cannot infer the rank and target modules from adapters (server_args.py's LoRA
	// checks), so the operator passes them; 64 covers the usual ranks (8-64).
	DefaultLoRARank = 64
	// DistInitPort is the leader's torch.distributed rendezvous port of a multi-node group.
	DistInitPort = 20000
	launchModule = "sglang.launch_server"
)

// Server is the container's command, whatever the image's entrypoint: the lmsysorg/sglang
// images run no server by default; `python3 -m sglang.launch_server` is launch_server.py's
// documented entry point on every v0.5 release.
//
// Its /v1/models (http_server.py's available_models, v0.5.3) lists the served model only:
// SGLang lists loaded adapters there from sgl-project/sglang#12229 (after v0.5.4) on, so the
// load and unload answers are all that says what is loaded.
func (SGLang) Server() engine.Server {
	return engine.Server{Command: []string{"python3", "-m", launchModule}, PortName: PortName, Port: Port,
		HealthPath: HealthPath,
		Adapters: engine.AdapterAPI{LoadPath: LoadAdapterPath, UnloadPath: UnloadAdapterPath, AnswerLists: true,
			UnloadMissing: UnloadMissing, LoadPresent: LoadPresent}}
}

// Image is the Image constant.
func (SGLang) Image() string { return Image }

// portArg is Port as --port's value.
var portArg = strconv.Itoa(Port)

// ServeArgs is launch_server's command line: the model, the served name, every address on
// Port, the metrics (the autoscaler's signal), the GPU split, LoRA for adapters, then the
// user's arguments. Across pods MultiNode adds the group's flags.
func (SGLang) ServeArgs(s engine.Serve) []string {
	args := make([]string, 0, 24+len(s.Extra))
	args = append(args, "--model-path", s.Model, "--served-model-name", s.ServedName,
		"--host", Host, "--port", portArg, "--enable-metrics")
	if s.TensorParallel > 0 {
		args = append(args, "--tp-size", strconv.Itoa(s.TensorParallel))
	}
	if s.PipelineParallel > 0 {
		args = append(args, "--pp-size", strconv.Itoa(s.PipelineParallel))
	}
	if s.Adapters {
		rank := s.MaxLoRARank
		if rank <= 0 {
			rank = DefaultLoRARank
		}
		// --max-loaded-loras (adapters in host memory) must be at least --max-loras-per-batch.
		args = append(args, "--enable-lora", "--max-loras-per-batch", strconv.Itoa(s.MaxLoRAs),
			"--max-loaded-loras", strconv.Itoa(max(s.MaxCPULoRAs, s.MaxLoRAs)),
			"--max-lora-rank", strconv.Itoa(rank), "--lora-target-modules", "all")
	}
	return append(args, s.Extra...)
}

// Revision is --revision among args (server_args.py: "--revision"), or an argparse prefix of
// it; "" without one.
func (SGLang) Revision(args []string) string {
	rev := ""
	for i, a := range args {
		flag, value, eq := strings.Cut(a, "=")
		if len(flag) < len("--rev") || !strings.HasPrefix("--revision", flag) {
			continue
		}
		switch {
		case eq:
			rev = value
		case i+1 < len(args):
			rev = args[i+1]
		}
	}
	return rev
}

// MultiNode are the shell scripts of a group's leader and workers: SGLang needs no Ray; every
// pod runs launch_server with the group's size (--nnodes), its rank (--node-rank; the leader
// 0, a worker $(LWS_WORKER_INDEX)) and the leader's rendezvous (--dist-init-addr), and only
// rank 0 serves HTTP. --dist-timeout is how long torch.distributed waits for the group to
// form. $(LWS_...) are the kubelet's expansions of the variables LeaderWorkerSet injects.
func (SGLang) MultiNode(args []string, formSeconds int32) (leader, worker string) {
	var b strings.Builder
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	group := " --nnodes $(LWS_GROUP_SIZE) --dist-init-addr $(LWS_LEADER_ADDRESS):" + strconv.Itoa(DistInitPort) +
		" --dist-timeout " + strconv.Itoa(int(formSeconds))
	run := "exec python3 -m " + launchModule + b.String() + group
	return run + " --node-rank 0", run + " --node-rank $(LWS_WORKER_INDEX)"
}

// shellQuote quotes s for sh: the engine arguments are the user's.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// StartPhases reads SGLang's start log (startphases.go).
func (SGLang) StartPhases(log string, started time.Time) []engine.Phase {
	return StartPhasesOf(log, started)
}

// DecisiveLine reads a crash's last words (lastwords.go).
func (SGLang) DecisiveLine(lines []string) string { return decisive(lines) }

// GPUFault is vLLM's reader: the lines are torch's, CUDA's and the driver's, the same under
// both engines.
func (SGLang) GPUFault(line string) (fault, advice string) { return vllm.GPUFault(line) }

// ParallelismRefusal is "" for every line: SGLang has no check of the heads against the split
// with a message of its own (its layers assert the division, a bare AssertionError that names
// no sizes), so there is nothing to read a better split from.
func (SGLang) ParallelismRefusal(string) string { return "" }

// Fill is vLLM's: huggingface_hub's snapshot_download of the safetensors (else bin, else pt)
// and the config and tokenizer files, which is what SGLang's DefaultModelLoader fetches too
// (model_loader/weight_utils.py's download_weights_from_hf, the same patterns), and every
// SGLang image ships huggingface_hub.
func (SGLang) Fill() engine.Fill { return vllm.VLLM{}.Fill() }

// DownloadProgress reads a fill's log, the fill being vLLM's.
func (SGLang) DownloadProgress(log string) (engine.Progress, bool) {
	return vllm.ParseDownloadProgress(log)
}
