// The fake vLLM's engine: --max-num-seqs slots, a FIFO of waiting requests, and the
// statistics vLLM exports on /metrics. A request's own handler waits for its slot; the running
// requests' tokens come from the engine's steps (step.go), whose one goroutine runs only while
// a request does, so an idle server costs nothing.

package vllm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/example/inferenceservice-operator/test/localcluster/histogram"
	"github.com/example/inferenceservice-operator/test/localcluster/pyrepr"
)

// errQueueFull is the engine refusing a request beyond its bounded waiting queue.
var errQueueFull = errors.New("the engine's waiting queue is full")

// Buckets as vLLM v0.11's PrometheusStatLogger declares them.
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
		2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}
	latencyBuckets = []float64{0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
		40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0}
)

// finishReasons are vLLM's FinishReason values, as request_success_total labels them.
var finishReasons = []string{"stop", "length", "abort"}

// engineStats is what /metrics reports; guarded by the engine's mutex.
type engineStats struct {
	created          time.Time
	promptTokens     uint64
	generationTokens uint64
	success          map[string]uint64
	ttft, itl        histogram.Histogram
	e2e, queue       histogram.Histogram
	promptHist       histogram.Histogram
	generationHist   histogram.Histogram
}

// engine schedules requests onto slots. Waiters are handed a slot in arrival order.
type engine struct {
	mu          sync.Mutex
	slots       int
	maxWaiting  int
	running     int
	waiting     []waiter   // in arrival order
	kv          *blockPool // the KV cache's blocks and prefix cache (prefix.go)
	maxModelLen int
	stats       engineStats
	lora        loraStats
	// cacheInfo is vllm:cache_config_info's labels; "": not exported.
	cacheInfo string
	// lastStatLog is when the periodic "Engine 000: Avg prompt throughput" line was last
	// written; vLLM writes it every 10 s while busy, here on request completion.
	lastStatLog             time.Time
	windowPrompt, windowGen uint64

	// The running requests as the engine steps advance them (step.go): their order is the
	// scheduler's, stepping says the step loop runs, stop ends it with the server.
	steps    stepModel
	batch    []*stepSeq
	stepping bool
	stop     <-chan struct{}
}

func newEngine(slots, maxWaiting, maxModelLen int, kv *blockPool) *engine {
	lenBuckets := build125Buckets(maxModelLen)
	return &engine{slots: slots, maxWaiting: maxWaiting, kv: kv, maxModelLen: maxModelLen, lastStatLog: time.Now(),
		stats: engineStats{created: time.Now(), success: map[string]uint64{},
			ttft: histogram.New(ttftBuckets), itl: histogram.New(itlBuckets),
			e2e: histogram.New(latencyBuckets), queue: histogram.New(latencyBuckets),
			promptHist: histogram.New(lenBuckets), generationHist: histogram.New(lenBuckets)}}
}

// build125Buckets is vLLM's 1-2-5 series up to max.
func build125Buckets(maxValue int) []float64 {
	var out []float64
	for e := 1.0; ; e *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if m*e > float64(maxValue) {
				return out
			}
			out = append(out, m*e)
		}
	}
}

// waiter is a request waiting for a slot.
type waiter struct {
	ch      chan struct{} // closed when the waiter is given a slot
	adapter string
}

// admit waits for a slot in FIFO order; it fails when the queue is full or ctx ends. adapter
// is the LoRA adapter the request runs on ("" for the base model): as vLLM's scheduler skips a
// waiting request whose adapter would exceed --max-loras distinct adapters in the batch, such a
// request waits even for a free slot, and requests behind it may pass it.
func (e *engine) admit(ctx context.Context, stop <-chan struct{}, adapter string) error {
	e.mu.Lock()
	// A free slot with requests waiting means every one of them waits for its adapter.
	if e.running < e.slots && e.lora.admissible(adapter) {
		e.running++
		e.lora.change(adapter, 0, 1)
		e.mu.Unlock()
		return nil
	}
	if len(e.waiting) >= e.maxWaiting {
		e.mu.Unlock()
		return errQueueFull
	}
	w := waiter{ch: make(chan struct{}), adapter: adapter}
	e.waiting = append(e.waiting, w)
	e.lora.change(adapter, 1, 0)
	e.mu.Unlock()
	select {
	case <-w.ch:
		return nil // dispatch counted it running
	case <-ctx.Done():
	case <-stop:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, x := range e.waiting {
		if x.ch == w.ch {
			e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
			e.lora.change(adapter, -1, 0)
			e.dispatchLocked() // a waiter behind it may have been blocked by nothing else
			return context.Canceled
		}
	}
	// granted at the same moment: give the slot back
	e.releaseLocked(adapter)
	return context.Canceled
}

// release frees a running request's slot and its KV blocks; the slot goes to the first waiter
// that may run.
func (e *engine) release(adapter string, seq *kvSeq) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq != nil {
		e.kv.free(seq)
	}
	e.releaseLocked(adapter)
}

func (e *engine) releaseLocked(adapter string) {
	e.running--
	e.lora.change(adapter, 0, -1)
	e.dispatchLocked()
}

// dispatchLocked hands free slots to waiters in arrival order, passing over those whose adapter
// may not join the batch yet.
func (e *engine) dispatchLocked() {
	for i := 0; i < len(e.waiting) && e.running < e.slots; {
		w := e.waiting[i]
		if !e.lora.admissible(w.adapter) {
			i++
			continue
		}
		e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
		e.running++
		e.lora.change(w.adapter, -1, 1)
		close(w.ch)
	}
}

// beginKV looks the running request's prompt up in the prefix cache and gives it the blocks of
// its total tokens (prefix.go).
func (e *engine) beginKV(tokens []uint32, adapter string, total int) *kvSeq {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kv.begin(tokens, adapter, total)
}

// commitKV caches the request's prompt blocks once its prefill is done.
func (e *engine) commitKV(seq *kvSeq) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kv.commit(seq)
}

// load is running plus waiting: what delays /health in vLLM's shared event loop.
func (e *engine) load() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running + len(e.waiting)
}

// requestRecord is one finished request's figures.
type requestRecord struct {
	reason            string
	prompt, generated int
	queued, ttft, e2e time.Duration
	itl               time.Duration // per token after the first
}

// finish records a finished request; it returns the periodic stats line when one is due.
func (e *engine) finish(r requestRecord) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.stats
	if r.generated > 0 {
		// vLLM counts a prompt's tokens in the iteration that ends its prefill with the first
		// token; a request abandoned before it has prefilled nothing yet.
		s.promptTokens += uint64(r.prompt)
		e.windowPrompt += uint64(r.prompt)
	}
	s.generationTokens += uint64(r.generated)
	e.windowGen += uint64(r.generated)
	s.success[r.reason]++
	s.queue.Observe(r.queued.Seconds(), 1)
	s.e2e.Observe(r.e2e.Seconds(), 1)
	s.promptHist.Observe(float64(r.prompt), 1)
	s.generationHist.Observe(float64(r.generated), 1)
	if r.generated > 0 {
		s.ttft.Observe(r.ttft.Seconds(), 1)
	}
	if r.generated > 1 {
		s.itl.Observe(r.itl.Seconds(), uint64(r.generated-1))
	}
	now := time.Now()
	el := now.Sub(e.lastStatLog)
	if el < 10*time.Second {
		return ""
	}
	line := fmt.Sprintf("Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "+
		"Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%",
		float64(e.windowPrompt)/el.Seconds(), float64(e.windowGen)/el.Seconds(), e.running, len(e.waiting),
		100*e.kv.usage(), 100*e.kv.hitRate())
	e.lastStatLog, e.windowPrompt, e.windowGen = now, 0, 0
	return line
}

// writeMetrics writes the Prometheus text vLLM v0.11 serves on /metrics: its names, help,
// types, labels (sorted, as prometheus_client writes them) and Python's float format.
func (e *engine) writeMetrics(b *strings.Builder, model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.stats
	lbl := fmt.Sprintf(`engine="0",model_name=%q`, model)
	created := pyrepr.Float(float64(s.created.UnixNano()) / 1e9)
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s{%s} %s\n", name, help, name, name, lbl, pyrepr.Float(v))
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(b, "# HELP %s_total %s\n# TYPE %s_total counter\n%s_total{%s} %s\n%s_created{%s} %s\n",
			name, help, name, name, lbl, pyrepr.Float(float64(v)), name, lbl, created)
	}
	hist := func(name, help string, h *histogram.Histogram) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
		h.Buckets(func(le float64, cum uint64) {
			fmt.Fprintf(b, "%s_bucket{engine=\"0\",le=\"%s\",model_name=%q} %s\n", name, pyrepr.Float(le), model, pyrepr.Float(float64(cum)))
		})
		fmt.Fprintf(b, "%s_bucket{engine=\"0\",le=\"+Inf\",model_name=%q} %s\n", name, model, pyrepr.Float(float64(h.Count())))
		fmt.Fprintf(b, "%s_count{%s} %s\n%s_sum{%s} %s\n%s_created{%s} %s\n", name, lbl, pyrepr.Float(float64(h.Count())),
			name, lbl, pyrepr.Float(h.Sum()), name, lbl, created)
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(e.running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(len(e.waiting)))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", e.kv.usage())
	counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", e.kv.queries)
	counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", e.kv.hits)
	counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", 0)
	counter("vllm:prompt_tokens", "Number of prefill tokens processed.", s.promptTokens)
	counter("vllm:generation_tokens", "Number of generation tokens processed.", s.generationTokens)
	fmt.Fprintf(b, "# HELP vllm:request_success_total Count of successfully processed requests.\n# TYPE vllm:request_success_total counter\n")
	for _, r := range finishReasons {
		fmt.Fprintf(b, "vllm:request_success_total{engine=\"0\",finished_reason=%q,model_name=%q} %s\n", r, model, pyrepr.Float(float64(s.success[r])))
	}
	for _, r := range finishReasons {
		fmt.Fprintf(b, "vllm:request_success_created{engine=\"0\",finished_reason=%q,model_name=%q} %s\n", r, model, created)
	}
	hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", &s.promptHist)
	hist("vllm:request_generation_tokens", "Number of generation tokens processed.", &s.generationHist)
	hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &s.ttft)
	hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &s.itl)
	hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &s.e2e)
	hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &s.queue)
	e.lora.write(b)
	if e.cacheInfo != "" {
		fmt.Fprintf(b, "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n# TYPE vllm:cache_config_info gauge\n"+
			"vllm:cache_config_info{%s} 1.0\n", e.cacheInfo)
	}
}

// loraSeriesMax bounds the label combinations vllm:lora_requests_info keeps (prometheus_client
// keeps every one it was ever set with; the fake drops the least recently set beyond this).
const loraSeriesMax = 64

// loraStats is what vllm:lora_requests_info reports: the adapters with requests running and
// waiting, and one series per label combination ever set, its value the time it was last set
// (loggers.py sets it with set_to_current_time() on every engine iteration; the fake, on every
// change: a request arriving, starting or ending). The endpoint picker reads the series with the
// latest value. Guarded by the engine's mutex; zero until LoRA is enabled.
type loraStats struct {
	enabled bool
	maxLora int
	names   []string // adapters with requests, in the order they were first seen (a dict's keys)
	waiting map[string]int
	running map[string]int
	series  []loraSeries
}

type loraSeries struct {
	running, waiting string
	at               float64
}

// change moves adapter's request counts by dWaiting and dRunning and records the new state.
// A base-model request ("") changes no count but is an iteration all the same.
func (l *loraStats) change(adapter string, dWaiting, dRunning int) {
	if !l.enabled {
		return
	}
	if adapter != "" {
		if l.waiting == nil {
			l.waiting, l.running = map[string]int{}, map[string]int{}
		}
		if l.waiting[adapter] == 0 && l.running[adapter] == 0 {
			l.names = append(l.names, adapter)
		}
		l.waiting[adapter] += dWaiting
		l.running[adapter] += dRunning
		if l.waiting[adapter] <= 0 && l.running[adapter] <= 0 {
			delete(l.waiting, adapter)
			delete(l.running, adapter)
			kept := l.names[:0]
			for _, n := range l.names {
				if n != adapter {
					kept = append(kept, n)
				}
			}
			l.names = kept
		}
	}
	var run, wait []string
	for _, n := range l.names {
		if l.running[n] > 0 {
			run = append(run, n)
		}
		if l.waiting[n] > 0 {
			wait = append(wait, n)
		}
	}
	s := loraSeries{running: strings.Join(run, ","), waiting: strings.Join(wait, ","), at: float64(time.Now().UnixNano()) / 1e9}
	for i := range l.series {
		if l.series[i].running == s.running && l.series[i].waiting == s.waiting {
			l.series[i].at = s.at
			return
		}
	}
	if len(l.series) >= loraSeriesMax {
		oldest := 0
		for i := range l.series {
			if l.series[i].at < l.series[oldest].at {
				oldest = i
			}
		}
		l.series = append(l.series[:oldest], l.series[oldest+1:]...)
	}
	l.series = append(l.series, s)
}

// admissible is vLLM's scheduler check: a request on an adapter may join the running batch when
// the adapter already runs or fewer than max_loras distinct adapters do. Always, without LoRA.
func (l *loraStats) admissible(adapter string) bool {
	if !l.enabled || adapter == "" || l.running[adapter] > 0 {
		return true
	}
	n := 0
	for _, c := range l.running {
		if c > 0 {
			n++
		}
	}
	return n < max(l.maxLora, 1)
}

// write is the gauge as prometheus_client writes it: labels in loggers.py's labelnames order
// (max_lora, waiting_lora_adapters, running_lora_adapters), series in the order first set. No
// series before the first request, as in vLLM.
func (l *loraStats) write(b *strings.Builder) {
	if !l.enabled {
		return
	}
	fmt.Fprintf(b, "# HELP vllm:lora_requests_info Running stats on lora requests.\n# TYPE vllm:lora_requests_info gauge\n")
	for _, s := range l.series {
		fmt.Fprintf(b, "vllm:lora_requests_info{max_lora=\"%d\",waiting_lora_adapters=%q,running_lora_adapters=%q} %s\n",
			l.maxLora, s.waiting, s.running, pyrepr.Float(s.at))
	}
}
