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

func TestParseWaiting(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		want       float64
		err        string
	}{
		{name: "summed over model names, other families ignored", page: vllmPage, want: 5},
		{name: "one series without help", page: "vllm:num_requests_waiting{model_name=\"m\"} 7\n", want: 7},
		{name: "no labels", page: "vllm:num_requests_waiting 0\n", want: 0},
		{name: "absent", page: "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n", err: "no vllm:num_requests_waiting"},
		{name: "empty page", page: "", err: "no vllm:num_requests_waiting"},
		{name: "NaN", page: "vllm:num_requests_waiting NaN\n", err: "is NaN"},
		{name: "negative", page: "vllm:num_requests_waiting -1\n", err: "is -1"},
		{name: "garbled value", page: "vllm:num_requests_waiting{model_name=\"m\"} lots\n", err: "parsing"},
		{name: "wrong type", page: "# TYPE vllm:num_requests_waiting counter\nvllm:num_requests_waiting 3\n", err: "want a gauge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseWaiting(strings.NewReader(tc.page))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseWaiting = %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseWaiting = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func BenchmarkParseWaiting(b *testing.B) {
	page := strings.Repeat(strings.SplitAfterN(vllmPage, "# HELP vllm:e2e", 2)[1], 60) + vllmPage
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseWaiting(strings.NewReader(page)); err != nil {
			b.Fatal(err)
		}
	}
}
