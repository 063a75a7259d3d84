package sglang

import (
	"slices"
	"strings"
	"testing"

	"github.com/example/inferenceservice-operator/controller/engine"
)

func TestRegistered(t *testing.T) {
	if e := engine.For(Name); e == nil || e.Name() != Name {
		t.Fatalf("For(%q) = %v", Name, e)
	}
	if engine.For("") == engine.For(Name) {
		t.Fatal("SGLang is the default engine")
	}
}

// TestMetrics: collector.py's series names, with the queue's name as the HPA reads it.
func TestMetrics(t *testing.T) {
	m := SGLang{}.Metrics()
	want := engine.Metrics{Queue: "sglang:num_queue_reqs", QueueName: "num_queue_reqs",
		Running: "sglang:num_running_reqs", KVCacheUsage: "sglang:token_usage", KVCacheName: "token_usage", TTFT: "sglang:time_to_first_token_seconds", TTFTName: "time_to_first_token_p95_milliseconds"}
	if m != want {
		t.Fatalf("Metrics() = %+v, want %+v", m, want)
	}
	if m.Queue != "sglang:"+m.QueueName || m.KVCacheUsage != "sglang:"+m.KVCacheName {
		t.Fatal("QueueName or KVCacheName is not its series without the prefix")
	}
}

func TestServer(t *testing.T) {
	s := SGLang{}.Server()
	if !slices.Equal(s.Command, []string{"python3", "-m", "sglang.launch_server"}) || s.Port != 8000 ||
		s.HealthPath != "/health" || s.RuntimeAdaptersEnv != "" {
		t.Fatalf("Server() = %+v", s)
	}
}

// TestServeArgs: the command line carries the operator's flags, none of which its own table
// would refuse in a user's place, and the user's arguments last.
func TestServeArgs(t *testing.T) {
	args := SGLang{}.ServeArgs(engine.Serve{Model: "Qwen/Qwen3-8B", ServedName: "qwen", TensorParallel: 2,
		PipelineParallel: 2, Adapters: true, MaxLoRAs: 4, MaxCPULoRAs: 2, Extra: []string{"--mem-fraction-static", "0.8"}})
	want := "--model-path Qwen/Qwen3-8B --served-model-name qwen --host 0.0.0.0 --port 8000 --enable-metrics " +
		"--tp-size 2 --pp-size 2 --enable-lora --max-loras-per-batch 4 --max-loaded-loras 4 --max-lora-rank 64 " +
		"--lora-target-modules all --mem-fraction-static 0.8"
	if got := strings.Join(args, " "); got != want {
		t.Fatalf("ServeArgs:\n got %s\nwant %s", got, want)
	}
	plain := SGLang{}.ServeArgs(engine.Serve{Model: "/models/m", ServedName: "m", MaxLoRARank: 16})
	if got := strings.Join(plain, " "); got != "--model-path /models/m --served-model-name m --host 0.0.0.0 --port 8000 --enable-metrics" {
		t.Fatalf("ServeArgs without GPUs or adapters: %s", got)
	}
	ranked := SGLang{}.ServeArgs(engine.Serve{Model: "m", ServedName: "m", Adapters: true, MaxLoRAs: 1, MaxCPULoRAs: 3, MaxLoRARank: 16})
	if !slices.Contains(ranked, "16") || !strings.Contains(strings.Join(ranked, " "), "--max-loaded-loras 3 --max-lora-rank 16") {
		t.Fatalf("ServeArgs with a rank: %v", ranked)
	}
}

func TestRevision(t *testing.T) {
	for args, want := range map[string]string{
		"--revision abc":            "abc",
		"--revision=abc":            "abc",
		"--rev=abc":                 "abc",
		"--tp-size 2 --revision v1": "v1",
		"--random-seed 1":           "",
		"--re x":                    "",
		"":                          "",
		"--revision":                "",
	} {
		if got := (SGLang{}).Revision(strings.Fields(args)); got != want {
			t.Errorf("Revision(%q) = %q, want %q", args, got, want)
		}
	}
}

func TestMultiNode(t *testing.T) {
	leader, worker := SGLang{}.MultiNode([]string{"--model-path", "it's"}, 600)
	common := `exec python3 -m sglang.launch_server '--model-path' 'it'\''s' --nnodes $(LWS_GROUP_SIZE) --dist-init-addr $(LWS_LEADER_ADDRESS):20000 --dist-timeout 600`
	if leader != common+" --node-rank 0" {
		t.Errorf("leader: %s", leader)
	}
	if worker != common+" --node-rank $(LWS_WORKER_INDEX)" {
		t.Errorf("worker: %s", worker)
	}
}

// TestNoneWhereSGLangHasNone: what the interface documents as "none".
func TestNoneWhereSGLangHasNone(t *testing.T) {
	if a, w := (SGLang{}).RefusedEnv(); a != nil || w != nil {
		t.Errorf("RefusedEnv() = %v, %v", a, w)
	}
	if got := (SGLang{}).ParallelismRefusal("AssertionError: 32 is not divisible by 3"); got != "" {
		t.Errorf("ParallelismRefusal = %q", got)
	}
	if f, _ := (SGLang{}).GPUFault("RuntimeError: CUDA error: uncorrectable ECC error encountered"); f == "" {
		t.Error("an ECC error is no GPU fault")
	}
	if f := (SGLang{}).Fill(); len(f.Command) == 0 || f.TooSmallExit == 0 {
		t.Errorf("Fill() = %+v", f)
	}
}
