// Package engine is what the operator knows of a model server, behind one interface: the
// flags and variables it refuses in a spec, its container's command line, port and health
// path, the names of its metrics, and its log readers (the phases of a start, the last words
// of a crash, a weights download's progress). The decision (controller/reconcile, crd) and the
// I/O (controller, metrics) ask engine.For(name) and never spell an engine's words themselves.
// Each engine is a package of its own below this one (controller/engine/vllm), registered by
// name from its init; this package and every engine are pure and import only the standard
// library, so crd may import them and stay a leaf.
package engine

import (
	"sort"
	"sync"
	"time"
)

// VLLM is the engine every model is served by until the spec names another.
const VLLM = "vllm"

// Engine is one model server's knowledge.
type Engine interface {
	// Name is the engine's registered name.
	Name() string

	// RefusedArgs are the flags spec.engineArgs may not carry, always and while the model has
	// adapters; RefusedEnv the variables spec.env may not set, likewise.
	RefusedArgs() (always, withAdapters []OwnedArg)
	RefusedEnv() (always, withAdapters []OwnedName)

	// Image is the server's image a model gets when its spec names none.
	Image() string
	// Server is the container's fixed parts: command, port, health path, adapter endpoints.
	Server() Server
	// ServeArgs is the server's command line for one pod (or a multi-node group's leader).
	ServeArgs(Serve) []string
	// Revision is the model's revision the user's arguments name; "" when they name none.
	Revision(args []string) string
	// MultiNode is the leader's and the workers' shell scripts of a group spread over pods.
	MultiNode(args []string, formSeconds int32) (leader, worker string)

	// Metrics are the names of the series the server exports.
	Metrics() Metrics

	// StartPhases are the phases of the last start in a container's log (with or without the
	// kubelet's timestamps), the container having started at started; nil when the log holds
	// no stamped line of the server's.
	StartPhases(log string, started time.Time) []Phase
	// DecisiveLine is the line of a crashed server's log lines that says why it died, at most
	// MaxLastWords bytes; "" when there is none.
	DecisiveLine(lines []string) string
	// GPUFault names the fault of the GPU or its driver a decisive line reports, with what to
	// do; "" when it reports none.
	GPUFault(line string) (fault, advice string)
	// ParallelismRefusal is the message for a decisive line that refuses the model's split
	// over the GPUs; "" when it is not one.
	ParallelismRefusal(line string) string
	// Fill is the managed cache's download in the model's image; DownloadProgress reads the
	// last progress line of its log.
	Fill() Fill
	DownloadProgress(log string) (Progress, bool)
}

// Server is what a pod template needs of the server's container beside its arguments.
type Server struct {
	// Command is the container's command, whatever the image's entrypoint.
	Command []string
	// PortName and Port are the server's HTTP endpoint (the API, /metrics and health).
	PortName string
	Port     int32
	// HealthPath answers 200 once the server serves.
	HealthPath string
	// RuntimeAdaptersEnv is the variable that lets adapters be loaded and unloaded through the
	// API, set to "True" when the model has adapters; "" when the engine needs none.
	RuntimeAdaptersEnv string
	// Adapters is the server's HTTP API for LoRA adapters at run time.
	Adapters AdapterAPI
}

// AdapterAPI is how a server loads, unloads and lists LoRA adapters at run time. Both calls
// are POSTs of JSON: {"lora_name", "lora_path"} to LoadPath, {"lora_name"} to UnloadPath.
type AdapterAPI struct {
	LoadPath, UnloadPath string
	// Listed: GET /v1/models lists every loaded adapter beside the base model (id the name,
	// root the path, parent the base model). False: the server lists only the base model, and
	// only the answers of LoadPath and UnloadPath say what is loaded (AnswerLists).
	Listed bool
	// AnswerLists: a load's or unload's answer is JSON whose loaded_adapters maps every
	// adapter loaded after the call, name to path (success or not), and whose error_message
	// says why a call failed.
	AnswerLists bool
	// UnloadMissing is a fragment of the message of the failed unload of an adapter the server
	// does not have, when the server answers it as an error rather than 404 (then the adapter
	// is unloaded already); "" when 404 says it.
	UnloadMissing string
	// LoadPresent is a fragment of the message of the failed load of a name the server has
	// loaded already, when that answer means the adapter is there (the load is then done);
	// "" when such a refusal says nothing more than any other failed load.
	LoadPresent string
}

// Serve is what a server's command line says: the model and the operator's choices.
type Serve struct {
	// Model is what the server loads (a Hub id or a directory); ServedName the name clients send.
	Model, ServedName string
	// TensorParallel and PipelineParallel split the model over GPUs; 0 passes nothing.
	TensorParallel, PipelineParallel int
	// AcrossPods runs the model over a group of pods (a Ray cluster for vLLM).
	AcrossPods bool
	// Adapters turns on LoRA adapters: MaxLoRAs share a batch, MaxCPULoRAs stay in host memory,
	// MaxLoRARank (0: the server's default) bounds their rank.
	Adapters                           bool
	MaxLoRAs, MaxCPULoRAs, MaxLoRARank int
	// Extra are the user's own arguments, last.
	Extra []string
}

// Metrics are the series names an engine exports on its /metrics, with its prefix.
type Metrics struct {
	// Queue is the count of requests waiting for a slot, one series per served model name:
	// the autoscaler's signal. QueueName is the same without the engine's prefix, as the HPA's
	// Pods metric and the custom metrics API name it.
	Queue, QueueName string
	// Running is the count of requests in the running batch.
	Running string
	// KVCacheUsage is the fraction of the KV cache in use (0-1). KVCacheName is the same
	// without the engine's prefix, as the HPA's Pods metric and the custom metrics API name it
	// (spec.autoscaling.metric kvCache).
	KVCacheUsage, KVCacheName string
	// TTFT is the time-to-first-token histogram, in seconds. TTFTName is what the custom
	// metrics API serves from it (spec.autoscaling.metric ttft): each pod's p95 over a window,
	// in milliseconds, the window given by the HPA's metric selector (TTFTWindowLabel).
	TTFT, TTFTName string
}

// TTFTP95Name is the name the p95 of the time to first token is served under, in
// milliseconds, whichever engine's histogram it comes from: both engines' histograms are the
// same measure, in seconds, with only their prefix apart, so one HPA spec fits both.
const TTFTP95Name = "time_to_first_token_p95_milliseconds"

// TTFTWindowLabel is the label of the HPA's metric selector that names the window, in
// seconds, the p95 of TTFTP95Name is computed over: a pod's reading depends on its HPA's
// window, and the selector is the one part of a Pods metric the HPA passes to the custom
// metrics API besides the name (as metricLabelSelector; prometheus-adapter hands it to its
// query template as LabelValuesByName).
const TTFTWindowLabel = "window_seconds"

// OwnedArg is a group of flags refused in spec.engineArgs, with one message naming what to use
// instead or what the flag would break.
type OwnedArg struct {
	// Flags are the refused flags as the engine declares them: --long-name, or a single-dash
	// alias such as -tp.
	Flags []string
	// Pattern matches one list item that the engine would read as one of Flags, as RE2 (CEL's
	// matches and Go's regexp alike).
	Pattern string
	// Message is the CEL rule's message and Validate's error.
	Message string
}

// OwnedName is an environment variable refused in spec.env, and why.
type OwnedName struct {
	// Name is the variable's name, refused exactly.
	Name string
	// Message is the CEL rule's message and Validate's error.
	Message string
}

var (
	mu      sync.RWMutex
	engines = map[string]Engine{}
)

// Register makes an engine known by its name; an engine package calls it from its init.
func Register(e Engine) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := engines[e.Name()]; dup {
		panic("engine: " + e.Name() + " registered twice")
	}
	engines[e.Name()] = e
}

// For is the engine registered as name, "" meaning VLLM; nil when none is.
func For(name string) Engine {
	if name == "" {
		name = VLLM
	}
	mu.RLock()
	defer mu.RUnlock()
	return engines[name]
}

// Names are the registered engines, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(engines))
	for n := range engines {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Fill is the Job container that downloads a model's weights into a managed cache, in the
// model's own image, as the engine's loader would fetch them.
type Fill struct {
	// Command runs the fill; its arguments are the model, its revision and the adapters' Hub ids.
	Command []string
	// Env are the fill's own variables, beside HF_HOME and the Hub token.
	Env []EnvVar
	// TooSmallExit is the fill's exit code when the weights do not fit the volume: the Job
	// fails at once, since a retry cannot fit them either.
	TooSmallExit int32
}

// EnvVar is one environment variable of a container.
type EnvVar struct{ Name, Value string }
