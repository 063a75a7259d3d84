package sglang

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// stNextIP numbers this test process's loopback addresses, from a random start so processes
// testing at the same time rarely meet (127.78.x.y; the vLLM fake's tests use 127.77).
var stNextIP atomic.Uint32

func init() { stNextIP.Store(rand.Uint32N(60000)) }

func stIP() string {
	n := stNextIP.Add(1) % 64000
	return fmt.Sprintf("127.78.%d.%d", n/250, 1+n%250)
}

// launch is the operator's single-node container (controller/engine/sglang ServeArgs) for a
// model, with extra arguments.
func launch(model string, extra ...string) []string {
	return append([]string{"--model-path", model, "--served-model-name", "qwen", "--host", "0.0.0.0", "--port", "8000",
		"--enable-metrics"}, extra...)
}

// stStart starts a server on a fresh IP with the operator's command and stops it when the
// test ends.
func stStart(t *testing.T, spec proc.Spec, cfg Config) (*Server, *proc.Log, string) {
	t.Helper()
	if spec.IP == "" {
		spec.IP = stIP()
	}
	if spec.Image == "" {
		spec.Image = Image
	}
	if spec.Command == nil {
		spec.Command = []string{"python3", "-m", "sglang.launch_server"}
	}
	switch spec.GPUs {
	case 0:
		spec.GPUs = 1
	case -1:
		spec.GPUs = 0
	}
	log := proc.NewLog(1 << 20)
	s := Start(spec, cfg, log)
	t.Cleanup(s.Stop)
	return s, log, fmt.Sprintf("http://%s:%d", spec.IP, s.Port())
}

func stExit(t *testing.T, s *Server, log *proc.Log) proc.Exit {
	t.Helper()
	select {
	case st := <-s.Exited():
		return st
	case <-time.After(15 * time.Second):
		t.Fatalf("the server did not exit; log:\n%s", log.Render(proc.LogOptions{TailLines: 30}))
	}
	return proc.Exit{}
}

var stClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// call does one request; -1 when it could not connect.
func call(method, url, body string, hdr ...string) (int, string) {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := stClient.Do(req)
	if err != nil {
		return -1, err.Error()
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return resp.StatusCode, b.String()
}

func logText(log *proc.Log) string { return log.Render(proc.LogOptions{TailLines: -1}) }

// poll waits for cond with a deadline.
func poll(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, detail)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ready waits for /health's 200.
func ready(t *testing.T, url string, log *proc.Log) {
	t.Helper()
	poll(t, "/health 200", func() (bool, string) {
		code, _ := call("GET", url+"/health", "")
		return code == 200, fmt.Sprintf("%d\n%s", code, log.Render(proc.LogOptions{TailLines: 10}))
	})
}

// metric is one sample's value on /metrics: the line starting with name{ whose labels hold
// every part of labels.
func metric(t *testing.T, url, name string, labels ...string) (float64, bool) {
	t.Helper()
	_, body := call("GET", url+"/metrics", "")
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		ok := true
		for _, p := range labels {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			f := strings.Fields(l)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			return v, true
		}
	}
	return 0, false
}

// TestSGLangArgparseRefusals: argparse's words for what launch_server's parser refuses, after
// its usage block, exit 2; an abbreviation one option owns is taken, as allow_abbrev does.
func TestSGLangArgparseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown", launch("Qwen/Qwen3-0.6B", "--foo", "1"), "launch_server.py: error: unrecognized arguments: --foo 1"},
		{"ambiguous abbreviation", launch("Qwen/Qwen3-0.6B", "--max-lo", "4"), "launch_server.py: error: ambiguous option: --max-lo could match --max-lora-rank, --max-loras-per-batch, --max-loaded-loras"},
		{"not an int", launch("Qwen/Qwen3-0.6B", "--tp-size", "two"), "launch_server.py: error: argument --tensor-parallel-size/--tp-size: invalid int value: 'two'"},
		{"not a choice", launch("Qwen/Qwen3-0.6B", "--dtype", "fp4"), "launch_server.py: error: argument --dtype: invalid choice: 'fp4' (choose from 'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')"},
		{"no model", []string{"--port", "8000"}, "launch_server.py: error: the following arguments are required: --model-path/--model"},
		{"a value missing", launch("Qwen/Qwen3-0.6B", "--nnodes"), "launch_server.py: error: argument --nnodes: expected one argument"},
		{"a flag with a value", launch("Qwen/Qwen3-0.6B", "--enable-lora=yes"), "launch_server.py: error: argument --enable-lora: ignored explicit argument 'yes'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, log, _ := stStart(t, proc.Spec{Args: tc.args}, Config{})
			st := stExit(t, s, log)
			text := logText(log)
			lines := strings.Split(strings.TrimSpace(text), "\n")
			if st.Code != 2 || st.Reason != "Error" || lines[len(lines)-1] != tc.want {
				t.Fatalf("exit %+v, last line %q, want %q", st, lines[len(lines)-1], tc.want)
			}
			if !strings.HasPrefix(text, "usage: launch_server.py [-h] --model-path MODEL_PATH\n") ||
				!strings.Contains(text, "\n                        [--tokenizer-path TOKENIZER_PATH]") {
				t.Fatalf("usage block:\n%s", text[:min(len(text), 400)])
			}
		})
	}
	// --tp is --tp-size's abbreviation; --model is --model-path's alias
	s, log, url := stStart(t, proc.Spec{Args: []string{"--model", "Qwen/Qwen3-8B", "--tp", "2", "--port=8000"}, GPUs: 2}, Config{})
	ready(t, url, log)
	if s.args.tp != 2 || !strings.Contains(logText(log), "model_path='Qwen/Qwen3-8B'") || !strings.Contains(logText(log), "tp_size=2") {
		t.Fatalf("args %+v\n%s", s.args, logText(log))
	}
}

// TestSGLangHealthStartsUnavailable: the port refuses while the weights load; /health answers
// 503 while the server is Starting (the warm-up request has not run), then 200; the start log
// carries the lines the operator's phase reader marks.
func TestSGLangHealthStartsUnavailable(t *testing.T) {
	_, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B")}, Config{LoadTime: 300 * time.Millisecond, TokenTime: 60 * time.Millisecond})
	if code, _ := call("GET", url+"/health", ""); code != -1 {
		t.Fatalf("/health answered %d while loading", code)
	}
	var seen503 bool
	poll(t, "/health 503 then 200", func() (bool, string) {
		code, _ := call("GET", url+"/health", "")
		seen503 = seen503 || code == 503
		return code == 200, strconv.Itoa(code)
	})
	if !seen503 {
		t.Fatal("/health never answered 503 before the warm-up")
	}
	text := logText(log)
	last := -1
	for _, want := range []string{"server_args=ServerArgs(model_path='Qwen/Qwen3-0.6B'", " TP0] Init torch distributed begin.",
		" TP0] Load weight begin. avail mem=", "Loading safetensors checkpoint shards: 100% Completed | 1/1",
		" TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16,", " TP0] KV Cache is allocated. #tokens: ",
		" TP0] Capture cuda graph begin. This can take up to several minutes.", " TP0] Capture cuda graph end. Time elapsed: ",
		" TP0] max_total_num_tokens=", "] INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)",
		`] INFO:     127.0.0.1:40512 - "GET /get_model_info HTTP/1.1" 200 OK`, " TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0,",
		`"POST /generate HTTP/1.1" 200 OK`, "] The server is fired up and ready to roll!"} {
		i := strings.Index(text, want)
		if i < last {
			t.Fatalf("%q missing or out of order:\n%s", want, text)
		}
		last = i
	}
	if code, _ := call("GET", url+"/health_generate", ""); code != 200 {
		t.Fatalf("/health_generate %d", code)
	}
}

// TestSGLangRoutes: the OpenAI routes (streamed and not), /generate, /v1/models, the model
// info, 404 for a path SGLang lacks, the API key's middleware.
func TestSGLangRoutes(t *testing.T) {
	_, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--api-key", "k")}, Config{TokenTime: time.Millisecond})
	if code, _ := call("GET", url+"/health", ""); code == 401 {
		t.Fatal("/health needs the key")
	}
	ready(t, url, log)
	auth := []string{"Authorization", "Bearer k"}
	if code, body := call("GET", url+"/v1/models", ""); code != 401 || !strings.Contains(body, `{"error":"Unauthorized"}`) {
		t.Fatalf("without the key: %d %s", code, body)
	}
	code, body := call("GET", url+"/v1/models", "", auth...)
	if code != 200 || !strings.Contains(body, `"id":"qwen","object":"model"`) || !strings.Contains(body, `"owned_by":"sglang","root":"qwen","parent":null,"max_model_len":40960`) {
		t.Fatalf("/v1/models %d %s", code, body)
	}
	code, body = call("POST", url+"/v1/completions", `{"model":"qwen","prompt":"say three words","max_tokens":3}`, auth...)
	var cmpl struct {
		Object  string
		Choices []struct {
			Text         string
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal([]byte(body), &cmpl); code != 200 || err != nil || cmpl.Object != "text_completion" || len(cmpl.Choices) != 1 ||
		cmpl.Choices[0].Text != " The quick brown" || cmpl.Choices[0].FinishReason != "length" || cmpl.Usage.PromptTokens != 3 || cmpl.Usage.CompletionTokens != 3 {
		t.Fatalf("/v1/completions %d %s", code, body)
	}
	code, body = call("POST", url+"/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true}`, auth...)
	if code != 200 || !strings.Contains(body, `"object":"chat.completion.chunk"`) || !strings.Contains(body, `"delta":{"content":" The","role":"assistant"}`) ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("streamed chat %d %s", code, body)
	}
	code, body = call("POST", url+"/generate", `{"text":"The capital of France is","sampling_params":{"max_new_tokens":2}}`, auth...)
	if code != 200 || !strings.Contains(body, `"text":" The quick"`) || !strings.Contains(body, `"finish_reason":{"length":2,"type":"length"}`) {
		t.Fatalf("/generate %d %s", code, body)
	}
	if code, body := call("GET", url+"/v1/load_lora_adapter", "", auth...); code != 404 || body != "{\"detail\":\"Not Found\"}\n" {
		t.Fatalf("vLLM's adapter path: %d %s", code, body)
	}
	if code, body := call("GET", url+"/metrics", ""); code != 200 || !strings.Contains(body, "sglang:num_queue_reqs{") {
		t.Fatalf("/metrics with the key's exemption: %d %.300s", code, body)
	}
	if !strings.Contains(logText(log), `"POST /v1/completions HTTP/1.1" 200 OK`) {
		t.Fatalf("no access line:\n%s", logText(log))
	}
}

// TestSGLangMetrics: /metrics exists only with --enable-metrics; it is the multiprocess
// registry's text: sglang:* series labelled model_name (the served name), the time to first
// token a histogram in SGLang's buckets.
func TestSGLangMetrics(t *testing.T) {
	_, log, url := stStart(t, proc.Spec{Args: []string{"--model-path", "Qwen/Qwen3-0.6B", "--port", "8000"}}, Config{TokenTime: time.Millisecond})
	ready(t, url, log)
	if code, body := call("GET", url+"/metrics", ""); code != 404 || !strings.Contains(body, `"detail":"Not Found"`) {
		t.Fatalf("/metrics without --enable-metrics: %d %s", code, body)
	}
	_, log, url = stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B")}, Config{TokenTime: time.Millisecond})
	ready(t, url, log)
	call("POST", url+"/v1/completions", `{"prompt":"one two three four","max_tokens":5}`)
	_, body := call("GET", url+"/metrics", "")
	for _, want := range []string{
		"# HELP sglang:num_queue_reqs Multiprocess metric\n# TYPE sglang:num_queue_reqs gauge\n",
		`sglang:num_queue_reqs{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} 0.0`,
		`sglang:num_running_reqs{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} `,
		`sglang:token_usage{engine_type="unified",model_name="qwen",pp_rank="0",tp_rank="0"} `,
		"# TYPE sglang:prompt_tokens_total counter\n",
		`sglang:prompt_tokens_total{model_name="qwen"} 10.0`, // the warm-up's 6 words and this prompt's 4
		`sglang:generation_tokens_total{model_name="qwen"} 13.0`,
		"# TYPE sglang:time_to_first_token_seconds histogram\n",
		`sglang:time_to_first_token_seconds_bucket{model_name="qwen",le="0.1"} 2.0`,
		`sglang:time_to_first_token_seconds_bucket{model_name="qwen",le="+Inf"} 2.0`,
		`sglang:time_to_first_token_seconds_count{model_name="qwen"} 2.0`,
		`sglang:e2e_request_latency_seconds_count{model_name="qwen"} 2.0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}

// TestSGLangQueueGrows: beyond --max-running-requests requests wait; the queue gauge moves as
// the scheduler logs its batches (the HPA's signal), and every request is answered.
func TestSGLangQueueGrows(t *testing.T) {
	s, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--max-running-requests", "2", "--decode-log-interval", "5")},
		Config{TokenTime: 10 * time.Millisecond})
	ready(t, url, log)
	var wg sync.WaitGroup
	codes := make(chan int, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _ := call("POST", url+"/v1/completions", `{"prompt":"p","max_tokens":100}`)
			codes <- code
		}()
	}
	poll(t, "the queue gauge at 6", func() (bool, string) {
		q, _ := metric(t, url, "sglang:num_queue_reqs", `model_name="qwen"`)
		r, _ := metric(t, url, "sglang:num_running_reqs", `model_name="qwen"`)
		return q == 6 && r == 2, fmt.Sprintf("queue %v running %v", q, r)
	})
	if u, _ := metric(t, url, "sglang:token_usage"); u <= 0 {
		t.Errorf("token usage %v under load", u)
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Fatalf("a queued request got %d", c)
		}
	}
	// idle, the scheduler logs its gauges every 30 s: the last logged state stands until then
	s.eng.mu.Lock()
	s.eng.idle = 50 * time.Millisecond
	s.eng.mu.Unlock()
	poll(t, "the idle log's zeros", func() (bool, string) {
		q, _ := metric(t, url, "sglang:num_queue_reqs")
		r, _ := metric(t, url, "sglang:num_running_reqs")
		return q == 0 && r == 0, fmt.Sprintf("queue %v running %v", q, r)
	})
}

// TestSGLangQueueBounded: --max-queued-requests refuses beyond it, 503.
func TestSGLangQueueBounded(t *testing.T) {
	s, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--max-running-requests", "1", "--max-queued-requests", "1")},
		Config{TokenTime: 20 * time.Millisecond})
	ready(t, url, log)
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); call("POST", url+"/v1/completions", `{"prompt":"p","max_tokens":50}`) }()
	}
	poll(t, "one running, one waiting", func() (bool, string) {
		r, w := s.eng.load()
		return r == 1 && w == 1, fmt.Sprint(r, w)
	})
	code, body := call("POST", url+"/v1/completions", `{"prompt":"p","max_tokens":1}`)
	wg.Wait()
	if code != 503 || !strings.Contains(body, "The request queue is full.") {
		t.Fatalf("beyond the queue: %d %s", code, body)
	}
}

// TestSGLangLoRA: SGLang's adapter endpoints at the root, their bodies and codes, the LRU
// eviction beyond --max-loaded-loras, /v1/models without them (v0.5.3) and a request on an adapter.
func TestSGLangLoRA(t *testing.T) {
	_, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--enable-lora", "--max-loras-per-batch", "2",
		"--max-loaded-loras", "2", "--max-lora-rank", "16", "--lora-target-modules", "all")},
		Config{TokenTime: time.Millisecond, AdapterLoadTime: time.Millisecond})
	ready(t, url, log)
	for _, tc := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/load_lora_adapter", `{"lora_name":"sql","lora_path":"org/sql-lora"}`, 200, `{"success":true,"error_message":"","loaded_adapters":{"sql":"org/sql-lora"}}`},
		{"/load_lora_adapter", `{"lora_name":"sql","lora_path":"org/sql-lora"}`, 400, `{"success":false,"error_message":"Failed to load LoRA adapter sql because it is already loaded","loaded_adapters":{"sql":"org/sql-lora"}}`},
		{"/load_lora_adapter", `{"lora_name":"big","lora_path":"org/big-lora-r64"}`, 400, `"error_message":"LoRA adapter big with rank 64 is incompatible with the current LoRA memory pool configuration. Please ensure that the LoRA adapter's rank is within the configured ` + "`--max-lora-rank`" + ` and that the target modules are included in ` + "`--lora-target-modules`" + `."`},
		{"/load_lora_adapter", `{"lora_name":"bad","lora_path":"/not/mounted"}`, 400, `"error_message":"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '/not/mounted'. Use ` + "`repo_type`" + ` argument if needed."`},
		{"/load_lora_adapter", `{"lora_name":"x"}`, 400, `"type":"Bad Request"`},
		{"/unload_lora_adapter", `{"lora_name":"nope"}`, 400, `{"success":false,"error_message":"LoRA with name nope does not exist. Loaded LoRAs: dict_keys(['sql'])","loaded_adapters":null}`},
		{"/load_lora_adapter", `{"lora_name":"chat","lora_path":"org/chat-lora"}`, 200, `"loaded_adapters":{"chat":"org/chat-lora","sql":"org/sql-lora"}`},
	} {
		code, body := call("POST", url+tc.path, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Fatalf("%s %s: %d %s, want %d %s", tc.path, tc.body, code, body, tc.code, tc.want)
		}
	}
	if code, body := call("POST", url+"/v1/completions", `{"model":"qwen:sql","prompt":"p","max_tokens":1}`); code != 200 {
		t.Fatalf("on the adapter: %d %s", code, body)
	}
	// a third adapter evicts the least recently used unpinned one: chat (sql was just used)
	if code, body := call("POST", url+"/load_lora_adapter", `{"lora_name":"three","lora_path":"org/three-lora"}`); code != 200 ||
		!strings.Contains(body, `"loaded_adapters":{"sql":"org/sql-lora","three":"org/three-lora"}`) {
		t.Fatalf("eviction: %d %s", code, body)
	}
	if !strings.Contains(logText(log), "Unloading least recently used LoRA adapter 'chat' (current number of adapters: 3, max allowed: 2)") {
		t.Fatalf("no eviction line:\n%s", logText(log))
	}
	_, models := call("GET", url+"/v1/models", "")
	if !strings.Contains(models, `"id":"qwen"`) || strings.Contains(models, `"sql"`) || strings.Contains(models, `"three"`) {
		t.Fatalf("/v1/models %s", models)
	}
	if code, body := call("POST", url+"/v1/completions", `{"model":"qwen:chat","prompt":"p","max_tokens":1}`); code != 400 ||
		!strings.Contains(body, `The following requested LoRA adapters are not loaded: {'chat'}\nLoaded adapters: dict_keys(['sql', 'three'])`) {
		t.Fatalf("on an evicted adapter: %d %s", code, body)
	}
	if code, body := call("POST", url+"/unload_lora_adapter", `{"lora_name":"sql"}`); code != 200 || !strings.Contains(body, `"loaded_adapters":{"three":"org/three-lora"}`) {
		t.Fatalf("unload: %d %s", code, body)
	}
	// without --enable-lora
	_, log, url = stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B")}, Config{AdapterLoadTime: time.Millisecond})
	ready(t, url, log)
	if code, body := call("POST", url+"/load_lora_adapter", `{"lora_name":"sql","lora_path":"org/sql-lora"}`); code != 400 ||
		body != "{\"success\":false,\"error_message\":\"LoRA is not enabled. Please set `--enable-lora` to enable LoRA.\",\"loaded_adapters\":null}\n" {
		t.Fatalf("without LoRA: %d %s", code, body)
	}
}

// TestSGLangCrashes: each way a real start fails, with its exit and the line SGLang ends on. A
// scheduler's failure ends the launcher through sys.exit(0) (PID 1 ignores its own SIGKILL):
// exit 0, after "Received sigquit from a child process".
func TestSGLangCrashes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spec   proc.Spec
		cfg    Config
		code   int32
		reason string
		want   []string
	}{
		{"weights larger than the GPU", proc.Spec{Args: launch("deepseek-ai/DeepSeek-V3")}, Config{DownloadTime: time.Millisecond}, 0, "Completed",
			[]string{"Scheduler hit an exception: Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ",
				"] Received sigquit from a child process. It usually means the child failed."}},
		{"no room left for the KV cache", proc.Spec{Args: launch("Qwen/Qwen3-32B", "--mem-fraction-static", "0.75")}, Config{}, 0, "Completed",
			[]string{" TP0] Load weight end. type=Qwen3ForCausalLM", "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."}},
		{"no GPU", proc.Spec{Args: launch("Qwen/Qwen3-0.6B"), GPUs: -1}, Config{}, 1, "Error",
			[]string{"RuntimeError: nvidia-smi not found. Ensure NVIDIA drivers are installed and accessible."}},
		{"fewer GPUs than ranks", proc.Spec{Args: launch("Qwen/Qwen3-8B", "--tp-size", "2")}, Config{}, 0, "Completed",
			[]string{"RuntimeError: CUDA error: invalid device ordinal"}},
		{"LoRA limits", proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--enable-lora", "--max-loras-per-batch", "4", "--max-loaded-loras", "2")}, Config{}, 1, "Error",
			[]string{`  File "/sgl-workspace/sglang/python/sglang/launch_server.py", line 11, in <module>`,
				"AssertionError: max_loaded_loras should be greater than or equal to max_loras_per_batch. max_loaded_loras=2, max_loras_per_batch=4"}},
		{"LoRA without its shape", proc.Spec{Args: launch("Qwen/Qwen3-0.6B", "--enable-lora")}, Config{}, 0, "Completed",
			[]string{"AssertionError: When no initial --lora-paths is provided, you need to specify both --max-lora-rank and --lora-target-modules for LoRA initialization."}},
		{"gated", proc.Spec{Args: launch("meta-llama/Llama-3.1-8B-Instruct")}, Config{}, 1, "Error",
			[]string{"Access to model meta-llama/Llama-3.1-8B-Instruct is restricted. You must have access to it and be authenticated to access it. Please log in."}},
		{"offline without the weights", proc.Spec{Args: launch("Qwen/Qwen3-0.6B"), Env: map[string]string{"HF_HUB_OFFLINE": "1", "HF_HOME": "/cache"},
			Mounts: map[string]string{"/cache": "pvc:ns/cache"}}, Config{Weights: hfmodel.NewWeightsCache()}, 1, "Error",
			[]string{"OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find them in the cached files."}},
		{"host memory", proc.Spec{Args: launch("Qwen/Qwen3-8B"), MemoryLimit: 3 << 30}, Config{}, 137, "OOMKilled",
			[]string{"Loading safetensors checkpoint shards:"}},
		{"oomkilled behavior", proc.Spec{Image: "kubelet.fake/oomkilled", Behavior: proc.Behavior{Kind: proc.OOMKilled}, Args: launch("Qwen/Qwen3-8B")}, Config{CrashRun: time.Millisecond}, 137, "OOMKilled", nil},
		{"crashloop behavior", proc.Spec{Image: "kubelet.fake/crashloop", Behavior: proc.Behavior{Kind: proc.CrashLoop}, Args: launch("Qwen/Qwen3-0.6B")}, Config{CrashRun: 100 * time.Millisecond}, 0, "Completed",
			[]string{"] The server is fired up and ready to roll!", "RuntimeError: CUDA error: an illegal memory access was encountered"}},
		{"ECC fault", proc.Spec{Args: launch("Qwen/Qwen3-0.6B"), GPUFault: proc.FaultECC}, Config{}, 0, "Completed",
			[]string{"RuntimeError: CUDA error: uncorrectable ECC error encountered"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, log, _ := stStart(t, tc.spec, tc.cfg)
			st := stExit(t, s, log)
			text := logText(log)
			if st.Code != tc.code || st.Reason != tc.reason {
				t.Fatalf("exit %+v, want %d %s\n%s", st, tc.code, tc.reason, text)
			}
			last := -1
			for _, w := range tc.want {
				i := strings.Index(text, w)
				if i < last {
					t.Fatalf("%q missing or out of order:\n%s", w, text)
				}
				last = i
			}
		})
	}
}

// TestSGLangOfflineFromTheCache: with HF_HUB_OFFLINE the weights the volume holds load without
// a download; what a download put on a PVC is there for the next pod.
func TestSGLangOfflineFromTheCache(t *testing.T) {
	cache := hfmodel.NewWeightsCache()
	vol := map[string]string{"/cache": "pvc:ns/cache"}
	_, log, url := stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B"), Env: map[string]string{"HF_HOME": "/cache"}, Mounts: vol}, Config{Weights: cache})
	ready(t, url, log)
	if !cache.Has("pvc:ns/cache", "Qwen/Qwen3-0.6B") {
		t.Fatal("the download did not land on the volume")
	}
	_, log, url = stStart(t, proc.Spec{Args: launch("Qwen/Qwen3-0.6B"), Env: map[string]string{"HF_HOME": "/cache", "HF_HUB_OFFLINE": "1"}, Mounts: vol},
		Config{Weights: cache})
	ready(t, url, log)
}

// TestSGLangNeverReady: the behavior's contract, as the vLLM fake plays it: the first /health
// passes, later ones answer 503.
func TestSGLangNeverReady(t *testing.T) {
	_, log, url := stStart(t, proc.Spec{Image: "kubelet.fake/never-ready", Behavior: proc.Behavior{Kind: proc.NeverReady}, Args: launch("Qwen/Qwen3-0.6B")}, Config{})
	ready(t, url, log)
	if code, _ := call("GET", url+"/health", ""); code != 503 {
		t.Fatalf("second /health %d", code)
	}
}

// TestSGLangImageWithoutCommand: an SGLang image runs no server by itself.
func TestSGLangImageWithoutCommand(t *testing.T) {
	log := proc.NewLog(1 << 16)
	s := Start(proc.Spec{Image: Image, IP: stIP(), GPUs: 1}, Config{}, log)
	defer s.Stop()
	if st := stExit(t, s, log); st.Code != 0 || !strings.Contains(logText(log), "== CUDA ==") {
		t.Fatalf("exit %+v\n%s", st, logText(log))
	}
}

// TestSGLangDispatch: which containers the fake SGLang runs.
func TestSGLangDispatch(t *testing.T) {
	for _, tc := range []struct {
		spec proc.Spec
		want bool
	}{
		{proc.Spec{Image: Image, Command: []string{"python3", "-m", "sglang.launch_server"}, Args: []string{"--model-path", "m"}}, true},
		{proc.Spec{Image: "kubelet.fake/ready", Command: []string{"python3", "-m", "sglang.launch_server"}}, true},
		{proc.Spec{Image: Image, Command: []string{"sh", "-c", "exec python3 -m sglang.launch_server '--model-path' 'm' --nnodes 2"}}, true},
		{proc.Spec{Image: Image}, true},
		{proc.Spec{Image: Image, Command: []string{"python3", "-c", "fill"}}, false},
		{proc.Spec{Image: "vllm/vllm-openai:v0.11.0", Args: []string{"m"}}, false},
		{proc.Spec{Image: "kubelet.fake/ready"}, false},
		{proc.Spec{Image: "vllm/vllm-openai:v0.11.0", Command: []string{"vllm", "serve"}}, false},
	} {
		if got := Launches(tc.spec); got != tc.want {
			t.Errorf("Launches(%+v) = %v", tc.spec, got)
		}
	}
	if !Serves("lmsysorg/sglang:v0.5.3-cu126") || !Serves("docker.io/lmsysorg/sglang@sha256:ab") || Serves("vllm/vllm-openai:v0.11.0") {
		t.Error("Serves")
	}
}

// dialable reports whether a TCP port accepts.
func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}
