package engine

import "time"

// The phases of a model server's start, in the order it goes through them. Each but
// PhaseServing is a part of the start: its own time, not counting the parts inside it, so the
// parts add up to about the whole. An engine's StartPhases names the phases it reached with
// these words, so the status, the histogram and `kubectl isvc` read every engine's alike.
const (
	// PhaseProcessStart is the container's start to the engine's loading the model: Python's
	// imports, the model's config and tokenizer, the engine process, NCCL.
	PhaseProcessStart = "process start"
	// PhaseWeightsDownload is the weights' download from the Hub (absent when the weights
	// were cached or local).
	PhaseWeightsDownload = "weights download"
	// PhaseWeightsLoad is reading the weights onto the GPUs.
	PhaseWeightsLoad = "weights load"
	// PhaseModelLoad is the rest of the model's loading: building the model, post-processing
	// its weights.
	PhaseModelLoad = "model load"
	// PhaseCompile is torch.compile (Dynamo and Inductor, or loading the compiled graphs).
	PhaseCompile = "torch.compile"
	// PhaseCUDAGraphs is capturing the CUDA graphs.
	PhaseCUDAGraphs = "CUDA graph capture"
	// PhaseEngineInit is the rest of the engine's init: profiling memory, allocating the KV
	// cache, warming up.
	PhaseEngineInit = "engine init"
	// PhaseAPIServer is the engine's init to the API server's serving: its own start.
	PhaseAPIServer = "API server start"
	// PhaseServing is the whole start: the container's start to serving. Not a part: the
	// slowest phase is measured against it.
	PhaseServing = "serving"
)

// Phase is one phase of a start.
type Phase struct {
	Name string
	// Seconds is the phase's own time; for a phase still going, its time so far (to the last
	// stamp in the log).
	Seconds float64
	// Source is the log line the phase's duration was read from (without the kubelet's stamp,
	// process prefix or colour codes); for a phase still going, the line it began at.
	Source string
	// Going is true for the phase a log cut short was in: the start had not finished it.
	// Seconds is then to the log's last stamp, and a phase that prints nothing while it lasts
	// (a download) counts none of its silence: Since is when it began, for a caller who knows
	// the time to measure it to now.
	Going bool
	Since time.Time
}
