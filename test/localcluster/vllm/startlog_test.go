package vllm

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// startMarks are the lines a vLLM v0.11 start prints at the end of each phase, in its order
// (vllm-project/vllm v0.11.0: gpu_model_runner.py, weight_utils.py, default_loader.py,
// compilation/backends.py and monitor.py, v1/engine/core.py, uvicorn's lifespan).
var startMarks = []string{
	"[api_server.py:1842] vLLM API server version 0.11.0",
	"[gpu_model_runner.py:2602] Starting to load model ",
	"[weight_utils.py:392] Using model weights format ['*.safetensors']",
	"[weight_utils.py:413] Time spent downloading weights for ",
	"Loading safetensors checkpoint shards:   0% Completed",
	"[default_loader.py:267] Loading weights took ",
	"[gpu_model_runner.py:2653] Model loading took ",
	"[backends.py:548] Using cache directory: /root/.cache/vllm/torch_compile_cache/",
	"[backends.py:218] Compiling a graph for dynamic shape takes ",
	"[monitor.py:34] torch.compile takes ",
	"[gpu_worker.py:298] Available KV cache memory: ",
	"[kv_cache_utils.py:1087] GPU KV cache size: ",
	"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%",
	"[gpu_model_runner.py:3480] Graph capturing finished in ",
	"[core.py:210] init engine (profile, create kv cache, warmup model) took ",
	"[launcher.py:34] Available routes are:",
	"INFO:     Application startup complete.",
}

// stampedLine is a line read with timestamps: the kubelet's time and the text.
type stampedLine struct {
	at   time.Time
	text string
}

func stampedLines(t *testing.T, log *proc.Log) []stampedLine {
	t.Helper()
	var out []stampedLine
	for _, l := range strings.Split(strings.TrimSuffix(log.Render(proc.LogOptions{TailLines: -1, Timestamps: true}), "\n"), "\n") {
		stamp, text, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err != nil {
			t.Fatalf("line without the kubelet's stamp: %q", l)
		}
		out = append(out, stampedLine{at, text})
	}
	return out
}

// findMark is the index of the first line at or after from containing mark, or -1.
func findMark(lines []stampedLine, from int, mark string) int {
	for i := from; i < len(lines); i++ {
		if strings.Contains(lines[i].text, mark) {
			return i
		}
	}
	return -1
}

var printedSeconds = regexp.MustCompile(`(?:took|in|takes|and|: ) ?([0-9.]+) (?:seconds|s in total|s$|secs)`)

func secondsIn(t *testing.T, line string) float64 {
	t.Helper()
	m := printedSeconds.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no seconds in %q", line)
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return f
}

// TestVllmStartLog: a start prints vLLM v0.11's phase lines in its words and order, with
// its coloured process prefixes, each when its phase ends; the seconds it prints are the
// time between its lines (Model loading's includes the download), the download line is
// absent when the volume holds the weights, and --enforce-eager compiles and captures nothing.
func TestVllmStartLog(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache(), TimeScale: 0.02}
	spec := proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/hf"}}
	_, log, url := vtStart(t, spec, cfg)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	lines := stampedLines(t, log)
	at := make([]int, len(startMarks))
	from := 0
	for i, m := range startMarks {
		if at[i] = findMark(lines, from, m); at[i] < 0 {
			t.Fatalf("no %q after line %d:\n%s", m, from, log.Render(proc.LogOptions{TailLines: -1}))
		}
		from = at[i] + 1
	}
	for _, i := range []int{1, 3, 6, 9, 13, 14} {
		if l := lines[at[i]].text; !strings.HasPrefix(l, "\x1b[1;36m(EngineCore_DP0 pid=243)\x1b[0;0m INFO ") {
			t.Errorf("engine line without the engine's coloured prefix: %q", l)
		}
	}
	if l := lines[at[16]].text; l != "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO:     Application startup complete." {
		t.Errorf("uvicorn's line: %q", l)
	}
	// each printed duration is the time its lines span, to the scheduler's slack
	span := func(a, b int) float64 { return lines[at[b]].at.Sub(lines[at[a]].at).Seconds() }
	for _, c := range []struct {
		name        string
		line, since int
	}{
		{"download", 3, 2}, {"weights load", 5, 4}, {"model loading", 6, 1},
		{"torch.compile", 9, 7}, {"engine init", 14, 6},
	} {
		got := secondsIn(t, lines[at[c.line]].text)
		if want := span(c.since, c.line); got < want-0.05 || got > want+0.05 {
			t.Errorf("%s printed %.3fs, its lines span %.3fs", c.name, got, want)
		}
	}
	if dl, load, model := secondsIn(t, lines[at[3]].text), secondsIn(t, lines[at[5]].text), secondsIn(t, lines[at[6]].text); model < dl+load {
		t.Errorf("Model loading took %.3fs, less than the download %.3fs and the load %.3fs", model, dl, load)
	}

	// the volume holds the weights now: no download line; --enforce-eager: no compile, no graphs
	spec.Args = append(spec.Args, "--enforce-eager")
	_, log2, url2 := vtStart(t, spec, cfg)
	vtWaitStatus(t, "GET", url2+"/health", "", 200)
	text := log2.Render(proc.LogOptions{TailLines: -1})
	for i, m := range startMarks {
		want := !map[int]bool{3: true, 7: true, 8: true, 9: true, 12: true, 13: true}[i]
		if got := strings.Contains(text, m); got != want {
			t.Errorf("cached, eager start: %q printed %v, want %v", m, got, want)
		}
	}
	if !strings.Contains(text, "enforce_eager=True") {
		t.Errorf("the engine's config does not say enforce_eager=True")
	}
}
