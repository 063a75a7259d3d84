package podmetrics

import (
	"strings"
	"testing"
)

// A page shaped like vLLM 0.11's /metrics: the gauge beside histograms and counters whose
// names share its prefix, a base model and an adapter.
const vllmPage = `# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 1234.0
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen3-8b"} 4.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen3-8b"} 3.0
vllm:num_requests_waiting{engine="0",model_name="sql-lora"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen3-8b"} 0.375
# HELP vllm:kv_cache_usage_perc_other A family whose name extends the gauge's.
# TYPE vllm:kv_cache_usage_perc_other gauge
vllm:kv_cache_usage_perc_other{engine="0",model_name="qwen3-8b"} 9.0
# HELP vllm:num_requests_waiting_by_reason Requests waiting, by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="qwen3-8b",reason="capacity"} 99.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="qwen3-8b"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="qwen3-8b"} 7.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="qwen3-8b"} 7.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="qwen3-8b"} 12.5
`

// sglangPage is SGLang v0.5.3's /metrics with --enable-metrics, as prometheus_client's
// multiprocess collector writes it (python/sglang/srt/metrics/collector.py): the scheduler's
// gauges labelled engine_type, model_name, pp_rank and tp_rank (sorted, as the multiprocess
// files key them), written by TP rank 0 only; one series per data-parallel rank (dp_rank)
// under --dp-size, each rank's own waiting queue; a gauge without a multiprocess mode carrying
// pid; the tokenizer's counters and histograms labelled model_name. num_grammar_queue_reqs
// shares the queue's prefix and is another queue, not a part of it.
const sglangPage = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 12.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 11.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 0.62
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 0.58
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 4.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 3.0
# HELP sglang:num_grammar_queue_reqs The number of requests in the grammar waiting queue.
# TYPE sglang:num_grammar_queue_reqs gauge
sglang:num_grammar_queue_reqs{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 50.0
# HELP sglang:num_retracted_reqs The number of retracted requests.
# TYPE sglang:num_retracted_reqs gauge
sglang:num_retracted_reqs{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pid="311",pp_rank="0",tp_rank="0"} 0.0
# HELP sglang:queue_time_seconds Histogram of queueing time in seconds.
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{dp_rank="0",engine_type="unified",le="0.1",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 40.0
sglang:queue_time_seconds_bucket{dp_rank="0",engine_type="unified",le="+Inf",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 61.0
sglang:queue_time_seconds_count{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 61.0
sglang:queue_time_seconds_sum{dp_rank="0",engine_type="unified",model_name="qwen3-8b",pp_rank="0",tp_rank="0"} 9.5
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="qwen3-8b"} 61.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="qwen3-8b"} 20.0
sglang:time_to_first_token_seconds_bucket{le="1.0",model_name="qwen3-8b"} 55.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen3-8b"} 61.0
sglang:time_to_first_token_seconds_count{model_name="qwen3-8b"} 61.0
sglang:time_to_first_token_seconds_sum{model_name="qwen3-8b"} 30.5
`

func TestParseQueue(t *testing.T) {
	queues := Queues()
	for _, tc := range []struct {
		name, page string
		want       float64
		metric     string
		err        string
	}{
		{name: "vLLM: summed over model names, other families ignored", page: vllmPage, want: 5, metric: "num_requests_waiting"},
		{name: "SGLang: summed over data-parallel ranks, the grammar queue and the rest ignored", page: sglangPage, want: 7, metric: "num_queue_reqs"},
		{name: "one series without help", page: "vllm:num_requests_waiting{model_name=\"m\"} 7\n", want: 7, metric: "num_requests_waiting"},
		{name: "SGLang, one series", page: "sglang:num_queue_reqs{model_name=\"m\"} 2\n", want: 2, metric: "num_queue_reqs"},
		{name: "no labels", page: "vllm:num_requests_waiting 0\n", want: 0, metric: "num_requests_waiting"},
		{name: "absent", page: "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n", err: "no engine's queue (sglang:num_queue_reqs or vllm:num_requests_waiting)"},
		{name: "only SGLang's grammar queue", page: "sglang:num_grammar_queue_reqs 4\n", err: "no engine's queue"},
		{name: "empty page", page: "", err: "no engine's queue"},
		{name: "help without a sample", page: "# HELP sglang:num_queue_reqs q\n# TYPE sglang:num_queue_reqs gauge\n", err: "no sglang:num_queue_reqs sample"},
		{name: "both engines' queues", page: vllmPage + sglangPage, err: "carries both vllm:num_requests_waiting and sglang:num_queue_reqs"},
		{name: "NaN", page: "vllm:num_requests_waiting NaN\n", err: "is NaN"},
		{name: "negative", page: "sglang:num_queue_reqs -1\n", err: "sglang:num_queue_reqs is -1"},
		{name: "garbled value", page: "vllm:num_requests_waiting{model_name=\"m\"} lots\n", err: "parsing"},
		{name: "wrong type", page: "# TYPE sglang:num_queue_reqs counter\nsglang:num_queue_reqs 3\n", err: "want a gauge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, q, err := ParseQueue(strings.NewReader(tc.page), queues)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseQueue = %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || q.Metric != tc.metric {
				t.Fatalf("ParseQueue = %v, %+v, %v; want %v as %s", got, q, err, tc.want, tc.metric)
			}
		})
	}
}

// TestQueuesAreTheEngines: the families read are each registered engine's queue, under the
// name its HPAs ask for.
func TestQueuesAreTheEngines(t *testing.T) {
	got := Queues()
	want := []Queue{{"sglang:num_queue_reqs", "num_queue_reqs", "sglang:token_usage", "token_usage", "sglang:time_to_first_token_seconds"},
		{"vllm:num_requests_waiting", "num_requests_waiting", "vllm:kv_cache_usage_perc", "kv_cache_usage_perc", "vllm:time_to_first_token_seconds"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Queues() = %v, want %v", got, want)
	}
}

// TestParsePageKVCache: each engine's KV-cache gauge, read in the queue's pass: vLLM's one
// series, SGLang's averaged over its data-parallel ranks (each its own token pool); a page
// without it, or with a broken one, still gives its queue, without a KV reading.
func TestParsePageKVCache(t *testing.T) {
	queues := Queues()
	for _, tc := range []struct {
		name, page string
		waiting    float64
		kv         float64
		hasKV      bool
		metric     string
	}{
		{name: "vLLM v0.11", page: vllmPage, waiting: 5, kv: 0.375, hasKV: true, metric: "kv_cache_usage_perc"},
		{name: "SGLang v0.5.3, two dp ranks", page: sglangPage, waiting: 7, kv: 0.6, hasKV: true, metric: "token_usage"},
		{name: "vLLM, engine 0 and 1 (data parallel)", page: "vllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.25\n", waiting: 1, kv: 0.375, hasKV: true, metric: "kv_cache_usage_perc"},
		{name: "no KV gauge", page: "vllm:num_requests_waiting 2\n", waiting: 2},
		{name: "the other engine's KV gauge only", page: "vllm:num_requests_waiting 2\nsglang:token_usage 0.9\n", waiting: 2},
		{name: "KV gauge NaN", page: "sglang:num_queue_reqs 1\nsglang:token_usage NaN\n", waiting: 1},
		{name: "KV gauge negative", page: "sglang:num_queue_reqs 1\nsglang:token_usage -0.5\n", waiting: 1},
		{name: "KV as a counter", page: "vllm:num_requests_waiting 1\n# TYPE vllm:kv_cache_usage_perc counter\nvllm:kv_cache_usage_perc 0.5\n", waiting: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ParsePage(strings.NewReader(tc.page), queues)
			if err != nil {
				t.Fatal(err)
			}
			if p.Waiting != tc.waiting || p.HasKV != tc.hasKV || p.KV != tc.kv || (tc.hasKV && p.Queue.KVMetric != tc.metric) {
				t.Fatalf("ParsePage = %+v; want waiting %v, KV %v (%v) as %s", p, tc.waiting, tc.kv, tc.hasKV, tc.metric)
			}
		})
	}
}

// BenchmarkParseQueue reads a vLLM page of 60 histograms, and an SGLang one: a line costs a
// prefix test per engine, the parser sees the queue's lines only.
func BenchmarkParseQueue(b *testing.B) {
	queues := Queues()
	for _, c := range []struct{ name, page string }{
		{"vllm", strings.Repeat(strings.SplitAfterN(vllmPage, "# HELP vllm:e2e", 2)[1], 60) + vllmPage},
		{"sglang", strings.Repeat(strings.SplitAfterN(sglangPage, "# HELP sglang:queue_time", 2)[1], 60) + sglangPage},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.page)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := ParseQueue(strings.NewReader(c.page), queues); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
