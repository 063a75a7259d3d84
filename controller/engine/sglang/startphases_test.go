package sglang

import (
	"strings"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/controller/engine"
)

// startLog is a one-GPU start of Qwen/Qwen3-8B as SGLang v0.5 logs it (the format strings of
// model_runner.py, cuda_graph_runner.py, scheduler.py and http_server.py, verbs filled). The
// container started at 14:00:00.
var startLog = []string{
	"[2025-12-05 14:00:08] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tokenizer_path='Qwen/Qwen3-8B', host='0.0.0.0', port=8000, served_model_name='qwen', enable_metrics=True)",
	"[2025-12-05 14:00:15] Using default HuggingFace chat template with detected content format: string",
	"[2025-12-05 14:00:24 TP0] Attention backend not explicitly specified. Use flashinfer backend by default.",
	"[2025-12-05 14:00:24 TP0] Init torch distributed begin.",
	"[2025-12-05 14:00:25 TP0] Init torch distributed ends. mem usage=0.00 GB",
	"[2025-12-05 14:00:26 TP0] Load weight begin. avail mem=78.50 GB",
	"Loading safetensors checkpoint shards:   0% Completed | 0/5 [00:00<?, ?it/s]",
	"Loading safetensors checkpoint shards: 100% Completed | 5/5 [00:20<00:00,  4.01s/it]",
	"[2025-12-05 14:02:56 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=62.10 GB, mem usage=16.40 GB.",
	"[2025-12-05 14:02:57 TP0] KV Cache is allocated. #tokens: 412345, K size: 28.00 GB, V size: 28.00 GB",
	"[2025-12-05 14:02:57 TP0] Memory pool end. avail mem=5.10 GB",
	"[2025-12-05 14:02:58 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=5.10 GB",
	"Capturing batches (bs=1 avail_mem=4.52 GB): 100%|██████████| 23/23 [00:12<00:00,  1.84it/s]",
	"[2025-12-05 14:03:11 TP0] Capture cuda graph end. Time elapsed: 12.34 s. mem usage=0.60 GB. avail mem=4.50 GB.",
	"[2025-12-05 14:03:12 TP0] max_total_num_tokens=412345, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=40960, available_gpu_mem=4.50 GB",
	"[2025-12-05 14:03:13] INFO:     Started server process [1]",
	"[2025-12-05 14:03:13] INFO:     Waiting for application startup.",
	"[2025-12-05 14:03:13] INFO:     Application startup complete.",
	"[2025-12-05 14:03:13] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
	"[2025-12-05 14:03:14] INFO:     127.0.0.1:40512 - \"GET /get_model_info HTTP/1.1\" 200 OK",
	"[2025-12-05 14:03:15 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
	"[2025-12-05 14:03:16] INFO:     127.0.0.1:40520 - \"POST /generate HTTP/1.1\" 200 OK",
	"[2025-12-05 14:03:16] The server is fired up and ready to roll!",
}

var started = time.Date(2025, 12, 5, 14, 0, 0, 0, time.UTC)

func names(ps []engine.Phase) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func TestStartPhases(t *testing.T) {
	ps := StartPhasesOf(strings.Join(startLog, "\n"), started)
	want := []struct {
		name string
		secs float64
	}{
		{engine.PhaseProcessStart, 26}, {engine.PhaseWeightsLoad, 150}, {engine.PhaseEngineInit, 2},
		{engine.PhaseCUDAGraphs, 12.34}, {engine.PhaseAPIServer, 5}, {engine.PhaseServing, 196},
	}
	if len(ps) != len(want) {
		t.Fatalf("phases %v", names(ps))
	}
	sum := 0.0
	for i, w := range want {
		if ps[i].Name != w.name || ps[i].Seconds != w.secs || ps[i].Going {
			t.Errorf("phase %d = %+v, want %s %.2f s", i, ps[i], w.name, w.secs)
		}
		if i < len(want)-1 {
			sum += ps[i].Seconds
		}
	}
	if d := sum - ps[len(ps)-1].Seconds; d > 1 || d < -1 {
		t.Errorf("the parts add up to %.2f s, the whole is %.2f s", sum, ps[len(ps)-1].Seconds)
	}
	if ps[3].Source != "Capture cuda graph end. Time elapsed: 12.34 s. mem usage=0.60 GB. avail mem=4.50 GB." {
		t.Errorf("graphs' source %q", ps[3].Source)
	}
}

// TestStartPhasesCutShort: a log cut while the weights load (a download SGLang prints nothing
// for) ends in a phase still going, measured to the last stamp, with its start.
func TestStartPhasesCutShort(t *testing.T) {
	ps := StartPhasesOf(strings.Join(startLog[:8], "\n"), started)
	if len(ps) != 2 || ps[1].Name != engine.PhaseWeightsLoad || !ps[1].Going ||
		!ps[1].Since.Equal(time.Date(2025, 12, 5, 14, 0, 26, 0, time.UTC)) || !strings.HasPrefix(ps[1].Source, "Load weight begin.") {
		t.Fatalf("phases %+v", ps)
	}
}

// TestStartPhasesKubeletStamps: with the kubelet's stamps (as the operator reads logs) the
// exact times are the kubelet's; without CUDA graphs (--disable-cuda-graph) the engine init
// ends at the scheduler's line; a restart's earlier run is not counted.
func TestStartPhasesKubeletStamps(t *testing.T) {
	var lines []string
	lines = append(lines, "2025-12-05T13:50:00.000000000Z [2025-12-05 13:50:00] server_args=ServerArgs(model_path='old')",
		"2025-12-05T13:50:10.000000000Z [2025-12-05 13:50:10 TP0] Load weight begin. avail mem=78.50 GB")
	at := started
	for _, l := range startLog {
		if strings.Contains(l, "cuda graph") {
			continue
		}
		at = at.Add(10 * time.Second)
		lines = append(lines, at.Format(time.RFC3339Nano)+" "+l)
	}
	ps := StartPhasesOf(strings.Join(lines, "\n"), started)
	got := names(ps)
	want := []string{engine.PhaseProcessStart, engine.PhaseWeightsLoad, engine.PhaseEngineInit, engine.PhaseAPIServer, engine.PhaseServing}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("phases %v", got)
	}
	if ps[0].Seconds != 60 || ps[1].Seconds != 30 || ps[2].Seconds != 40 || ps[4].Seconds != float64(len(lines)-2)*10 {
		t.Fatalf("phases %+v", ps)
	}
}

func TestStartPhasesNone(t *testing.T) {
	for _, log := range []string{"", "INFO:     Started server process [1]\n", "plain text\n"} {
		if ps := StartPhasesOf(log, started); ps != nil {
			t.Errorf("StartPhasesOf(%q) = %v", log, ps)
		}
	}
}
