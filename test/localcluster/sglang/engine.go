// The fake SGLang's scheduler: --max-running-requests slots over a token pool of
// max_total_num_tokens, a FIFO waiting queue (bounded by --max-queued-requests), and the series
// SGLang v0.5.3 exports on /metrics (python/sglang/srt/metrics/collector.py) when started with
// --enable-metrics. Like the real scheduler, its gauges are set when it logs a batch (every
// prefill, every --decode-log-interval decode steps) and, while idle, every 30 s: a scrape
// reads the last logged state, not the instant. It owns no goroutine: a request's handler waits
// for its slot and its tokens.

package sglang

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

// errQueueFull is the scheduler refusing a request beyond --max-queued-requests.
var errQueueFull = errors.New("The request queue is full.")

// idleStatsInterval is how often an idle scheduler logs its gauges (check_memory's 30 s).
const idleStatsInterval = 30 * time.Second

// Buckets as TokenizerMetricsCollector declares them by default.
var (
	ttftBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400}
	itlBuckets  = []float64{0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
		0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000}
	e2eBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400}
)

// gauges is SchedulerStats as the scheduler last logged it.
type gauges struct {
	running, queued, usedTokens int
	tokenUsage, genThroughput   float64
	at                          time.Time
}

// engine is the scheduler of one server.
type engine struct {
	mu          sync.Mutex
	slots       int
	maxQueued   int // 0: unbounded
	totalTokens int
	contextLen  int
	running     int
	usedTokens  int
	waiting     []*waiter
	logged      gauges
	decodeSteps int           // decode tokens since the last decode log
	genSince    int           // tokens generated since the last log, for gen_throughput
	idle        time.Duration // idleStatsInterval; a test shortens it

	promptTokens, generationTokens, requests, aborted uint64
	ttft, itl, e2e                                    histogram.Histogram
}

// waiter is a request waiting for a slot and its tokens.
type waiter struct {
	tokens int
	grant  chan struct{}
}

func newEngine(slots, maxQueued, totalTokens, contextLen int, a *serverArgs) *engine {
	tb := ttftBuckets
	if len(a.ttftBuckets) > 0 {
		tb = a.ttftBuckets
	}
	return &engine{slots: slots, maxQueued: maxQueued, totalTokens: totalTokens, contextLen: contextLen,
		ttft: histogram.New(tb), itl: histogram.New(itlBuckets), e2e: histogram.New(e2eBuckets),
		logged: gauges{at: time.Now()}, idle: idleStatsInterval}
}

// admit waits for a slot and tokens (prompt and output) for the request, in arrival order; it
// returns the prefill batch line to log, or an error (the queue is full, or the request or the
// process ended).
func (e *engine) admit(ctx context.Context, stop <-chan struct{}, prompt, tokens int) (string, error) {
	e.mu.Lock()
	tokens = min(tokens, e.totalTokens)
	if len(e.waiting) == 0 && e.fits(tokens) {
		e.running++
		e.usedTokens += tokens
		line := e.prefillLine(prompt)
		e.mu.Unlock()
		return line, nil
	}
	if e.maxQueued > 0 && len(e.waiting) >= e.maxQueued {
		e.mu.Unlock()
		return "", errQueueFull
	}
	w := &waiter{tokens: tokens, grant: make(chan struct{})}
	e.waiting = append(e.waiting, w)
	e.mu.Unlock()
	select {
	case <-w.grant:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.prefillLine(prompt), nil
	case <-ctx.Done():
	case <-stop:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-w.grant: // granted meanwhile: give the slot back
		e.releaseLocked(tokens)
	default:
		for i, x := range e.waiting {
			if x == w {
				e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
				break
			}
		}
	}
	e.aborted++
	return "", context.Canceled
}

func (e *engine) fits(tokens int) bool {
	return e.running < e.slots && e.usedTokens+tokens <= e.totalTokens
}

// prefillLine is log_prefill_stats' line, which also sets the gauges.
func (e *engine) prefillLine(prompt int) string {
	e.logGauges()
	return fmt.Sprintf("Prefill batch. #new-seq: 1, #new-token: %d, #cached-token: 0, token usage: %.2f, #running-req: %d, #queue-req: %d, ",
		prompt, e.logged.tokenUsage, e.running-1, len(e.waiting))
}

// logGauges sets the gauges from the scheduler's state now.
func (e *engine) logGauges() {
	now := time.Now()
	el := now.Sub(e.logged.at).Seconds()
	tput := 0.0
	if el > 0 {
		tput = float64(e.genSince) / el
	}
	e.logged = gauges{running: e.running, queued: len(e.waiting), usedTokens: e.usedTokens,
		tokenUsage: float64(e.usedTokens) / float64(max(1, e.totalTokens)), genThroughput: tput, at: now}
	e.genSince = 0
}

// release ends a request, handing its slot to the first waiters that fit.
func (e *engine) release(tokens int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.releaseLocked(tokens)
}

func (e *engine) releaseLocked(tokens int) {
	e.running--
	e.usedTokens -= min(tokens, e.totalTokens)
	for len(e.waiting) > 0 && e.fits(e.waiting[0].tokens) {
		w := e.waiting[0]
		e.waiting = e.waiting[1:]
		e.running++
		e.usedTokens += w.tokens
		close(w.grant)
	}
}

// decoded counts a generated token of a running request; it returns the decode batch line when
// one is due (every --decode-log-interval decode steps, as the scheduler counts them).
func (e *engine) decoded(interval int) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.genSince++
	e.decodeSteps++
	if interval <= 0 || e.decodeSteps < interval*max(1, e.running) {
		return ""
	}
	e.decodeSteps = 0
	e.logGauges()
	return fmt.Sprintf("Decode batch. #running-req: %d, #token: %d, token usage: %.2f, cuda graph: True, gen throughput (token/s): %.2f, #queue-req: %d, ",
		e.running, e.usedTokens, e.logged.tokenUsage, e.logged.genThroughput, len(e.waiting))
}

// finish records a finished request's figures.
func (e *engine) finish(prompt, generated int, ttft, itl, e2e time.Duration, abort bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.requests++
	if abort {
		e.aborted++
	}
	e.promptTokens += uint64(prompt)
	e.generationTokens += uint64(generated)
	if generated > 0 {
		e.ttft.Observe(ttft.Seconds(), 1)
	}
	if generated > 1 {
		e.itl.Observe(itl.Seconds(), uint64(generated-1))
	}
	e.e2e.Observe(e2e.Seconds(), 1)
}

// load is running plus waiting requests.
func (e *engine) load() (running, waiting int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running, len(e.waiting)
}

// writeMetrics writes /metrics as SGLang's prometheus_client multiprocess registry serves it:
// every series' help is "Multiprocess metric", counters end in _total and carry no _created,
// label names sorted; the scheduler's gauges labelled model_name, engine_type, tp_rank and
// pp_rank, the tokenizer's counters and histograms model_name.
func (e *engine) writeMetrics(b *strings.Builder, model string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running == 0 && time.Since(e.logged.at) >= e.idle {
		e.logGauges() // the idle scheduler's periodic log
	}
	tl := fmt.Sprintf(`model_name=%q`, model)
	sl := fmt.Sprintf(`engine_type="unified",model_name=%q,pp_rank="0",tp_rank="0"`, model)
	head := func(name, typ string) {
		fmt.Fprintf(b, "# HELP %s Multiprocess metric\n# TYPE %s %s\n", name, name, typ)
	}
	counter := func(name string, v uint64) {
		head(name, "counter")
		fmt.Fprintf(b, "%s{%s} %s\n", name, tl, pyrepr.Float(float64(v)))
	}
	gauge := func(name string, v float64) {
		head(name, "gauge")
		fmt.Fprintf(b, "%s{%s} %s\n", name, sl, pyrepr.Float(v))
	}
	hist := func(name string, h *histogram.Histogram) {
		head(name, "histogram")
		h.Buckets(func(le float64, cum uint64) {
			fmt.Fprintf(b, "%s_bucket{%s,le=\"%s\"} %s\n", name, tl, pyrepr.Float(le), pyrepr.Float(float64(cum)))
		})
		fmt.Fprintf(b, "%s_bucket{%s,le=\"+Inf\"} %s\n", name, tl, pyrepr.Float(float64(h.Count())))
		fmt.Fprintf(b, "%s_count{%s} %s\n%s_sum{%s} %s\n", name, tl, pyrepr.Float(float64(h.Count())), name, tl, pyrepr.Float(h.Sum()))
	}
	counter("sglang:prompt_tokens_total", e.promptTokens)
	counter("sglang:generation_tokens_total", e.generationTokens)
	counter("sglang:num_requests_total", e.requests)
	counter("sglang:num_aborted_requests_total", e.aborted)
	g := e.logged
	gauge("sglang:num_running_reqs", float64(g.running))
	gauge("sglang:num_used_tokens", float64(g.usedTokens))
	gauge("sglang:token_usage", g.tokenUsage)
	gauge("sglang:gen_throughput", g.genThroughput)
	gauge("sglang:num_queue_reqs", float64(g.queued))
	gauge("sglang:num_grammar_queue_reqs", 0)
	gauge("sglang:cache_hit_rate", 0)
	hist("sglang:time_to_first_token_seconds", &e.ttft)
	hist("sglang:inter_token_latency_seconds", &e.itl)
	hist("sglang:e2e_request_latency_seconds", &e.e2e)
}
