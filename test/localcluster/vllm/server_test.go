package vllm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// vtNextIP numbers the loopback addresses of this test process, from a random start so
// processes testing at the same time rarely meet.
var vtNextIP atomic.Uint32

func init() { vtNextIP.Store(rand.Uint32N(60000)) }

// vtIP is a fresh loopback address 127.77.x.y, so servers never share a port.
func vtIP() string {
	n := vtNextIP.Add(1) % 64000
	return fmt.Sprintf("127.77.%d.%d", n/250, 1+n%250)
}

// vtStart starts a server on a fresh IP and stops it when the test ends.
func vtStart(t *testing.T, spec proc.Spec, cfg Config) (*Server, *proc.Log, string) {
	t.Helper()
	if spec.IP == "" {
		spec.IP = vtIP()
	}
	switch spec.GPUs {
	case 0:
		spec.GPUs = 1
	case -1: // a test of a container without GPUs
		spec.GPUs = 0
	}
	log := proc.NewLog(1 << 20)
	s := Start(spec, cfg, log)
	t.Cleanup(s.Stop)
	return s, log, fmt.Sprintf("http://%s:%d", spec.IP, s.Port())
}

// vtExit waits for the process to end on its own.
func vtExit(t *testing.T, s *Server, log *proc.Log) proc.Exit {
	t.Helper()
	select {
	case st := <-s.Exited():
		return st
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not exit; log:\n%s", log.Render(proc.LogOptions{TailLines: 20}))
	}
	return proc.Exit{}
}

var vtClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// vtCall does one request and returns status and body (-1 when it could not connect).
func vtCall(method, url, body string, hdr ...string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := vtClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// vtEventually polls cond until it holds, or fails the test after 10 s.
func vtEventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, s := cond()
		if ok {
			return
		}
		last = s
		time.Sleep(10 * time.Millisecond) // a poll interval, not a wait for state
	}
	t.Fatalf("%s: not within 10s; last: %s", what, last)
}

func vtWaitStatus(t *testing.T, method, url, body string, want int, hdr ...string) string {
	t.Helper()
	var got string
	vtEventually(t, method+" "+url+" "+strconv.Itoa(want), func() (bool, string) {
		code, b := vtCall(method, url, body, hdr...)
		got = b
		return code == want, fmt.Sprintf("%d %s", code, b)
	})
	return got
}

func vtLastLine(log *proc.Log) string {
	return strings.TrimSpace(log.Render(proc.LogOptions{TailLines: 1}))
}

func TestVllmArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		args    []string
		check   func(*serveArgs) bool
		err     string
	}{
		{name: "positional and equals", args: []string{"Qwen/Qwen3-0.6B", "--port=9000", "-tp", "2", "--max-num-seqs", "8"},
			check: func(a *serveArgs) bool {
				return a.model == "Qwen/Qwen3-0.6B" && a.port == 9000 && a.tp == 2 && a.maxNumSeqs == 8
			}},
		{name: "defaults", args: nil,
			check: func(a *serveArgs) bool {
				return a.model == "Qwen/Qwen3-0.6B" && a.port == 8000 && a.maxNumSeqs == 256 && a.gpuUtil == 0.9
			}},
		{name: "served names and loras", args: []string{"m", "--served-model-name", "a", "b", "--enable-lora", "--lora-modules", "x=/l/x", `{"name":"y","path":"org/y","base_model_name":"b"}`},
			check: func(a *serveArgs) bool {
				return strings.Join(a.served, ",") == "a,b" && a.enableLoRA && len(a.loraModules) == 2 && a.loraModules[1].BaseName == "b"
			}},
		{name: "api_server module with --model", command: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, args: []string{"--model", "m", "--max-model-len", "32k"},
			check: func(a *serveArgs) bool { return a.model == "m" && a.maxModelLen == 32000 && a.prog == "api_server.py" }},
		{name: "sh -c", command: []string{"/bin/sh", "-c", "exec vllm serve 'my model' --port 8080"},
			check: func(a *serveArgs) bool { return a.model == "my model" && a.port == 8080 }},
		{name: "unknown", args: []string{"m", "--foo", "1", "--bar"}, err: "vllm: error: unrecognized arguments: --foo 1 --bar"},
		{name: "bad int", args: []string{"--port", "http"}, err: "vllm serve: error: argument --port: invalid int value: 'http'"},
		{name: "missing value", args: []string{"--port"}, err: "vllm serve: error: argument --port: expected one argument"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog, argv, ok := serveCommand(tc.command, tc.args)
			if !ok {
				t.Fatalf("serveCommand(%q) not vLLM", tc.command)
			}
			a, err := parseServeArgs(prog, argv)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !tc.check(a) {
				t.Fatalf("parse %q: %+v, %v", argv, a, err)
			}
		})
	}
}

// TestVllmOtherCommand: a command that is not vLLM runs without a port and never exits.
func TestVllmOtherCommand(t *testing.T) {
	if _, _, ok := serveCommand([]string{"sleep", "infinity"}, nil); ok {
		t.Fatal("sleep taken for vLLM")
	}
	if _, _, ok := serveCommand([]string{"bash", "-c", "vllm serve m"}, nil); !ok {
		t.Fatal("bash -c 'vllm serve m' not taken for vLLM")
	}
}

func TestVllmModelParams(t *testing.T) {
	for model, want := range map[string]float64{
		"meta-llama/Llama-3.1-8B-Instruct": 8e9, "meta-llama/Llama-3.3-70B-Instruct": 70e9, "Qwen/Qwen2.5-0.5B-Instruct": 0.5e9,
		"mistralai/Mixtral-8x7B-v0.1": 56e9, "deepseek-ai/DeepSeek-V3": 671e9, "facebook/opt-125m": 125e6, "m": 1e9,
		"/models/Qwen3-0.6B": 0.6e9,
	} {
		if got := hfmodel.Params(model); got != want {
			t.Errorf("hfmodel.Params(%q) = %g, want %g", model, got, want)
		}
	}
}

// TestVllmStartFailures: each spec that makes a real vLLM fail makes the fake fail the same
// way, with the same exit code and the real error in its log.
func TestVllmStartFailures(t *testing.T) {
	hf := map[string]string{"HF_TOKEN": "hf_x"}
	for _, tc := range []struct {
		name string
		spec proc.Spec
		code int32
		reas string
		want string
	}{
		{"unknown argument", proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--foo"}}, 2, "Error",
			"vllm: error: unrecognized arguments: --foo"},
		{"service link VLLM_PORT", proc.Spec{Env: map[string]string{"VLLM_PORT": "tcp://10.96.0.12:8000"}}, 1, "Error",
			"ValueError: VLLM_PORT 'tcp://10.96.0.12:8000' appears to be a URI."},
		{"70B on one of 4 GPUs", proc.Spec{Args: []string{"meta-llama/Llama-3.1-70B-Instruct"}, GPUs: 4, Env: hf}, 1, "Error",
			"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"},
		{"too few GPUs", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "-tp", "4"}, GPUs: 2}, 1, "Error",
			"ValueError: The number of required GPUs exceeds the total number of available GPUs in the placement group."},
		{"no /dev/shm for NCCL", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "--tensor-parallel-size", "2"}, GPUs: 2, ShmSize: -1}, 1, "Error",
			"Error while creating shared memory segment /dev/shm/nccl-"},
		{"gated without HF_TOKEN", proc.Spec{Args: []string{"meta-llama/Llama-3.1-8B-Instruct"}}, 1, "Error",
			"huggingface_hub.errors.GatedRepoError: 401 Client Error."},
		{"path not mounted", proc.Spec{Args: []string{"/models/llama"}, Mounts: map[string]string{"/data": "pvc:ns/d"}}, 1, "Error",
			"ValueError: Invalid repository ID or local directory specified: '/models/llama'."},
		{"memory limit", proc.Spec{Args: []string{"Qwen/Qwen3-8B"}, MemoryLimit: 4 << 30}, 137, "OOMKilled",
			"Loading safetensors checkpoint shards:"},
		{"static LoRA without --enable-lora", proc.Spec{Args: []string{"Qwen/Qwen3-8B", "--lora-modules", "a=org/a"}}, 1, "Error",
			"ValueError: LoRA is not enabled. Use --enable-lora to enable LoRA."},
		{"no GPU", proc.Spec{Image: "vllm/vllm-openai:v0.11.0", GPUs: -1}, 1, "Error", "RuntimeError: Failed to infer device type"},
		{"crashloop", proc.Spec{Behavior: proc.Behavior{Kind: proc.CrashLoop}}, 1, "Error",
			"vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."},
		{"oomkilled", proc.Spec{Behavior: proc.Behavior{Kind: proc.OOMKilled}}, 137, "OOMKilled",
			"Loading safetensors checkpoint shards:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, log, _ := vtStart(t, tc.spec, Config{CrashRun: 100 * time.Millisecond})
			st := vtExit(t, s, log)
			text := log.Render(proc.LogOptions{TailLines: -1})
			if st.Code != tc.code || st.Reason != tc.reas || !strings.Contains(text, tc.want) {
				t.Fatalf("exit %+v, want %d %s and %q in the log:\n%s", st, tc.code, tc.reas, tc.want, text)
			}
			if tc.code == 137 && !strings.HasPrefix(vtLastLine(log), "Loading safetensors checkpoint shards:") {
				t.Fatalf("an OOM kill ends the log mid-load; last line %q", vtLastLine(log))
			}
		})
	}
}

// TestVllmTensorParallelServes: the 70B model that does not fit one GPU serves with -tp 4,
// within a 12Gi memory limit (2 GiB + a quarter of one rank's 35 GB).
func TestVllmTensorParallelServes(t *testing.T) {
	t.Parallel()
	_, log, url := vtStart(t, proc.Spec{Args: []string{"meta-llama/Llama-3.1-70B-Instruct", "-tp", "4"}, GPUs: 4, MemoryLimit: 12 << 30,
		Env: map[string]string{"HF_TOKEN": "hf_x"}}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	text := log.Render(proc.LogOptions{TailLines: -1})
	for _, want := range []string{"non-default args: {'model_tag': 'meta-llama/Llama-3.1-70B-Instruct', 'model': 'meta-llama/Llama-3.1-70B-Instruct', 'tensor_parallel_size': 4}",
		"rank 3 in world size 4", "Starting vLLM API server 0 on http://0.0.0.0:8000", "Application startup complete."} {
		if !strings.Contains(text, want) {
			t.Fatalf("log lacks %q:\n%s", want, text)
		}
	}
}

// TestVllmPortClosedWhileLoading: the port refuses connections until the weights are
// loaded, then /health answers 200.
func TestVllmPortClosedWhileLoading(t *testing.T) {
	t.Parallel()
	s, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}}, Config{LoadTime: 2 * time.Second})
	_, err := net.Dial("tcp", net.JoinHostPort(s.spec.IP, "8000"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial while loading: %v, want connection refused", err)
	}
	vtWaitStatus(t, "GET", url+"/health", "", 200)
}

// TestVllmNeverReady: the kubelet.fake/never-ready image serves, its first /health answers
// 200 (a startup probe passes), every later one 503, on a pod without GPUs too.
func TestVllmNeverReady(t *testing.T) {
	t.Parallel()
	_, log, url := vtStart(t, proc.Spec{Image: "kubelet.fake/never-ready", GPUs: -1, Behavior: proc.Behavior{Kind: proc.NeverReady}}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if code, _ := vtCall("GET", url+"/health", ""); code != 503 {
		t.Fatalf("second /health: %d, want 503", code)
	}
	if !strings.Contains(log.Render(proc.LogOptions{TailLines: -1}), "RuntimeError: CUDA error: unspecified launch failure") {
		t.Fatalf("no engine failure in the log:\n%s", log.Render(proc.LogOptions{TailLines: -1}))
	}
	if !strings.Contains(log.Render(proc.LogOptions{TailLines: -1}), `"GET /health HTTP/1.1" 503 Service Unavailable`) {
		t.Fatalf("no access line for the 503:\n%s", log.Render(proc.LogOptions{TailLines: -1}))
	}
}

// TestVllmStopShutsDown: Stop logs uvicorn's shutdown, closes the port, and is idempotent.
func TestVllmStopShutsDown(t *testing.T) {
	t.Parallel()
	s, log, url := vtStart(t, proc.Spec{}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	s.Stop()
	s.Stop()
	if code, _ := vtCall("GET", url+"/health", ""); code != -1 {
		t.Fatalf("health after Stop: %d, want connection refused", code)
	}
	if got := vtLastLine(log); !strings.HasSuffix(got, "INFO:     Application shutdown complete.") {
		t.Fatalf("last line %q", got)
	}
	select {
	case st := <-s.Exited():
		t.Fatalf("a stopped server reported an exit %+v", st)
	default:
	}
}

func TestVllmCompletions(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--served-model-name", "qwen"}}, Config{TokenTime: time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	code, body := vtCall("POST", url+"/v1/completions", `{"model":"nope","prompt":"hi"}`)
	if code != 404 || !strings.Contains(body, "The model `nope` does not exist.") {
		t.Fatalf("unknown model: %d %s", code, body)
	}
	code, body = vtCall("POST", url+"/v1/completions", `{"model":"qwen","prompt":"one two three","max_tokens":5}`)
	if code != 200 || !strings.Contains(body, `"usage":{"completion_tokens":5,"prompt_tokens":3,"prompt_tokens_details":null,"total_tokens":8}`) ||
		!strings.Contains(body, `"object":"text_completion"`) {
		t.Fatalf("completion: %d %s", code, body)
	}
	code, body = vtCall("POST", url+"/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hello there"}],"max_tokens":3}`)
	if code != 200 || !strings.Contains(body, `"role":"assistant"`) || !strings.Contains(body, `"completion_tokens":3`) {
		t.Fatalf("chat: %d %s", code, body)
	}
	code, body = vtCall("POST", url+"/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 || strings.Count(body, "data: ") != 1+4+1+1 || !strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"finish_reason":"length"`) {
		t.Fatalf("stream: %d %s", code, body)
	}
	code, body = vtCall("GET", url+"/version", "")
	if code != 200 || body != `{"version":"0.11.0"}` {
		t.Fatalf("version: %d %s", code, body)
	}
}

func TestVllmAPIKey(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"--api-key", "sekret"}}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if code, body := vtCall("GET", url+"/v1/models", ""); code != 401 || body != `{"error":"Unauthorized"}` {
		t.Fatalf("without key: %d %s", code, body)
	}
	if code, _ := vtCall("GET", url+"/v1/models", "", "Authorization", "Bearer sekret"); code != 200 {
		t.Fatalf("with key: %d", code)
	}
}

func TestVllmLoRA(t *testing.T) {
	t.Parallel()
	mounts := map[string]string{"/adapters": "pvc:ns/adapters"}
	args := []string{"Qwen/Qwen3-8B", "--enable-lora", "--lora-modules", "sql=/adapters/sql"}
	_, _, url := vtStart(t, proc.Spec{Args: args, Mounts: mounts}, Config{})
	body := vtWaitStatus(t, "GET", url+"/v1/models", "", 200)
	if !strings.Contains(body, `"id":"sql"`) || !strings.Contains(body, `"parent":"Qwen/Qwen3-8B"`) || !strings.Contains(body, `"root":"/adapters/sql"`) {
		t.Fatalf("models: %s", body)
	}
	if code, body := vtCall("POST", url+"/v1/load_lora_adapter", `{"lora_name":"x","lora_path":"org/x"}`); code != 404 || body != `{"detail":"Not Found"}` {
		t.Fatalf("runtime load without VLLM_ALLOW_RUNTIME_LORA_UPDATING: %d %s", code, body)
	}

	env := map[string]string{"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
	_, _, url = vtStart(t, proc.Spec{Args: args, Mounts: mounts, Env: env}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	for _, step := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/adapters/chat"}`, 200, "Success: LoRA adapter 'chat' added successfully."},
		{"/v1/load_lora_adapter", `{"lora_name":"chat","lora_path":"/adapters/chat"}`, 400, "The lora adapter 'chat' has already been loaded."},
		{"/v1/load_lora_adapter", `{"lora_name":"y","lora_path":"/elsewhere/y"}`, 404, "Call to add_lora method failed: Loading lora y failed: No adapter found for /elsewhere/y"},
		// Ranks: PEFT's default 8 and a stated 16 fit vLLM's default --max-lora-rank 16; 64 does not.
		{"/v1/load_lora_adapter", `{"lora_name":"r16","lora_path":"org/sql-lora-r16"}`, 200, "Success: LoRA adapter 'r16' added successfully."},
		{"/v1/load_lora_adapter", `{"lora_name":"r64","lora_path":"org/sql-lora-r64"}`, 400, `"message":"Call to add_lora method failed: LoRA rank 64 is greater than max_lora_rank 16.","param":null,"type":"BadRequestError"`},
		{"/v1/unload_lora_adapter", `{"lora_name":"nope"}`, 404, "The lora adapter 'nope' cannot be found."},
		{"/v1/unload_lora_adapter", `{"lora_name":"chat"}`, 200, "Success: LoRA adapter 'chat' removed successfully."},
	} {
		if code, body := vtCall("POST", url+step.path, step.body); code != step.code || !strings.Contains(body, step.want) {
			t.Fatalf("%s %s: %d %s, want %d %q", step.path, step.body, code, body, step.code, step.want)
		}
	}
	if code, body := vtCall("POST", url+"/v1/completions", `{"model":"sql","prompt":"x","max_tokens":1}`); code != 200 {
		t.Fatalf("completion on an adapter: %d %s", code, body)
	}

	// A larger --max-lora-rank takes it; one vLLM does not offer is argparse's invalid choice.
	_, _, url = vtStart(t, proc.Spec{Args: append(args, "--max-lora-rank", "64"), Mounts: mounts, Env: env}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if code, body := vtCall("POST", url+"/v1/load_lora_adapter", `{"lora_name":"r64","lora_path":"org/sql-lora-r64"}`); code != 200 {
		t.Fatalf("rank 64 under --max-lora-rank 64: %d %s", code, body)
	}

	_, _, url = vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-8B"}, Env: env}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if code, body := vtCall("POST", url+"/v1/load_lora_adapter", `{"lora_name":"a","lora_path":"org/a"}`); code != 400 || !strings.Contains(body, "LoRA is not enabled. Use --enable-lora to enable LoRA.") {
		t.Fatalf("load without --enable-lora: %d %s", code, body)
	}
}

// vtMetric reads one sample of a /metrics text.
func vtMetric(text, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[2], 64)
	return v
}

// TestVllmQueueUnderLoad: three times --max-num-seqs concurrent requests (1 s each) make
// requests wait; the queue drains by itself.
func TestVllmQueueUnderLoad(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--max-num-seqs", "4"}}, Config{TokenTime: 20 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vtCall("POST", url+"/v1/completions", `{"prompt":"a b c","max_tokens":50}`)
		}()
	}
	vtEventually(t, "requests waiting", func() (bool, string) {
		_, m := vtCall("GET", url+"/metrics", "")
		return vtMetric(m, "vllm:num_requests_waiting") > 0 && vtMetric(m, "vllm:num_requests_running") == 4, m
	})
	wg.Wait()
	_, m := vtCall("GET", url+"/metrics", "")
	for name, want := range map[string]float64{"vllm:num_requests_waiting": 0, "vllm:num_requests_running": 0,
		"vllm:generation_tokens_total": 600, "vllm:prompt_tokens_total": 36, "vllm:e2e_request_latency_seconds_count": 12} {
		if got := vtMetric(m, name); got != want {
			t.Fatalf("%s = %g, want %g:\n%s", name, got, want, m)
		}
	}
	if !strings.Contains(m, `vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-0.6B"} 12.0`) {
		t.Fatalf("request_success_total:\n%s", m)
	}
	if vtMetric(m, `vllm:request_queue_time_seconds_sum`) <= 0 {
		t.Fatalf("no queue time recorded:\n%s", m)
	}
}

// TestVllmHealthSlowUnderLoad: /health shares the event loop with output processing, so a
// heavy load makes a 1 s probe time out, and it answers at once again when the load ends.
func TestVllmHealthSlowUnderLoad(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{}, Config{TokenTime: 50 * time.Millisecond, HealthDelayPerRequest: 100 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":1000}`))
			if resp, err := vtClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	vtEventually(t, "health probe times out under load", func() (bool, string) {
		resp, err := probe.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			return false, resp.Status
		}
		return strings.Contains(err.Error(), "Client.Timeout"), err.Error()
	})
	cancel()
	wg.Wait()
	vtEventually(t, "health fast again", func() (bool, string) {
		resp, err := probe.Get(url + "/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == 200, resp.Status
	})
}

// TestVllmWeightsCache: a model on a volume that holds it is not downloaded again.
func TestVllmWeightsCache(t *testing.T) {
	t.Parallel()
	cfg := Config{Weights: hfmodel.NewWeightsCache()}
	spec := proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}, Mounts: map[string]string{"/root/.cache/huggingface": "pvc:ns/hf"}}
	s1, log1, url1 := vtStart(t, spec, cfg)
	vtWaitStatus(t, "GET", url1+"/health", "", 200)
	s1.Stop()
	_, log2, url2 := vtStart(t, spec, cfg)
	vtWaitStatus(t, "GET", url2+"/health", "", 200)
	const dl = "Time spent downloading weights for Qwen/Qwen3-0.6B"
	if !strings.Contains(log1.Render(proc.LogOptions{TailLines: -1}), dl) || strings.Contains(log2.Render(proc.LogOptions{TailLines: -1}), dl) {
		t.Fatalf("first start downloads, second does not:\n%s\n---\n%s", log1.Render(proc.LogOptions{TailLines: -1}), log2.Render(proc.LogOptions{TailLines: -1}))
	}
}

// serverGoroutines counts, from all goroutines' stacks, the accept loops of HTTP servers
// and every other goroutine of the fake vLLM or its connections.
func serverGoroutines() (acceptLoops, others int) {
	buf := make([]byte, 16<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for _, g := range strings.Split(string(buf), "\n\n") {
		switch {
		case strings.Contains(g, "net/http.(*Server).Serve("):
			acceptLoops++
		case strings.Contains(g, "main.(*modelServer)"), strings.Contains(g, "main.(*engine)"),
			strings.Contains(g, "net/http.(*conn).serve("):
			others++
		}
	}
	return acceptLoops, others
}

// TestVllmModelIdleCost: an idle server runs no goroutine beyond its accept loop; it
// reports the heap an idle server holds.
func TestVllmModelIdleCost(t *testing.T) {
	base, _ := serverGoroutines() // servers other tests left running
	const n = 200
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	servers := make([]*Server, n)
	for i := range servers {
		var url string
		servers[i], _, url = vtStart(t, proc.Spec{}, Config{LoadTime: time.Nanosecond})
		vtWaitStatus(t, "GET", url+"/health", "", 200)
		vtCall("POST", url+"/v1/completions", `{"prompt":"x","max_tokens":1}`)
	}
	vtEventually(t, "only accept loops run", func() (bool, string) {
		loops, others := serverGoroutines()
		return loops-base == n && others == 0, fmt.Sprintf("%d accept loops, %d others", loops-base, others)
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, s := range servers {
		s.Stop()
	}
	t.Logf("idle servers: %d bytes of heap each, 1 goroutine each", (after.HeapAlloc-before.HeapAlloc)/n)
}

// TestVllmStreamArrivesPerToken: the first chunk arrives while the request still runs.
func TestVllmStreamArrivesPerToken(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{}, Config{TokenTime: 30 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	resp, err := vtClient.Post(url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":100,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: ") {
		t.Fatalf("first line %q", sc.Text())
	}
	if _, m := vtCall("GET", url+"/metrics", ""); vtMetric(m, "vllm:num_requests_running") != 1 {
		t.Fatalf("the first chunk came after the request finished:\n%s", m)
	}
}

// TestVllmDefaultSlots: the kubelet's MaxNumSeqs is the engine's slots when the container
// passes no --max-num-seqs, and the container's own argument wins.
func TestVllmDefaultSlots(t *testing.T) {
	t.Parallel()
	cfg := Config{MaxNumSeqs: 2, TokenTime: 20 * time.Millisecond}
	for args, want := range map[string]float64{"": 2, "--max-num-seqs 3": 3} {
		_, _, url := vtStart(t, proc.Spec{Args: append([]string{"Qwen/Qwen3-0.6B"}, strings.Fields(args)...)}, cfg)
		vtWaitStatus(t, "GET", url+"/health", "", 200)
		var wg sync.WaitGroup
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				vtCall("POST", url+"/v1/completions", `{"prompt":"a","max_tokens":40}`)
			}()
		}
		vtEventually(t, fmt.Sprintf("%s running with %q", fmt.Sprint(want), args), func() (bool, string) {
			_, m := vtCall("GET", url+"/metrics", "")
			return vtMetric(m, "vllm:num_requests_running") == want && vtMetric(m, "vllm:num_requests_waiting") == 6-want, m
		})
		wg.Wait()
	}
}

// TestVllmModelledStartTimes: without set times, a start downloads the weights at the
// download bandwidth and loads each GPU's share at the load bandwidth, under the time scale;
// a model ten times the size takes ten times as long, so a big model's start is a window.
func TestVllmModelledStartTimes(t *testing.T) {
	t.Parallel()
	cfg := Config{}.withDefaults()
	small, big := hfmodel.WeightBytes("Qwen/Qwen3-0.6B"), hfmodel.WeightBytes("Qwen/Qwen3-8B")
	if d := cfg.downloadTime(big); d != time.Duration(float64(big)/500e6*0.01*float64(time.Second)) || d < 250*time.Millisecond {
		t.Errorf("Qwen3-8B (%d bytes) downloads in %v at 500 MB/s under 0.01", big, d)
	}
	if cfg.downloadTime(big) <= 10*cfg.downloadTime(small) {
		t.Errorf("download not proportional to size: %v for %d bytes, %v for %d", cfg.downloadTime(big), big, cfg.downloadTime(small), small)
	}
	if l := cfg.loadTime(small); l != 100*time.Millisecond {
		t.Errorf("a small model loads in %v, want the 100ms floor", l)
	}
	if set := (Config{DownloadTime: time.Second, LoadTime: time.Millisecond}).withDefaults(); set.downloadTime(big) != time.Second || set.loadTime(big) != time.Millisecond {
		t.Errorf("set times not kept: %v, %v", set.downloadTime(big), set.loadTime(big))
	}

	// A real start records the download in vLLM's words, at least the modelled time.
	_, log, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-8B"}}, Config{})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	m := regexp.MustCompile(`Time spent downloading weights for Qwen/Qwen3-8B: ([0-9.]+) seconds`).FindStringSubmatch(log.Render(proc.LogOptions{TailLines: -1}))
	if m == nil {
		t.Fatalf("no download line:\n%s", log.Render(proc.LogOptions{TailLines: 30}))
	}
	if s, _ := strconv.ParseFloat(m[1], 64); s < cfg.downloadTime(big).Seconds() {
		t.Errorf("downloaded in %ss, under the modelled %v", m[1], cfg.downloadTime(big))
	}
}

// TestVllmAbandonedRequestsMetrics: requests whose client hangs up are counted as vLLM counts
// them, finished_reason="abort", with what they had by then: a stream's tokens and their
// intervals (real ones, not zero), a non-streamed answer's tokens generated before the hang-up,
// and no prompt tokens for one abandoned during its prefill, which produced no token yet.
func TestVllmAbandonedRequestsMetrics(t *testing.T) {
	t.Parallel()
	const tokenTime = 10 * time.Millisecond
	_, _, url := vtStart(t, proc.Spec{}, Config{TokenTime: tokenTime, PrefillTime: 100 * time.Millisecond, PrefillMax: 5 * time.Second})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	aborted := func(n float64) string {
		var m string
		vtEventually(t, fmt.Sprintf("%v requests aborted", n), func() (bool, string) {
			_, m = vtCall("GET", url+"/metrics", "")
			return strings.Contains(m, fmt.Sprintf(`vllm:request_success_total{engine="0",finished_reason="abort",model_name="Qwen/Qwen3-0.6B"} %s`, pyrepr.Float(n))), m
		})
		return m
	}
	hangUp := func(body string, after func(*http.Response)) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
		resp, err := vtClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		after(resp)
		cancel()
		resp.Body.Close()
	}

	// A stream abandoned after 6 of its 100 tokens ("x": one prompt token, prefilled in 100 ms).
	hangUp(`{"prompt":"x","max_tokens":100,"stream":true}`, func(resp *http.Response) {
		sc := bufio.NewScanner(resp.Body)
		for n := 0; n < 6; {
			if !sc.Scan() {
				t.Fatalf("the stream ended after %d chunks: %v", n, sc.Err())
			}
			if strings.HasPrefix(sc.Text(), "data: ") {
				n++
			}
		}
	})
	m := aborted(1)
	gen, itlN, itlSum := vtMetric(m, "vllm:generation_tokens_total"), vtMetric(m, "vllm:inter_token_latency_seconds_count"), vtMetric(m, "vllm:inter_token_latency_seconds_sum")
	if gen < 6 || gen >= 100 || itlN != gen-1 || itlSum/itlN < tokenTime.Seconds() || vtMetric(m, "vllm:time_to_first_token_seconds_count") != 1 ||
		vtMetric(m, "vllm:prompt_tokens_total") != 1 {
		t.Fatalf("an abandoned stream: %v tokens, %v intervals averaging %vs (want its tokens less one, each at least %v), a first token, one prompt token:\n%s",
			gen, itlN, itlSum/itlN, tokenTime, m)
	}

	// A non-streamed answer abandoned 300 ms into its 1 s of tokens.
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"y","max_tokens":100}`))
	if resp, err := vtClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the answer came before the client hung up: %s", resp.Status)
	}
	cancel()
	m = aborted(2)
	if g := vtMetric(m, "vllm:generation_tokens_total") - gen; g < 1 || g >= 100 || vtMetric(m, "vllm:time_to_first_token_seconds_count") != 2 ||
		vtMetric(m, "vllm:prompt_tokens_total") != 2 {
		t.Fatalf("an abandoned answer: %v tokens generated (want some of its 100), a first token and its prompt token:\n%s", g, m)
	}
	gen = vtMetric(m, "vllm:generation_tokens_total")

	// Abandoned during the prefill of its 20 prompt tokens (2 s): nothing prefilled, nothing generated.
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"`+strings.Repeat("w ", 20)+`","max_tokens":4}`))
	if resp, err := vtClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the answer came before the client hung up: %s", resp.Status)
	}
	m = aborted(3)
	if vtMetric(m, "vllm:generation_tokens_total") != gen || vtMetric(m, "vllm:prompt_tokens_total") != 2 || vtMetric(m, "vllm:time_to_first_token_seconds_count") != 2 {
		t.Fatalf("abandoned during its prefill, it counts no prompt token, no token and no first token:\n%s", m)
	}
}
