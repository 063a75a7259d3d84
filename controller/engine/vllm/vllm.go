// Package vllm is what the operator knows of vLLM v0.11: the flags it refuses in a spec
// (args.go), its command line and container (this file), its metric names, and its log
// readers: the phases of a start (startphases.go), the last words of a crash (lastwords.go,
// gpufaults.go, parallelism.go) and a weights fill's progress (fill.go). Pure, standard library
// only; registered as engine.VLLM.
package vllm

import (
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

func init() { engine.Register(VLLM{}) }

// VLLM is vLLM v0.11 as an engine.Engine.
type VLLM struct{}

var _ engine.Engine = VLLM{}

// Name is engine.VLLM.
func (VLLM) Name() string { return engine.VLLM }

// RefusedArgs are the flags spec.engineArgs may not carry (args.go).
func (VLLM) RefusedArgs() (always, withAdapters []engine.OwnedArg) {
	return refusedArgs, refusedArgsWithAdapters
}

// RefusedEnv are the variables spec.env may not set (args.go).
func (VLLM) RefusedEnv() (always, withAdapters []engine.OwnedName) {
	return refusedEnv, refusedEnvWithAdapters
}

// The series vLLM v0.11 exports on /metrics (vllm/v1/metrics/loggers.py).
const (
	// QueueMetric is the queue's length, the HPA's signal, without vLLM's prefix.
	QueueMetric = "num_requests_waiting"
	// QueueSeries is the series vLLM exports the queue as, one per served model name.
	QueueSeries = "vllm:" + QueueMetric
	// RunningSeries is the count of requests in the running batch.
	RunningSeries = "vllm:num_requests_running"
	// KVCacheUsageSeries is the KV cache's use, 0 to 1 (gpu_cache_usage_perc before v0.10).
	KVCacheUsageSeries = "vllm:" + KVCacheUsageMetric
	// KVCacheUsageMetric is the name the custom metrics API serves the KV cache's use under.
	KVCacheUsageMetric = "kv_cache_usage_perc"
	// TTFTSeries is the time-to-first-token histogram, in seconds.
	TTFTSeries = "vllm:time_to_first_token_seconds"
)

// Metrics are vLLM's series names.
func (VLLM) Metrics() engine.Metrics {
	return engine.Metrics{Queue: QueueSeries, QueueName: QueueMetric, Running: RunningSeries,
		KVCacheUsage: KVCacheUsageSeries, KVCacheName: KVCacheUsageMetric, TTFT: TTFTSeries, TTFTName: engine.TTFTP95Name}
}

// The container's parts.
const (
	// PortName and Port are vLLM's OpenAI-compatible HTTP endpoint.
	PortName = "http"
	Port     = 8000
	// HealthPath answers 200 once the engine is up, on the API server's event loop.
	HealthPath = "/health"
	// RuntimeLoRAEnv lets the operator load and unload adapters through the server's
	// /v1/load_lora_adapter and /v1/unload_lora_adapter, so adapter changes roll no pod.
	RuntimeLoRAEnv = "VLLM_ALLOW_RUNTIME_LORA_UPDATING"
	// EnableLoRAArg turns on vLLM's LoRA support when the model has adapters.
	EnableLoRAArg = "--enable-lora"
	// multiNodeScript is vLLM's documented launcher for Ray clusters on LeaderWorkerSet.
	multiNodeScript = "/vllm-workspace/examples/online_serving/multi-node-serving.sh"
	// Image is the image a vLLM model without spec.image runs: the release this package is
	// read from. Models created before spec.engine carry it in their spec (it was the schema's
	// default), so a later pin here changes only the models that name no image.
	Image = "vllm/vllm-openai:v0.11.0"
	// LoadAdapterPath and UnloadAdapterPath are vLLM's runtime LoRA endpoints
	// (entrypoints/openai/api_server.py, with VLLM_ALLOW_RUNTIME_LORA_UPDATING): plain-text
	// answers; an unload of an adapter vLLM does not have answers 404.
	LoadAdapterPath   = "/v1/load_lora_adapter"
	UnloadAdapterPath = "/v1/unload_lora_adapter"
)

// Image is the Image constant.
func (VLLM) Image() string { return Image }

// Server is the container's command, whatever the image's entrypoint: vllm/vllm-openai up to
// v0.11.0 runs `python3 -m vllm.entrypoints.openai.api_server`, which takes the positional model
// as an ignored model_tag and serves its default model (Qwen/Qwen3-0.6B) under the name the
// operator passes; `vllm serve` reads it as the model on every version.
func (VLLM) Server() engine.Server {
	return engine.Server{Command: []string{"vllm", "serve"}, PortName: PortName, Port: Port,
		HealthPath: HealthPath, RuntimeAdaptersEnv: RuntimeLoRAEnv,
		// /v1/models lists the loaded adapters with their root and parent (serving_models.py).
		Adapters: engine.AdapterAPI{LoadPath: LoadAdapterPath, UnloadPath: UnloadAdapterPath, Listed: true}}
}

// portArg is Port as vLLM's --port value.
var portArg = strconv.Itoa(Port)

// ServeArgs is vllm serve's command line: the model as its positional argument (--model is
// deprecated there), the operator's arguments, then the user's. Across pods the model runs on
// the Ray cluster the group's script forms (vLLM's default executor, mp, serves one pod).
func (VLLM) ServeArgs(s engine.Serve) []string {
	args := make([]string, 0, 16+len(s.Extra))
	args = append(args, s.Model, "--port", portArg, "--served-model-name", s.ServedName)
	if s.TensorParallel > 0 {
		args = append(args, "--tensor-parallel-size", strconv.Itoa(s.TensorParallel))
	}
	if s.PipelineParallel > 0 {
		args = append(args, "--pipeline-parallel-size", strconv.Itoa(s.PipelineParallel))
	}
	if s.AcrossPods {
		args = append(args, "--distributed-executor-backend", "ray")
	}
	if s.Adapters {
		args = append(args, EnableLoRAArg, "--max-loras", strconv.Itoa(s.MaxLoRAs), "--max-cpu-loras", strconv.Itoa(s.MaxCPULoRAs))
		if s.MaxLoRARank > 0 {
			args = append(args, "--max-lora-rank", strconv.Itoa(s.MaxLoRARank))
		}
	}
	return append(args, s.Extra...)
}

// Revision is vllm serve's --revision among args; "" without one.
func (VLLM) Revision(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--revision="); ok {
			return v
		}
		if a == "--revision" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// MultiNode are the shell scripts of a group's leader and workers on vLLM's launcher: the leader
// starts the Ray head, waits for the group's workers, then serves args; a worker joins the Ray
// cluster at its leader's address. $(LWS_GROUP_SIZE) and $(LWS_LEADER_ADDRESS) are the
// kubelet's expansions of the variables LeaderWorkerSet injects. formSeconds is how long the
// group may take to form (the script's default, 300 s, fails a group whose worker still waits
// for its image or a node).
func (VLLM) MultiNode(args []string, formSeconds int32) (leader, worker string) {
	timeout := "--ray_init_timeout=" + strconv.Itoa(int(formSeconds))
	var b strings.Builder
	b.WriteString("bash " + multiNodeScript + " leader --ray_cluster_size=$(LWS_GROUP_SIZE) " + timeout + " && exec vllm serve")
	for _, a := range args {
		b.WriteString(" " + shellQuote(a))
	}
	return b.String(), "bash " + multiNodeScript + " worker --ray_address=$(LWS_LEADER_ADDRESS) " + timeout
}

// shellQuote quotes s for sh: the engine arguments are the user's.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// StartPhases reads vLLM's start log (startphases.go).
func (VLLM) StartPhases(log string, started time.Time) []engine.Phase {
	return StartPhasesOf(log, started)
}

// DecisiveLine reads a crash's last words (lastwords.go).
func (VLLM) DecisiveLine(lines []string) string { return decisive(lines) }

// GPUFault names a GPU fault in a decisive line (gpufaults.go).
func (VLLM) GPUFault(line string) (fault, advice string) { return GPUFault(line) }

// ParallelismRefusal reads vLLM's refusal of a GPU split (parallelism.go).
func (VLLM) ParallelismRefusal(line string) string { return ParallelismRefusal(line) }

// Fill downloads what vLLM's loader would, with huggingface_hub, which every vLLM image ships
// (fill.go). TQDM_POSITION=-1 turns huggingface_hub's bars on without a terminal, each on a
// line of its own, and TQDM_MININTERVAL spaces them and the fill's own progress line, so the
// log the operator tails stays small.
func (VLLM) Fill() engine.Fill {
	return engine.Fill{
		Command: []string{"python3", "-c", FillScript},
		Env: []engine.EnvVar{
			{Name: "TQDM_POSITION", Value: "-1"},
			{Name: "TQDM_MININTERVAL", Value: "5"},
			{Name: "FILL_WEIGHT_FORMATS", Value: FillWeightFormats},
			{Name: "FILL_ALSO", Value: FillAlso},
			{Name: "FILL_IGNORE", Value: FillIgnore},
		},
		TooSmallExit: FillTooSmall,
	}
}

// DownloadProgress reads a fill's log (fill.go).
func (VLLM) DownloadProgress(log string) (engine.Progress, bool) { return ParseDownloadProgress(log) }
