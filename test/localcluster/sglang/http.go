// The fake SGLang's HTTP surface (python/sglang/srt/entrypoints/http_server.py, v0.5.3): /health
// and /health_generate (503 while the server is Starting, until the warm-up request ran), the
// model info, /generate, the OpenAI /v1/models, /v1/completions and /v1/chat/completions
// (streamed or not), /metrics only with --enable-metrics, POST /load_lora_adapter and
// /unload_lora_adapter at the root, --api-key's middleware, and uvicorn's access log.

package sglang

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// accessLine is uvicorn's access log line.
func (s *Server) accessLine(client, method, uri string, code int) {
	s.uvicorn(`%s - "%s %s HTTP/1.1" %d %s`, client, method, uri, code, http.StatusText(code))
}

// routes are the paths the fake answers and their methods (FastAPI answers 405 for another).
var routes = map[string]string{
	"/health": "GET", "/health_generate": "GET", "/get_model_info": "GET", "/model_info": "GET",
	"/get_server_info": "GET", "/server_info": "GET", "/generate": "POST,PUT", "/v1/models": "GET",
	"/v1/completions": "POST", "/v1/chat/completions": "POST", "/load_lora_adapter": "POST",
	"/unload_lora_adapter": "POST", "/flush_cache": "GET,POST", "/ping": "GET",
}

// ServeHTTP routes a request as SGLang's FastAPI app does.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w := proc.NewAccessLog(rw, func(code int) { s.accessLine(r.RemoteAddr, r.Method, r.URL.RequestURI(), code) })
	a := s.args
	// add_api_key_middleware: every path but OPTIONS and those starting /health or /metrics
	if a.apiKey != "" && r.Method != http.MethodOptions && !strings.HasPrefix(r.URL.Path, "/health") &&
		!strings.HasPrefix(r.URL.Path, "/metrics") && r.Header.Get("Authorization") != "Bearer "+a.apiKey {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
		return
	}
	if strings.HasPrefix(r.URL.Path, "/metrics") && a.enableMetrics { // the mount's ^/metrics(?P<path>.*)$
		var b strings.Builder
		s.eng.writeMetrics(&b, a.servedName)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
		return
	}
	path := r.URL.Path
	if strings.HasPrefix(path, "/v1/models/") {
		s.retrieveModel(w, strings.TrimPrefix(path, "/v1/models/"))
		return
	}
	methods, ok := routes[path]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return
	}
	if !strings.Contains(","+methods+",", ","+r.Method+",") {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	switch path {
	case "/health", "/health_generate":
		s.health(w, r)
	case "/ping":
		w.WriteHeader(http.StatusOK)
	case "/get_model_info", "/model_info":
		writeJSON(w, http.StatusOK, map[string]any{"model_path": a.modelPath, "tokenizer_path": a.modelPath,
			"is_generation": true, "preferred_sampling_params": nil, "weight_version": "default",
			"has_image_understanding": false, "has_audio_understanding": false})
	case "/get_server_info", "/server_info":
		running, waiting := s.eng.load()
		writeJSON(w, http.StatusOK, map[string]any{"model_path": a.modelPath, "served_model_name": a.servedName,
			"tp_size": a.tp, "port": a.port, "max_total_num_tokens": s.eng.totalTokens, "version": sglangVersion,
			"internal_states": []any{map[string]any{"num_running_reqs": running, "num_waiting_reqs": waiting}}})
	case "/flush_cache":
		_, _ = w.Write([]byte("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"))
	case "/v1/models":
		s.models(w)
	case "/generate":
		s.nativeGenerate(w, r)
	case "/v1/completions", "/v1/chat/completions":
		s.openAI(w, r, path == "/v1/chat/completions")
	case "/load_lora_adapter", "/unload_lora_adapter":
		s.loraRoute(w, r, path == "/load_lora_adapter")
	}
}

// health is health_generate: 503 while Starting (until the warm-up request ran); then /health
// answers at once, and /health_generate sends a one-token request and answers 200 once any
// output reaches the tokenizer manager (it checks every second), 503 after
// SGLANG_HEALTH_CHECK_TIMEOUT (20 s) without one.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !s.up.Load() || s.dead.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if s.dying && s.dead.CompareAndSwap(false, true) {
		// never-ready: this first check passes, later ones fail (the behavior's contract)
		defer s.info("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds. tic start time: %s. last_heartbeat time: %s",
			time.Now().UTC().Format(time.TimeOnly), time.Now().UTC().Add(-20*time.Second).Format(time.TimeOnly))
	}
	if r.URL.Path == "/health" && !envTrue(s.spec.Env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"]) {
		w.WriteHeader(http.StatusOK)
		return
	}
	timeout := 20
	if v, err := strconv.Atoi(s.spec.Env["SGLANG_HEALTH_CHECK_TIMEOUT"]); err == nil {
		timeout = v
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = s.generate(r, "", 1, "", nil)
	}()
	deadline := time.Now().Add(time.Duration(timeout) * time.Second)
	for time.Now().Before(deadline) {
		if !s.sleep(r, time.Second) {
			return
		}
		select {
		case <-done:
			w.WriteHeader(http.StatusOK)
			return
		default:
		}
		if running, _ := s.eng.load(); running > 0 {
			w.WriteHeader(http.StatusOK) // another request's output counts as a heartbeat
			return
		}
	}
	s.info("Health check failed. Server couldn't get a response from detokenizer for last %d seconds. tic start time: %s. last_heartbeat time: %s",
		timeout, time.Now().Add(-time.Duration(timeout)*time.Second).UTC().Format(time.TimeOnly), time.Now().UTC().Format(time.TimeOnly))
	w.WriteHeader(http.StatusServiceUnavailable)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// openAIError is SGLang's ErrorResponse.
func openAIError(w http.ResponseWriter, code int, typ, msg string) {
	writeJSON(w, code, map[string]any{"object": "error", "message": msg, "type": typ, "param": nil, "code": code})
}

type modelCard struct {
	ID          string  `json:"id"`
	Object      string  `json:"object"`
	Created     int64   `json:"created"`
	OwnedBy     string  `json:"owned_by"`
	Root        string  `json:"root"`
	Parent      *string `json:"parent"`
	MaxModelLen *int    `json:"max_model_len"`
}

// models is /v1/models: the served name only. v0.5.3 lists no adapter there, loaded or not
// (sgl-project/sglang#12221: no way to see what is loaded but a load or unload's answer;
// listing came with #12229, after v0.5.4).
func (s *Server) models(w http.ResponseWriter) {
	now := time.Now().Unix()
	ctx := s.eng.contextLen
	data := []modelCard{{ID: s.args.servedName, Object: "model", Created: now, OwnedBy: "sglang", Root: s.args.servedName, MaxModelLen: &ctx}}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// retrieveModel is /v1/models/{model}.
func (s *Server) retrieveModel(w http.ResponseWriter, model string) {
	if model != s.args.servedName {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]any{"message": fmt.Sprintf("The model '%s' does not exist", model),
			"type": "invalid_request_error", "param": "model", "code": "model_not_found"}})
		return
	}
	ctx := s.eng.contextLen
	writeJSON(w, http.StatusOK, modelCard{ID: model, Object: "model", Created: time.Now().Unix(), OwnedBy: "sglang", Root: model, MaxModelLen: &ctx})
}

// loraRoute is POST /load_lora_adapter {lora_name, lora_path[, pinned]} and
// /unload_lora_adapter {lora_name}: 200 with the result on success, 400 with it on failure.
func (s *Server) loraRoute(w http.ResponseWriter, r *http.Request, load bool) {
	var req struct {
		Name   *string `json:"lora_name"`
		Path   *string `json:"lora_path"`
		Pinned bool    `json:"pinned"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		openAIError(w, http.StatusBadRequest, "Bad Request", fmt.Sprintf("[{'type': 'json_invalid', 'loc': ('body', 0), 'msg': 'JSON decode error', 'input': {}, 'ctx': {'error': '%s'}}]", err))
		return
	}
	missing := []string{}
	if req.Name == nil {
		missing = append(missing, "lora_name")
	}
	if load && req.Path == nil {
		missing = append(missing, "lora_path")
	}
	if len(missing) > 0 {
		var parts []string
		for _, m := range missing {
			parts = append(parts, fmt.Sprintf("{'type': 'missing', 'loc': ('body', '%s'), 'msg': 'Field required', 'input': ...}", m))
		}
		openAIError(w, http.StatusBadRequest, "Bad Request", "["+strings.Join(parts, ", ")+"]")
		return
	}
	var res loraResult
	if load {
		s.info("Start load Lora adapter. Lora name=%s, path=%s", *req.Name, *req.Path)
		if !s.sleep(r, s.cfg.AdapterLoadTime) {
			return
		}
		res = s.lora.loadResult(*req.Name, *req.Path, req.Pinned, func(name string, n int) {
			s.info("Unloading least recently used LoRA adapter '%s' (current number of adapters: %d, max allowed: %d)", name, n, s.lora.maxLoad)
		})
	} else {
		s.info("Start unload Lora adapter. Lora name=%s", *req.Name)
		res = s.lora.unload(*req.Name)
	}
	code := http.StatusOK
	if !res.Success {
		code = http.StatusBadRequest
	}
	writeJSON(w, code, res)
}

// findAdapter is LoRAConfig reading an adapter's adapter_config.json: a directory on one of the
// pod's mounts, or a Hub repository id (snapshot_download, from the cache only when
// HF_HUB_OFFLINE is set); "" when found.
func (s *Server) findAdapter(path string) string {
	if strings.HasPrefix(path, "/") || strings.HasPrefix(path, ".") {
		if _, _, ok := hfmodel.MountFor(s.spec.Mounts, path); ok {
			return ""
		}
	}
	if !hfmodel.RepoID(path) {
		return fmt.Sprintf("Repo id must be in the form 'repo_name' or 'namespace/repo_name': '%s'. Use `repo_type` argument if needed.", path)
	}
	if envTrue(s.spec.Env["HF_HUB_OFFLINE"]) {
		home := s.spec.Env["HF_HOME"]
		if home == "" {
			home = "/root/.cache/huggingface"
		}
		if _, vol, _ := hfmodel.MountFor(s.spec.Mounts, home); !s.cfg.Weights.Has(vol, path) {
			return "Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input."
		}
	}
	return ""
}

// fakeText are the fake's tokens.
var fakeText = strings.Fields("The quick brown fox jumps over the lazy dog while the model server keeps its promise of one token at a time")

func tokenText(i int) string { return " " + fakeText[i%len(fakeText)] }

func randomHex() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

// result is one generation's outcome.
type result struct {
	text              string
	prompt, generated int
}

// generate runs one request through the scheduler: its queue, its prefill, then maxNew tokens;
// onToken is called with each token's text (streaming) and may stop it by returning false.
// r nil: the server's own request (the warm-up).
func (s *Server) generate(r *http.Request, prompt string, maxNew int, adapter string, onToken func(i int, text string) bool) (result, error) {
	ctx, cancel := s.stopContext(r)
	defer cancel()
	res := result{prompt: max(1, len(strings.Fields(prompt)))}
	t0 := time.Now()
	line, err := s.eng.admit(ctx, s.life.Stopped(), res.prompt, res.prompt+maxNew)
	if err != nil {
		return res, err
	}
	s.sched("%s", line)
	var ttft, itl time.Duration
	abort := true
	defer func() {
		s.eng.release(res.prompt + maxNew)
		s.eng.finish(res.prompt, res.generated, ttft, itl, time.Since(t0), abort)
	}()
	prefill := min(s.cfg.PrefillBase+time.Duration(res.prompt)*s.cfg.PrefillTime, s.cfg.PrefillMax)
	if !s.sleepCtx(ctx, prefill) {
		return res, ctx.Err()
	}
	var text strings.Builder
	var first time.Time
	for i := range maxNew {
		if !s.sleepCtx(ctx, s.cfg.TokenTime) {
			return res, ctx.Err()
		}
		now := time.Now()
		if i == 0 {
			first, ttft = now, now.Sub(t0)
		} else {
			itl = now.Sub(first) / time.Duration(i)
		}
		res.generated = i + 1
		t := tokenText(i)
		text.WriteString(t)
		if line := s.eng.decoded(s.args.decodeLogInterval); line != "" {
			s.sched("%s", line)
		}
		if onToken != nil && !onToken(i, t) {
			return res, ctx.Err()
		}
	}
	abort = false
	res.text = text.String()
	return res, nil
}

// nativeGenerate is POST /generate: {"text", "sampling_params": {"max_new_tokens"}, "stream"}.
func (s *Server) nativeGenerate(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Text           string `json:"text"`
		SamplingParams struct {
			MaxNewTokens *int `json:"max_new_tokens"`
		} `json:"sampling_params"`
		Stream   bool   `json:"stream"`
		LoRAPath string `json:"lora_path"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": err.Error()}})
		return
	}
	maxNew := 128
	if req.SamplingParams.MaxNewTokens != nil {
		maxNew = *req.SamplingParams.MaxNewTokens
	}
	if req.LoRAPath != "" {
		if msg := s.lora.acquire(req.LoRAPath); msg != "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": msg}})
			return
		}
	}
	id := randomHex()
	meta := func(res result, done bool) map[string]any {
		var finish any
		if done {
			finish = map[string]any{"type": "length", "length": res.generated}
		}
		return map[string]any{"id": id, "finish_reason": finish, "prompt_tokens": res.prompt,
			"completion_tokens": res.generated, "cached_tokens": 0, "weight_version": "default"}
	}
	if !req.Stream {
		res, err := s.generate(r, req.Text, maxNew, req.LoRAPath, nil)
		if err != nil {
			s.refuse(w, err, false)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"text": res.text, "meta_info": meta(res, true)})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	started := false
	var sofar strings.Builder
	res, err := s.generate(r, req.Text, maxNew, req.LoRAPath, func(i int, t string) bool {
		if !started {
			started = true
			w.WriteHeader(http.StatusOK)
		}
		sofar.WriteString(t)
		b, _ := json.Marshal(map[string]any{"text": sofar.String(), "meta_info": meta(result{prompt: max(1, len(strings.Fields(req.Text))), generated: i + 1}, i == maxNew-1)})
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
		return true
	})
	if err != nil && !started {
		s.refuse(w, err, false)
		return
	}
	_ = res
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// refuse answers a request the scheduler did not take (a full queue), if the client still
// listens.
func (s *Server) refuse(w http.ResponseWriter, err error, openai bool) {
	if err != errQueueFull {
		return // the client or the process went away: nothing to answer
	}
	if openai {
		openAIError(w, http.StatusServiceUnavailable, "Service Unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{"message": err.Error()}})
}

// openAI is /v1/completions and /v1/chat/completions. SGLang does not check the model name
// against the served one: any name runs on the base model, "<base>:<adapter>" or lora_path
// on a loaded adapter.
func (s *Server) openAI(w http.ResponseWriter, r *http.Request, chat bool) {
	if ct := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0])); ct != "application/json" {
		openAIError(w, http.StatusBadRequest, "Bad Request", "1 validation error:\n  {'loc': ['header', 'content-type'], 'msg': \"Unsupported Media Type: Only 'application/json' is allowed\", 'type': 'value_error'}")
		return
	}
	var req struct {
		Model    string `json:"model"`
		Prompt   any    `json:"prompt"`
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
		MaxTokens           *int   `json:"max_tokens"`
		MaxCompletionTokens *int   `json:"max_completion_tokens"`
		Stream              bool   `json:"stream"`
		LoRAPath            string `json:"lora_path"`
		StreamOptions       *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		openAIError(w, http.StatusBadRequest, "Bad Request", err.Error())
		return
	}
	var prompt string
	if chat {
		if len(req.Messages) == 0 {
			openAIError(w, http.StatusBadRequest, "BadRequestError", "Messages cannot be empty.")
			return
		}
		var b strings.Builder
		for _, m := range req.Messages { // the chat template's markers and the messages
			fmt.Fprintf(&b, "<|im_start|>%s %v <|im_end|> ", m.Role, m.Content)
		}
		prompt = b.String() + "<|im_start|>assistant"
	} else {
		switch p := req.Prompt.(type) {
		case string:
			prompt = p
		case []any:
			prompt = fmt.Sprint(p...)
		}
		if strings.TrimSpace(prompt) == "" && req.Prompt == nil {
			openAIError(w, http.StatusBadRequest, "BadRequestError", "Prompt cannot be empty")
			return
		}
	}
	adapter := req.LoRAPath
	if base, name, ok := strings.Cut(req.Model, ":"); ok && adapter == "" && base != "" {
		adapter = name
	}
	if adapter != "" {
		if msg := s.lora.acquire(adapter); msg != "" {
			openAIError(w, http.StatusBadRequest, "BadRequestError", msg)
			return
		}
	}
	maxTokens := 16
	if chat {
		maxTokens = 128 // the fake's bound for a chat without max_tokens (SGLang's: the context)
	}
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens
	}
	if n := max(1, len(strings.Fields(prompt))); n+maxTokens > s.eng.contextLen {
		openAIError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("Requested token count exceeds the model's maximum context length of %d tokens. You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			s.eng.contextLen, n+maxTokens, n, maxTokens))
		return
	}
	model := req.Model
	if model == "" {
		model = s.args.servedName
	}
	kind := "text_completion"
	if chat {
		kind = "chat.completion"
	}
	id, created := randomHex(), time.Now().Unix()
	if !req.Stream {
		res, err := s.generate(r, prompt, maxTokens, adapter, nil)
		if err != nil {
			s.refuse(w, err, true)
			return
		}
		choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": "length", "matched_stop": nil}
		if chat {
			choice["message"] = map[string]any{"role": "assistant", "content": res.text, "reasoning_content": nil, "tool_calls": nil}
		} else {
			choice["text"] = res.text
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": kind, "created": created, "model": model,
			"choices": []any{choice}, "usage": usage(res), "metadata": map[string]any{"weight_version": "default"}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	obj := kind
	if chat {
		obj = "chat.completion.chunk"
	}
	started := false
	chunk := func(choice map[string]any, u any) {
		if !started {
			started = true
			w.WriteHeader(http.StatusOK)
		}
		c := map[string]any{"id": id, "object": obj, "created": created, "model": model, "choices": []any{}, "usage": u}
		if choice != nil {
			c["choices"] = []any{choice}
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	res, err := s.generate(r, prompt, maxTokens, adapter, func(i int, t string) bool {
		var finish any
		if i == maxTokens-1 {
			finish = "length"
		}
		c := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish, "matched_stop": nil}
		if chat {
			delta := map[string]any{"content": t}
			if i == 0 {
				delta["role"] = "assistant"
			}
			c["delta"] = delta
		} else {
			c["text"] = t
		}
		chunk(c, nil)
		return true
	})
	if err != nil {
		if !started {
			s.refuse(w, err, true)
		}
		return
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(nil, usage(res))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

func usage(res result) map[string]any {
	return map[string]any{"prompt_tokens": res.prompt, "total_tokens": res.prompt + res.generated,
		"completion_tokens": res.generated, "prompt_tokens_details": nil}
}
