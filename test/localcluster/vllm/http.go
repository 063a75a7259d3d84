// The fake vLLM's HTTP surface once loaded: /health, /version, /metrics, /v1/models, the
// OpenAI completions and chat completions (streamed or not), runtime LoRA loading, the
// API key check and uvicorn's access log, with vLLM v0.11's bodies and status codes.

package vllm

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/hfmodel"
	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// loraAdapter is one loaded LoRA adapter as /v1/models lists it.
type loraAdapter struct{ name, path, base string }

// routes are vLLM's routes, as it logs them at start.
func (s *Server) routes() [][2]string {
	r := [][2]string{{"/openapi.json", "HEAD, GET"}, {"/docs", "HEAD, GET"}, {"/docs/oauth2-redirect", "HEAD, GET"},
		{"/redoc", "HEAD, GET"}, {"/health", "GET"}, {"/load", "GET"}, {"/ping", "POST"}, {"/ping", "GET"},
		{"/tokenize", "POST"}, {"/detokenize", "POST"}, {"/v1/models", "GET"}, {"/version", "GET"},
		{"/v1/chat/completions", "POST"}, {"/v1/completions", "POST"}}
	if s.runtimeLoRA {
		r = append(r, [2]string{"/v1/load_lora_adapter", "POST"}, [2]string{"/v1/unload_lora_adapter", "POST"})
	}
	return append(r, [2]string{"/metrics", "GET"})
}

// ServeHTTP routes a request as vLLM's FastAPI app does.
func (s *Server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	// status is the answer's, for http_requests_total once it is done (httpmetrics.go)
	status := 0
	w := proc.NewAccessLog(rw, func(code int) { // a request that ends unanswered logs no access line
		status = code
		if s.args.accessLog {
			s.uvicorn(`%s - "%s %s HTTP/%d.%d" %d %s`, r.RemoteAddr, r.Method, r.URL.RequestURI(),
				r.ProtoMajor, r.ProtoMinor, code, http.StatusText(code))
		}
	})
	if len(s.apiKeys) > 0 && strings.HasPrefix(r.URL.Path, "/v1") && r.Method != http.MethodOptions {
		ok := false
		for _, k := range s.apiKeys {
			if r.Header.Get("Authorization") == "Bearer "+k {
				ok = true
			}
		}
		if !ok {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return
		}
	}
	defer func() { s.httpReqs.count(s.routes(), r, status) }()
	methods := ""
	for _, rt := range s.routes() {
		if rt[0] == r.URL.Path {
			methods += rt[1] + ", "
		}
	}
	if methods == "" {
		writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
		return
	}
	if !strings.Contains(methods, r.Method+",") {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"detail": "Method Not Allowed"})
		return
	}
	switch r.URL.Path {
	case "/health", "/ping":
		s.health(w, r)
	case "/version":
		writeJSON(w, http.StatusOK, map[string]string{"version": vllmVersion})
	case "/load":
		writeJSON(w, http.StatusOK, map[string]int{"server_load": s.eng.load()})
	case "/metrics":
		var b strings.Builder
		s.httpReqs.write(&b)
		s.eng.writeMetrics(&b, s.args.served[0])
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(b.String()))
	case "/v1/models":
		s.models(w)
	case "/v1/completions", "/v1/chat/completions":
		s.complete(w, r, r.URL.Path == "/v1/chat/completions")
	case "/v1/load_lora_adapter", "/v1/unload_lora_adapter":
		s.loraRoute(w, r, r.URL.Path == "/v1/load_lora_adapter")
	default:
		writeJSON(w, http.StatusOK, map[string]any{})
	}
}

// health answers once the event loop gets to it: later the more requests it is busy with.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.dead.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if s.dying && s.dead.CompareAndSwap(false, true) {
		defer s.engineDied() // after this answer: the first check passes
	}
	if d := s.cfg.HealthDelayPerRequest * time.Duration(s.eng.load()); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.life.Stopped():
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// vllmError is vLLM's ErrorResponse.
func vllmError(w http.ResponseWriter, code int, typ, msg string, param any) {
	writeJSON(w, code, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": param, "code": code}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// modelCard and modelPermission are vLLM's ModelCard, fields in its order.
type modelCard struct {
	ID          string            `json:"id"`
	Object      string            `json:"object"`
	Created     int64             `json:"created"`
	OwnedBy     string            `json:"owned_by"`
	Root        string            `json:"root"`
	Parent      *string           `json:"parent"`
	MaxModelLen *int              `json:"max_model_len"`
	Permission  []modelPermission `json:"permission"`
}

type modelPermission struct {
	ID                 string  `json:"id"`
	Object             string  `json:"object"`
	Created            int64   `json:"created"`
	AllowCreateEngine  bool    `json:"allow_create_engine"`
	AllowSampling      bool    `json:"allow_sampling"`
	AllowLogprobs      bool    `json:"allow_logprobs"`
	AllowSearchIndices bool    `json:"allow_search_indices"`
	AllowView          bool    `json:"allow_view"`
	AllowFineTuning    bool    `json:"allow_fine_tuning"`
	Organization       string  `json:"organization"`
	Group              *string `json:"group"`
	IsBlocking         bool    `json:"is_blocking"`
}

// models is GET /v1/models: each served name, then each LoRA adapter.
func (s *Server) models(w http.ResponseWriter) {
	now := time.Now().Unix()
	card := func(id, root string, parent *string, maxLen *int) modelCard {
		return modelCard{ID: id, Object: "model", Created: now, OwnedBy: "vllm", Root: root, Parent: parent, MaxModelLen: maxLen,
			Permission: []modelPermission{{ID: "modelperm-" + randomHex(), Object: "model_permission", Created: now,
				AllowSampling: true, AllowLogprobs: true, AllowView: true, Organization: "*"}}}
	}
	data := []modelCard{}
	for _, name := range s.args.served {
		data = append(data, card(name, s.args.model, nil, &s.eng.maxModelLen))
	}
	s.loraMu.Lock()
	for _, l := range s.loras {
		data = append(data, card(l.name, l.path, &l.base, nil))
	}
	s.loraMu.Unlock()
	writeJSON(w, http.StatusOK, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", data})
}

// addLoRA loads an adapter as vLLM's OpenAIServingModels does; on failure it returns
// vLLM's message, error type and status.
func (s *Server) addLoRA(name, path, base string) (msg, typ string, code int) {
	s.loraMu.Lock()
	defer s.loraMu.Unlock()
	if name == "" || path == "" {
		return "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput", http.StatusBadRequest
	}
	for _, l := range s.loras {
		if l.name == name {
			return fmt.Sprintf("The lora adapter '%s' has already been loaded.", name), "InvalidUserInput", http.StatusBadRequest
		}
	}
	if !s.args.enableLoRA {
		return "LoRA is not enabled. Use --enable-lora to enable LoRA.", "BadRequestError", http.StatusBadRequest
	}
	_, _, mounted := hfmodel.MountFor(s.spec.Mounts, path)
	if !(strings.HasPrefix(path, "/") && mounted) && !hfmodel.RepoID(path) {
		// The worker's FileNotFoundError, as the engine core carries it back (v1/engine/core.py).
		return fmt.Sprintf("Call to add_lora method failed: Loading lora %s failed: No adapter found for %s", name, path), "NotFoundError", http.StatusNotFound
	}
	if !strings.HasPrefix(path, "/") && hfmodel.RepoID(path) && envTrue(s.spec.Env["HF_HUB_OFFLINE"]) {
		home := s.spec.Env["HF_HOME"]
		if home == "" {
			home = "/root/.cache/huggingface"
		}
		if _, vol, _ := hfmodel.MountFor(s.spec.Mounts, home); !s.cfg.Weights.Has(vol, path) {
			// get_adapter_absolute_path catches snapshot_download's LocalEntryNotFoundError
			// (an EntryNotFoundError), logs it and returns the id, which the worker then
			// finds no adapter at.
			s.api("ERROR", "utils.py:255", "Error downloading the HuggingFace model")
			s.raw(apiPrefix, "Traceback (most recent call last):",
				`  File "`+pyLib+`/vllm/lora/utils.py", line 250, in get_adapter_absolute_path`,
				"    local_snapshot_path = huggingface_hub.snapshot_download(repo_id=lora_path)",
				`  File "`+pyLib+`/huggingface_hub/_snapshot_download.py", line 235, in snapshot_download`,
				"    raise LocalEntryNotFoundError(",
				"huggingface_hub.errors.LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, pass 'local_files_only=False' as input.")
			return fmt.Sprintf("Call to add_lora method failed: Loading lora %s failed: No adapter found for %s", name, path), "NotFoundError", http.StatusNotFound
		}
	}
	if msg := s.args.loraRankError(hfmodel.AdapterRank(path)); msg != "" {
		return msg, "BadRequestError", http.StatusBadRequest
	}
	isBase := false
	for _, n := range s.args.served {
		isBase = isBase || n == base
	}
	if !isBase {
		base = s.args.served[0]
	}
	s.loras = append(s.loras, loraAdapter{name: name, path: path, base: base})
	s.api("INFO", "serving_models.py:174", "Loaded new LoRA adapter: name '%s', path '%s'", name, path)
	return "", "", 0
}

// loraRoute is POST /v1/load_lora_adapter and /v1/unload_lora_adapter.
func (s *Server) loraRoute(w http.ResponseWriter, r *http.Request, load bool) {
	var req struct {
		Name string `json:"lora_name"`
		Path string `json:"lora_path"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error(), nil)
		return
	}
	if load {
		if !s.life.Wait(s.cfg.AdapterLoadTime) { // the process is stopping
			vllmError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the server is shutting down", nil)
			return
		}
		if msg, typ, code := s.addLoRA(req.Name, req.Path, ""); msg != "" {
			vllmError(w, code, typ, msg, nil)
			return
		}
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "Success: LoRA adapter '%s' added successfully.", req.Name)
		return
	}
	if req.Name == "" {
		vllmError(w, http.StatusBadRequest, "InvalidUserInput", "either 'lora_name' and 'lora_int_id' needs to be provided.", nil)
		return
	}
	s.loraMu.Lock()
	kept := s.loras[:0:0]
	for _, l := range s.loras {
		if l.name != req.Name {
			kept = append(kept, l)
		}
	}
	found := len(kept) < len(s.loras)
	s.loras = kept
	s.loraMu.Unlock()
	if !found {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The lora adapter '%s' cannot be found.", req.Name), nil)
		return
	}
	s.api("INFO", "serving_models.py:200", "Removed LoRA adapter: name '%s'", req.Name)
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "Success: LoRA adapter '%s' removed successfully.", req.Name)
}

// completionRequest is what the fake reads of an OpenAI (chat) completion request.
type completionRequest struct {
	Model               string          `json:"model"`
	Prompt              json.RawMessage `json:"prompt"`
	Messages            []chatMessage   `json:"messages"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// fakeText is what the model "generates": one word per token, always the same.
var fakeText = strings.Fields("The quick brown fox jumps over the lazy dog while the model server keeps its promise of one token at a time")

func tokenText(i int) string { return " " + fakeText[i%len(fakeText)] }

func randomHex() string { return fmt.Sprintf("%016x%016x", rand.Uint64(), rand.Uint64()) }

// complete is POST /v1/completions and /v1/chat/completions: the request waits for a slot,
// then the engine's steps prefill its prompt and generate its max_tokens tokens (step.go).
func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	var req completionRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		vllmError(w, http.StatusBadRequest, "BadRequestError", err.Error(), nil)
		return
	}
	if !s.knownModel(req.Model) {
		vllmError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model), "model")
		return
	}
	if s.dead.Load() || s.faults.fail() { // a failing version answers as a dead engine (faults.go)
		vllmError(w, http.StatusInternalServerError, "InternalServerError", "EngineCore encountered an issue. See stack trace (above) for the root cause.", nil)
		return
	}
	var tokens []uint32 // the fake tokenizer's: one token per word (prefix.go)
	if chat {
		tokens = tokenize(chatPrompt(req.Messages))
	} else {
		tokens = promptTokens(req.Prompt)
	}
	prompt := max(len(tokens), 1)
	maxTokens := 16 // the fake's default for both routes; vLLM's chat default is the rest of the context
	if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens
	}
	if maxTokens < 1 {
		vllmError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens must be at least 1, got %d.", maxTokens), nil)
		return
	}
	if prompt+maxTokens > s.eng.maxModelLen {
		vllmError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.eng.maxModelLen, prompt+maxTokens, prompt, maxTokens), nil)
		return
	}
	model := req.Model
	if model == "" {
		model = s.args.served[0]
	}
	kind, prefix := "text_completion", "cmpl-"
	if chat {
		kind, prefix = "chat.completion", "chatcmpl-"
	}
	id, created := prefix+randomHex(), time.Now().Unix()

	adapter := "" // the LoRA adapter the request runs on: its blocks hash apart from the base model's
	if !s.servedName(model) {
		adapter = model
	}

	t0 := time.Now()
	rec := requestRecord{reason: "abort", prompt: prompt}
	if err := s.eng.admit(r.Context(), s.life.Stopped(), adapter); err != nil {
		if err == errQueueFull {
			vllmError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "The server is overloaded; the request queue is full.", nil)
		}
		return
	}
	rec.queued = time.Since(t0)
	// scheduled: the prompt's cached prefix is found, the rest of its blocks allocated
	seq := s.eng.beginKV(tokens, adapter, prompt+maxTokens)
	defer func() {
		s.eng.release(adapter, seq)
		rec.e2e = time.Since(t0)
		if line := s.eng.finish(rec); line != "" && !s.args.disableLogStats {
			s.api("INFO", "loggers.py:127", "%s", line)
		}
	}()
	// A slow version (faults.go) holds its slot before its prompt joins the batch, (factor-1)
	// times what its first token takes alone: the server's own TTFT histogram counts it.
	if d := s.faults.firstTokenDelay(s.eng.steps.duration(prompt-seq.cached, 0, 0) + s.eng.steps.duration(0, 1, prompt)); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.life.Stopped():
			t.Stop()
			return
		}
	}
	// running: the engine's steps prefill its prompt, then give it a token each (step.go)
	q := s.eng.join(prompt-seq.cached, seq.cached, maxTokens)
	defer s.eng.leave(q)
	figures := func(v stepView) {
		rec.generated = v.generated
		if v.generated > 0 {
			rec.ttft = v.first.Sub(t0)
		}
		if v.generated > 1 {
			rec.itl = v.last.Sub(v.first) / time.Duration(v.generated-1)
		}
	}
	if _, ok := s.await(r, q, func(v stepView) bool { return !v.prefilled.IsZero() }); !ok {
		return
	}
	s.eng.commitKV(seq)
	var text strings.Builder
	usage := map[string]any{"prompt_tokens": prompt, "total_tokens": prompt + maxTokens, "completion_tokens": maxTokens, "prompt_tokens_details": nil}
	if s.args.promptTokensDetails && seq.cached > 0 {
		// vLLM reports it only with --enable-prompt-tokens-details, and only when some hit
		usage["prompt_tokens_details"] = map[string]any{"cached_tokens": seq.cached}
	}
	if !req.Stream {
		v, ok := s.await(r, q, func(v stepView) bool { return v.generated >= maxTokens })
		// The client hung up: the tokens generated by then count, as vLLM's iterations
		// counted them while the answer was being made.
		figures(v)
		if !ok {
			return
		}
		for i := range maxTokens {
			text.WriteString(tokenText(i))
		}
		rec.reason = "length"
		choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": "length", "stop_reason": nil}
		if chat {
			choice["message"] = map[string]any{"role": "assistant", "content": text.String(), "refusal": nil, "annotations": nil,
				"audio": nil, "function_call": nil, "tool_calls": []any{}, "reasoning_content": nil}
		} else {
			choice["text"], choice["prompt_logprobs"] = text.String(), nil
		}
		body := map[string]any{"id": id, "object": kind, "created": created, "model": model, "choices": []any{choice},
			"usage": usage, "service_tier": nil, "system_fingerprint": nil, "prompt_logprobs": nil, "kv_transfer_params": nil}
		writeJSON(w, http.StatusOK, body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	chunk := func(choice map[string]any, usage any) {
		obj := kind
		if chat {
			obj += ".chunk"
		}
		c := map[string]any{"id": id, "object": obj, "created": created, "model": model, "choices": []any{}}
		if choice != nil {
			c["choices"] = []any{choice}
		}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		w.(http.Flusher).Flush()
	}
	if chat {
		chunk(map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}, nil)
	}
	for i := range maxTokens {
		// The figures of its tokens so far: vLLM observes each interval as the token comes,
		// so a request the client abandons keeps those it had.
		v, ok := s.await(r, q, func(v stepView) bool { return v.generated > i })
		if !ok {
			return
		}
		figures(v)
		var finish any
		if i == maxTokens-1 {
			finish = "length"
		}
		c := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish, "stop_reason": nil}
		if chat {
			c["delta"] = map[string]any{"content": tokenText(i)}
		} else {
			c["text"] = tokenText(i)
		}
		chunk(c, nil)
	}
	rec.reason = "length"
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		chunk(nil, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	w.(http.Flusher).Flush()
}

// servedName: one of the base model's served names, or none (the first).
func (s *Server) servedName(name string) bool {
	if name == "" {
		return true
	}
	for _, n := range s.args.served {
		if n == name {
			return true
		}
	}
	return false
}

// knownModel: a served name, a loaded adapter, or none (vLLM then uses the first).
func (s *Server) knownModel(name string) bool {
	if name == "" {
		return true
	}
	for _, n := range s.args.served {
		if n == name {
			return true
		}
	}
	s.loraMu.Lock()
	defer s.loraMu.Unlock()
	for _, l := range s.loras {
		if l.name == name {
			return true
		}
	}
	return false
}

// await waits until the request's sequence satisfies done; false: the client left or the
// server stopped first. It returns the sequence's progress either way.
func (s *Server) await(r *http.Request, q *stepSeq, done func(stepView) bool) (stepView, bool) {
	for {
		v := s.eng.view(q)
		if done(v) {
			return v, true
		}
		select {
		case <-q.wake:
		case <-r.Context().Done():
			return v, false
		case <-s.life.Stopped():
			return v, false
		}
	}
}
