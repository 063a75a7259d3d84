package podmetrics

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

var bounds = []float64{0.1, 0.25, 0.5, 1, math.Inf(+1)}

// TestBucketQuantile: Prometheus' bucketQuantile on cumulative counts, worked by hand.
func TestBucketQuantile(t *testing.T) {
	for _, c := range []struct {
		name   string
		counts []float64
		want   float64
	}{
		// rank 0.95 x 80 = 76, in (0.5, 1] (40 to 80): 0.5 + 0.5 x (76-40)/40
		{"in a middle bucket", []float64{0, 10, 40, 80, 80}, 0.95},
		// rank 9.5 in the lowest bucket, from 0: 0.1 x 9.5/10
		{"in the lowest bucket, from 0", []float64{10, 10, 10, 10, 10}, 0.095},
		// rank 4.75 past every finite bucket: the highest finite bound
		{"in +Inf", []float64{0, 0, 0, 0, 5}, 1},
		// not monotonic (a scrape between two buckets' updates): made so, as ensureMonotonic
		// does, [0 10 10 80 80]: rank 76 in (0.5, 1] (10 to 80): 0.5 + 0.5 x (76-10)/70
		{"not monotonic", []float64{0, 10, 5, 80, 80}, 0.5 + 0.5*66/70},
		{"no observation", []float64{0, 0, 0, 0, 0}, math.NaN()},
	} {
		got := BucketQuantile(0.95, bounds, c.counts)
		if !(math.Abs(got-c.want) < 1e-9 || (math.IsNaN(got) && math.IsNaN(c.want))) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := BucketQuantile(0.95, []float64{0.1, 1}, []float64{1, 2}); !math.IsNaN(got) {
		t.Errorf("without +Inf: %v, want NaN", got)
	}
}

func at(s int) time.Time { return time.Unix(1000+int64(s), 0) }

// TestTTFTOverTheWindow: the p95 of what the histogram counted in the window, from the
// difference of the last read and the newest one at or before the window's start.
func TestTTFTOverTheWindow(t *testing.T) {
	var h ttftHistory
	h.add(Histogram{bounds, []float64{10, 20, 30, 40, 40}}, at(0))
	if _, _, ok := h.p95(time.Minute); ok {
		t.Fatal("one read gave a p95")
	}
	h.add(Histogram{bounds, []float64{10, 20, 30, 40, 45}}, at(30)) // 5 slow ones
	h.add(Histogram{bounds, []float64{10, 30, 70, 120, 125}}, at(60))
	// 60 s: from the read at 0: [0 10 40 80 85], rank 80.75 in +Inf: 1 s
	if s, n, ok := h.p95(time.Minute); !ok || s != 1 || n != 85 {
		t.Errorf("60 s: %v over %v (%v), want 1 s over 85", s, n, ok)
	}
	// 30 s: from the read at 30: [0 10 40 80 80], 0.95 s (TestBucketQuantile's first case)
	if s, n, ok := h.p95(30 * time.Second); !ok || math.Abs(s-0.95) > 1e-9 || n != 80 {
		t.Errorf("30 s: %v over %v (%v), want 0.95 s over 80", s, n, ok)
	}
	// 15 s: no read at or before 45 but the one at 30: the same
	if s, _, _ := h.p95(15 * time.Second); math.Abs(s-0.95) > 1e-9 {
		t.Errorf("15 s: %v, want 0.95", s)
	}
	// Nothing more counted for a window: an idle pod reads 0, not NaN.
	h.add(Histogram{bounds, []float64{10, 30, 70, 120, 125}}, at(90))
	h.add(Histogram{bounds, []float64{10, 30, 70, 120, 125}}, at(120))
	if s, n, ok := h.p95(time.Minute); !ok || s != 0 || n != 0 {
		t.Errorf("an empty window: %v over %v (%v), want 0 over 0", s, n, ok)
	}
}

// TestTTFTAcrossARestart: a count lower than the last read's is the server started again;
// what it counted since is the window's, as Prometheus' rate takes a counter reset.
func TestTTFTAcrossARestart(t *testing.T) {
	var h ttftHistory
	h.add(Histogram{bounds, []float64{100, 200, 300, 400, 400}}, at(0))
	h.add(Histogram{bounds, []float64{100, 200, 300, 400, 400}}, at(10))
	h.add(Histogram{bounds, []float64{0, 2, 3, 4, 4}}, at(20))
	// [0 2 3 4 4] since the restart: rank 3.8 in (0.5, 1]: 0.5 + 0.5 x 0.8/1
	if s, n, ok := h.p95(time.Minute); !ok || math.Abs(s-0.9) > 1e-9 || n != 4 {
		t.Errorf("after a restart: %v over %v (%v), want 0.9 s over 4", s, n, ok)
	}
	// Other buckets (a new version of the server): started again, nothing before it compared.
	h.add(Histogram{[]float64{0.5, math.Inf(+1)}, []float64{1, 1}}, at(30))
	if _, _, ok := h.p95(time.Minute); ok {
		t.Error("a p95 across two bucket layouts")
	}
}

// TestTTFTHistoryIsBounded: whatever the read period and the window asked, a pod keeps at
// most maxTTFTSnapshots snapshots, and still covers the window.
func TestTTFTHistoryIsBounded(t *testing.T) {
	var h ttftHistory
	h.p95(MaxTTFTWindow)
	counts := []float64{0, 0, 0, 0, 0}
	for s := 0; s <= 1200; s++ { // a read a second for 20 minutes, a request each
		counts[3]++
		counts[4]++
		h.add(Histogram{bounds, append([]float64(nil), counts...)}, at(s))
		if len(h.snaps) > maxTTFTSnapshots {
			t.Fatalf("%d snapshots at %d s", len(h.snaps), s)
		}
	}
	if first := h.snaps[0].at; first.After(at(1200).Add(-MaxTTFTWindow)) {
		t.Errorf("the oldest snapshot, %v, is within the window", first)
	}
	if _, n, _ := h.p95(MaxTTFTWindow); n < 600 || n > 600+float64(MaxTTFTWindow/(maxTTFTSnapshots-4)/time.Second) {
		t.Errorf("600 s counted %v requests, want 600 and at most a spacing more", n)
	}
}

// TestParsePageTTFT: each engine's TTFT histogram read in the queue's pass, summed over its
// series by bucket; a page without it, or with one that is not a histogram, gives none.
func TestParsePageTTFT(t *testing.T) {
	vllm := `vllm:num_requests_waiting{model_name="m"} 0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="lora"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="lora"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="lora"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="lora"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="lora"} 2.0
# HELP vllm:time_to_first_token_seconds_other A family whose name extends the histogram's.
# TYPE vllm:time_to_first_token_seconds_other gauge
vllm:time_to_first_token_seconds_other 9
`
	sglang := "sglang:num_queue_reqs 0\n# TYPE sglang:time_to_first_token_seconds histogram\n" +
		"sglang:time_to_first_token_seconds_bucket{le=\"0.5\"} 7\nsglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 8\n" +
		"sglang:time_to_first_token_seconds_count 8\nsglang:time_to_first_token_seconds_sum 3\n"
	for _, c := range []struct {
		name, page string
		want       string // Histogram as %v; "" for none
	}{
		{"vLLM, two served names", vllm, "&{[0.1 1 +Inf] [3 5 6]}"},
		{"SGLang", sglang, "&{[0.5 +Inf] [7 8]}"},
		{"none", "vllm:num_requests_waiting 1\n", ""},
		{"a gauge of the name", "vllm:num_requests_waiting 1\nvllm:time_to_first_token_seconds 3\n", ""},
		{"broken: the queue still read", "vllm:num_requests_waiting 1\n# TYPE vllm:time_to_first_token_seconds histogram\n# TYPE vllm:time_to_first_token_seconds histogram\n", ""},
	} {
		p, err := ParsePage(strings.NewReader(c.page), Queues())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := ""
		if p.TTFT != nil {
			got = strings.ReplaceAll(strings.TrimSpace(fmtHist(p.TTFT)), "  ", " ")
		}
		if got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func fmtHist(h *Histogram) string { return fmt.Sprintf("%v", h) }
