package vllm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/proc"
)

// seqTokens are n distinct token ids from start.
func seqTokens(start, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(start + i)
	}
	return out
}

func TestBlockHashesChain(t *testing.T) {
	p := newBlockPool(100, 4, true, "0")
	a := append(seqTokens(0, 4), seqTokens(100, 4)...)
	b := append(seqTokens(50, 4), seqTokens(100, 4)...)
	ha, hb := p.blockHashes(a, ""), p.blockHashes(b, "")
	if len(ha) != 2 || ha[0] == hb[0] {
		t.Fatalf("hashes %v %v", ha, hb)
	}
	if ha[1] == hb[1] {
		t.Fatalf("the same tokens after different parents hash alike: %x", ha[1])
	}
	if got := p.blockHashes(append(a, 1, 2, 3), ""); len(got) != 2 || got[1] != ha[1] {
		t.Fatalf("a partial block is hashed, or the hashes moved: %v", got)
	}
	if lora := p.blockHashes(a, "sql"); lora[0] == ha[0] {
		t.Fatal("the LoRA adapter is not part of the hash")
	}
	// PYTHONHASHSEED fixes NONE_HASH, so two processes with the same seed agree
	if q := newBlockPool(100, 4, true, "0"); q.blockHashes(a, "")[1] != ha[1] {
		t.Fatal("the same PYTHONHASHSEED gave different hashes")
	}
}

func TestBlockPoolHitsAndLRU(t *testing.T) {
	p := newBlockPool(8, 4, true, "0") // 7 usable blocks of 4 tokens
	prompt := seqTokens(0, 12)         // three full blocks
	s1 := p.begin(prompt, "", 12)
	if s1.cached != 0 || len(s1.blocks) != 3 || p.queries != 12 || p.hits != 0 {
		t.Fatalf("first: cached %d blocks %d queries %d hits %d", s1.cached, len(s1.blocks), p.queries, p.hits)
	}
	if u := p.usage(); u != 3.0/7 {
		t.Fatalf("usage %v", u)
	}
	p.commit(s1)
	p.free(s1)
	if p.usage() != 0 {
		t.Fatalf("usage after free %v", p.usage())
	}
	// The whole prompt is cached, but the last token is always computed: two blocks hit.
	s2 := p.begin(prompt, "", 12)
	if s2.cached != 8 || p.queries != 24 || p.hits != 8 {
		t.Fatalf("second: cached %d queries %d hits %d", s2.cached, p.queries, p.hits)
	}
	p.commit(s2)
	p.free(s2)
	// One more token: all three blocks hit.
	s3 := p.begin(seqTokens(0, 13), "", 13)
	if s3.cached != 12 {
		t.Fatalf("13 tokens: cached %d", s3.cached)
	}
	p.free(s3)

	// Another prompt of five blocks takes the two never-used blocks, then the least recently
	// freed: two uncached blocks, then the prompt's third block (freed before its first two),
	// so the first two stay cached.
	other := p.begin(seqTokens(1000, 20), "", 20)
	p.commit(other)
	p.free(other)
	if s := p.begin(seqTokens(0, 13), "", 13); s.cached != 8 {
		t.Fatalf("after eviction: cached %d, want 8 (the third block evicted)", s.cached)
	} else {
		p.free(s)
	}

	// Held blocks are never evicted: a request holding every block makes the next overflow.
	hold := p.begin(seqTokens(0, 13), "", 28)
	if len(hold.blocks) != 7 || p.usage() != 1 {
		t.Fatalf("hold: %d blocks, usage %v", len(hold.blocks), p.usage())
	}
	more := p.begin(seqTokens(5000, 8), "", 8)
	if more.overflow != 2 || p.usage() != 1 {
		t.Fatalf("overflow %d usage %v", more.overflow, p.usage())
	}
	p.free(more)
	p.free(hold)
	if p.usage() != 0 || p.overflow != 0 {
		t.Fatalf("after all freed: usage %v overflow %d", p.usage(), p.overflow)
	}
}

func TestBlockPoolCachingOff(t *testing.T) {
	p := newBlockPool(100, 16, false, "")
	for range 2 {
		s := p.begin(seqTokens(0, 64), "", 80)
		if s.cached != 0 || len(s.blocks) != 5 {
			t.Fatalf("cached %d blocks %d", s.cached, len(s.blocks))
		}
		p.commit(s)
		p.free(s)
	}
	if p.queries != 0 || p.hits != 0 {
		t.Fatalf("queries %d hits %d: vLLM counts nothing without prefix caching", p.queries, p.hits)
	}
}

func TestFakeTokenizer(t *testing.T) {
	if got := tokenize("a b  a"); len(got) != 3 || got[0] != got[2] || got[0] == got[1] {
		t.Fatalf("tokenize: %v", got)
	}
	if got := promptTokens(json.RawMessage(`[1,2,3]`)); len(got) != 3 || got[2] != 3 {
		t.Fatalf("token ids: %v", got)
	}
	if got := promptTokens(json.RawMessage(`["a b","c"]`)); len(got) != 3 {
		t.Fatalf("list of strings: %v", got)
	}
	msgs := []chatMessage{{Role: "system", Content: json.RawMessage(`"be brief"`)},
		{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"hello there"}]`)}}
	text := chatPrompt(msgs)
	if want := "<|im_start|>system\nbe brief\n<|im_end|>\n<|im_start|>user\nhello there\n<|im_end|>\n<|im_start|>assistant\n"; text != want {
		t.Fatalf("template: %q", text)
	}
	if n := len(tokenize(text)); n != 4+2*2+1 {
		t.Fatalf("chat tokens %d", n)
	}
	// a conversation that grows keeps its earlier turns as the prefix
	longer := chatPrompt(append(msgs[:1:1], chatMessage{Role: "user", Content: json.RawMessage(`"hello there"`)},
		chatMessage{Role: "assistant", Content: json.RawMessage(`"hi"`)}))
	if !strings.HasPrefix(longer, strings.TrimSuffix(text, "<|im_start|>assistant\n")) {
		t.Fatalf("not a prefix:\n%q\n%q", text, longer)
	}
}

// words is a prompt of n distinct words starting with tag.
func words(tag string, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = fmt.Sprintf("%s%d", tag, i)
	}
	return strings.Join(w, " ")
}

func completionBody(model, prompt string, maxTokens int) string {
	b, _ := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": maxTokens})
	return string(b)
}

// vtUsage is a completion's usage.
type vtUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	Details      *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func vtComplete(t *testing.T, url, body string) vtUsage {
	t.Helper()
	code, resp := vtCall("POST", url+"/v1/completions", body)
	if code != 200 {
		t.Fatalf("completion: %d %s", code, resp)
	}
	var out struct{ Usage vtUsage }
	if err := json.Unmarshal([]byte(resp), &out); err != nil {
		t.Fatalf("%v: %s", err, resp)
	}
	return out.Usage
}

func vtMetrics(url string) string {
	_, m := vtCall("GET", url+"/metrics", "")
	return m
}

// TestVllmPrefixCache: a repeated prompt hits the cache in whole blocks (all but its last token),
// the counters count tokens, cached_tokens is reported when enabled, and the time to first token
// falls with the cached part.
func TestVllmPrefixCache(t *testing.T) {
	t.Parallel()
	cfg := Config{TokenTime: time.Millisecond, PrefillTime: 2 * time.Millisecond, PrefillMax: 5 * time.Second}
	_, log, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--enable-prompt-tokens-details"}}, cfg)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	prompt := words("p", 150)

	u := vtComplete(t, url, completionBody("", prompt, 1))
	if u.PromptTokens != 150 || u.Details != nil {
		t.Fatalf("first: %+v", u)
	}
	m := vtMetrics(url)
	first := vtMetric(m, "vllm:time_to_first_token_seconds_sum")
	if first < 0.3 || vtMetric(m, "vllm:prefix_cache_queries_total") != 150 || vtMetric(m, "vllm:prefix_cache_hits_total") != 0 {
		t.Fatalf("after the first request: ttft %v\n%s", first, m)
	}

	u = vtComplete(t, url, completionBody("", prompt, 1))
	if u.Details == nil || u.Details.CachedTokens != 144 { // 9 whole blocks of 16 within 149 tokens
		t.Fatalf("second: %+v", u)
	}
	m = vtMetrics(url)
	second := vtMetric(m, "vllm:time_to_first_token_seconds_sum") - first
	if second > first/2 {
		t.Fatalf("cached prefill not faster: first %.3fs second %.3fs", first, second)
	}
	if q, h := vtMetric(m, "vllm:prefix_cache_queries_total"), vtMetric(m, "vllm:prefix_cache_hits_total"); q != 300 || h != 144 {
		t.Fatalf("queries %v hits %v", q, h)
	}
	for _, want := range []string{
		"# TYPE vllm:prefix_cache_queries_total counter",
		`vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-0.6B"} 144.0`,
		"# TYPE vllm:cache_config_info gauge",
		`vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.9",`,
		`enable_prefix_caching="True"`,
		`vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-0.6B"} 0.0`,
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q:\n%s", want, m)
		}
	}
	blocks := regexp.MustCompile(`num_gpu_blocks="(\d+)"`).FindStringSubmatch(m)
	if blocks == nil || !strings.Contains(log.Render(proc.LogOptions{TailLines: -1}), "after num_gpu_blocks is: "+blocks[1]) {
		t.Fatalf("num_gpu_blocks label %v does not match the log", blocks)
	}

	// A chat that repeats an earlier conversation hits its blocks.
	chat := func(msgs ...string) vtUsage {
		var list []map[string]string
		for i, c := range msgs {
			list = append(list, map[string]string{"role": []string{"system", "user", "assistant"}[min(i, 2)], "content": c})
		}
		b, _ := json.Marshal(map[string]any{"messages": list, "max_tokens": 1})
		code, resp := vtCall("POST", url+"/v1/chat/completions", string(b))
		var out struct{ Usage vtUsage }
		if code != 200 || json.Unmarshal([]byte(resp), &out) != nil {
			t.Fatalf("chat: %d %s", code, resp)
		}
		return out.Usage
	}
	sys := words("s", 60)
	if u := chat(sys, "first question"); u.PromptTokens != 60+2+2*2+1 || u.Details != nil {
		t.Fatalf("chat one: %+v", u)
	}
	if u := chat(sys, "another question entirely"); u.Details == nil || u.Details.CachedTokens != 48 {
		t.Fatalf("chat two: %+v", u) // <|im_start|>system + 60 words = 61 tokens: 3 whole blocks
	}
}

// TestVllmPrefixRouting: of two pods, the one that served a prompt's prefix answers the next
// prompt sharing it sooner; the other prefills it all.
func TestVllmPrefixRouting(t *testing.T) {
	t.Parallel()
	cfg := Config{TokenTime: time.Millisecond, PrefillTime: 2 * time.Millisecond, PrefillMax: 5 * time.Second}
	_, _, warm := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}}, cfg)
	_, _, cold := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}}, cfg)
	vtWaitStatus(t, "GET", warm+"/health", "", 200)
	vtWaitStatus(t, "GET", cold+"/health", "", 200)
	shared := words("doc", 160)
	vtComplete(t, warm, completionBody("", shared+" what is one", 1))

	next := completionBody("", shared+" what is two", 1)
	ttft := func(url string) float64 {
		before := vtMetric(vtMetrics(url), "vllm:time_to_first_token_seconds_sum")
		if u := vtComplete(t, url, next); u.Details != nil {
			t.Fatalf("cached_tokens without --enable-prompt-tokens-details: %+v", u)
		}
		return vtMetric(vtMetrics(url), "vllm:time_to_first_token_seconds_sum") - before
	}
	w, c := ttft(warm), ttft(cold)
	if c < 0.3 || w > c/3 {
		t.Fatalf("time to first token: warm pod %.3fs, cold pod %.3fs", w, c)
	}
	if h := vtMetric(vtMetrics(warm), "vllm:prefix_cache_hits_total"); h != 160 {
		t.Fatalf("warm pod hits %v, want 160 (10 blocks)", h)
	}
	if h := vtMetric(vtMetrics(cold), "vllm:prefix_cache_hits_total"); h != 0 {
		t.Fatalf("cold pod hits %v", h)
	}
}

// TestVllmPrefixEvictionAndUsage: with --num-gpu-blocks-override the pool is small: a running
// request's blocks show in kv_cache_usage_perc, and other prompts evict an idle one's blocks.
func TestVllmPrefixEvictionAndUsage(t *testing.T) {
	t.Parallel()
	cfg := Config{TokenTime: 5 * time.Millisecond, PrefillTime: time.Microsecond}
	_, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--num-gpu-blocks-override", "10"}}, cfg)
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if m := vtMetrics(url); !strings.Contains(m, `num_gpu_blocks="10"`) || !strings.Contains(m, `num_gpu_blocks_override="10"`) {
		t.Fatalf("cache_config_info:\n%s", m)
	}

	// 64 prompt tokens and 50 to generate hold 8 of the 9 usable blocks while running.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		vtCall("POST", url+"/v1/completions", completionBody("", words("run", 64), 50))
	}()
	vtEventually(t, "usage while running", func() (bool, string) {
		m := vtMetrics(url)
		return vtMetric(m, "vllm:kv_cache_usage_perc") == float64(8)/9, m
	})
	wg.Wait()
	if u := vtMetric(vtMetrics(url), "vllm:kv_cache_usage_perc"); u != 0 {
		t.Fatalf("usage after the request: %v", u)
	}

	hits := func() float64 { return vtMetric(vtMetrics(url), "vllm:prefix_cache_hits_total") }
	p1 := completionBody("", words("one", 64), 1)
	vtComplete(t, url, p1)
	h0 := hits()
	vtComplete(t, url, p1)
	if d := hits() - h0; d != 48 {
		t.Fatalf("repeat: %v tokens hit, want 48", d)
	}
	// two other prompts of five blocks each take every free block: p1's cached blocks go
	vtComplete(t, url, completionBody("", words("two", 64), 1))
	vtComplete(t, url, completionBody("", words("three", 64), 1))
	h1 := hits()
	vtComplete(t, url, p1)
	if d := hits() - h1; d != 0 {
		t.Fatalf("after eviction: %v tokens hit, want 0", d)
	}
}

func TestVllmPrefixCachingDisabled(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B", "--no-enable-prefix-caching", "--enable-prompt-tokens-details"}},
		Config{TokenTime: time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	for range 2 {
		if u := vtComplete(t, url, completionBody("", words("x", 40), 1)); u.Details != nil {
			t.Fatalf("cached tokens without prefix caching: %+v", u)
		}
	}
	m := vtMetrics(url)
	if vtMetric(m, "vllm:prefix_cache_queries_total") != 0 || vtMetric(m, "vllm:prefix_cache_hits_total") != 0 ||
		!strings.Contains(m, `enable_prefix_caching="False"`) {
		t.Fatalf("metrics:\n%s", m)
	}
}

// TestVllmPrefillCap: the modelled prefill stops at PrefillMax.
func TestVllmPrefillCap(t *testing.T) {
	t.Parallel()
	_, _, url := vtStart(t, proc.Spec{Args: []string{"Qwen/Qwen3-0.6B"}},
		Config{TokenTime: time.Millisecond, PrefillTime: 10 * time.Millisecond, PrefillMax: 20 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	vtComplete(t, url, completionBody("", words("long", 2000), 1)) // 20 s uncapped
	if s := vtMetric(vtMetrics(url), "vllm:time_to_first_token_seconds_sum"); s > 1 {
		t.Fatalf("time to first token %.3fs: the cap did not hold", s)
	}
}

// loraSeriesRe is one vllm:lora_requests_info sample.
var loraSeriesRe = regexp.MustCompile(`(?m)^vllm:lora_requests_info\{max_lora="(\d+)",waiting_lora_adapters="([^"]*)",running_lora_adapters="([^"]*)"\} (\S+)$`)

// latestLoRA is the series the endpoint picker reads: the one with the latest timestamp.
func latestLoRA(m string) (maxLora, waiting, running string, n int) {
	best := -1.0
	for _, s := range loraSeriesRe.FindAllStringSubmatch(m, -1) {
		n++
		if v, _ := strconv.ParseFloat(s[4], 64); v > best {
			best, maxLora, waiting, running = v, s[1], s[2], s[3]
		}
	}
	return
}

// TestVllmLoRARequestsInfo: the adapters a request waits and runs on show in the latest series.
func TestVllmLoRARequestsInfo(t *testing.T) {
	t.Parallel()
	mounts := map[string]string{"/adapters": "pvc:ns/adapters"}
	args := []string{"Qwen/Qwen3-8B", "--enable-lora", "--max-loras", "2", "--lora-modules", "sql=/adapters/sql", "--max-num-seqs", "1"}
	_, _, url := vtStart(t, proc.Spec{Args: args, Mounts: mounts}, Config{TokenTime: 5 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	if m := vtMetrics(url); !strings.Contains(m, "# TYPE vllm:lora_requests_info gauge") || loraSeriesRe.MatchString(m) {
		t.Fatalf("before any request: a gauge without series expected:\n%s", m)
	}
	var wg sync.WaitGroup
	for _, model := range []string{"", "sql"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vtCall("POST", url+"/v1/completions", completionBody(model, "a b c", 60))
		}()
		if model == "" { // the base model's request takes the only slot first
			vtEventually(t, "running", func() (bool, string) {
				m := vtMetrics(url)
				return vtMetric(m, "vllm:num_requests_running") == 1, m
			})
		}
	}
	for _, want := range [][2]string{{"sql", ""}, {"", "sql"}, {"", ""}} {
		vtEventually(t, fmt.Sprintf("waiting %q running %q", want[0], want[1]), func() (bool, string) {
			m := vtMetrics(url)
			maxLora, waiting, running, _ := latestLoRA(m)
			return maxLora == "2" && waiting == want[0] && running == want[1], m
		})
	}
	wg.Wait()
	if _, _, _, n := latestLoRA(vtMetrics(url)); n < 3 {
		t.Fatalf("%d series: each label combination stays, as prometheus_client keeps it", n)
	}
}

// TestVllmMaxLoRAs: with --max-loras 1 (vLLM's default) a request on a second adapter waits
// while another adapter runs, though slots are free; base-model requests pass it.
func TestVllmMaxLoRAs(t *testing.T) {
	t.Parallel()
	mounts := map[string]string{"/adapters": "pvc:ns/adapters"}
	args := []string{"Qwen/Qwen3-8B", "--enable-lora", "--lora-modules", "sql=/adapters/sql", "chat=/adapters/chat", "--max-num-seqs", "4"}
	_, _, url := vtStart(t, proc.Spec{Args: args, Mounts: mounts}, Config{TokenTime: 5 * time.Millisecond})
	vtWaitStatus(t, "GET", url+"/health", "", 200)
	var wg sync.WaitGroup
	call := func(model string, tokens int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			vtCall("POST", url+"/v1/completions", completionBody(model, "a b c", tokens))
		}()
	}
	state := func(what string, running, waiting float64, loraWaiting, loraRunning string) {
		t.Helper()
		vtEventually(t, what, func() (bool, string) {
			m := vtMetrics(url)
			maxLora, w, r, _ := latestLoRA(m)
			return vtMetric(m, "vllm:num_requests_running") == running && vtMetric(m, "vllm:num_requests_waiting") == waiting &&
				maxLora == "1" && w == loraWaiting && r == loraRunning, m
		})
	}
	call("sql", 80)
	state("sql running", 1, 0, "", "sql")
	call("chat", 1)
	state("chat waiting for sql's batch", 1, 1, "chat", "sql")
	call("", 20) // the base model passes the waiting request
	state("base running too", 2, 1, "chat", "sql")
	state("chat running once sql is done", 0, 0, "", "")
	wg.Wait()
}
