package controller

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/example/inferenceservice-operator/crd"
)

// TestCanaryQueriesSelectByTheModelsLabel: each side's queries select its pods by namespace
// and the model label the ServiceMonitor carries onto the series (the canary's own), count the
// handlers the pods' reads count, and cover the range asked in whole seconds.
func TestCanaryQueriesSelectByTheModelsLabel(t *testing.T) {
	q := canaryQueries("team-a", "llama.canary", "vllm:time_to_first_token_seconds", 90*time.Second)
	sel := `namespace="team-a",ai_example_com_inferenceservice="llama.canary"`
	handlers := `handler=~"/v1/chat/completions|/v1/completions|/v1/responses|/v1/embeddings|/v1/audio/transcriptions|/v1/audio/translations|/v1/score|/v1/rerank|/pooling|/classify"`
	for _, c := range []struct{ got, want string }{
		{q.requests, `sum(increase(http_requests_total{` + sel + `,` + handlers + `}[90s]))`},
		{q.errors, `sum(increase(http_requests_total{` + sel + `,` + handlers + `,status=~"5.."}[90s]))`},
		{q.ttft, `sum by (le) (increase(vllm:time_to_first_token_seconds_bucket{` + sel + `}[90s]))`},
	} {
		if c.got != c.want {
			t.Errorf("query\n got %s\nwant %s", c.got, c.want)
		}
	}
	q = canaryQueries("ns", "m", "sglang:time_to_first_token_seconds", 2*time.Minute)
	if !strings.HasPrefix(q.ttft, "sum by (le) (increase(sglang:time_to_first_token_seconds_bucket{") {
		t.Errorf("SGLang's histogram: %s", q.ttft)
	}
}

func TestPromRangeIsTheStepSoFarInWholeSecondsAtLeastTwoScrapes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		elapsed, want time.Duration
	}{{5 * time.Second, minPromRange}, {61400 * time.Millisecond, 61 * time.Second}, {61600 * time.Millisecond, 62 * time.Second}} {
		if got := promRange(start, start.Add(c.elapsed)); got != c.want {
			t.Errorf("elapsed %s: range %s, want %s", c.elapsed, got, c.want)
		}
	}
}

// fakeProm answers /api/v1/query as Prometheus' web/api/v1 writes it: each query's answer by
// the first of its keys the query contains; the queries and their times are recorded.
type fakeProm struct {
	mu      sync.Mutex
	answers []promAnswer
	queries []string
	times   []string
}

type promAnswer struct {
	contains string
	status   int
	body     string
}

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.times = append(f.times, r.Form.Get("time"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	for _, a := range f.answers {
		if strings.Contains(q, a.contains) {
			w.WriteHeader(a.status)
			fmt.Fprint(w, a.body)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
}

// vector is a success answer with one sample per labels/value pair, at Prometheus' JSON.
func vector(samples ...[2]string) string {
	var rs []string
	for _, s := range samples {
		rs = append(rs, fmt.Sprintf(`{"metric":{%s},"value":[1767225600.5,%q]}`, s[0], s[1]))
	}
	return `{"status":"success","data":{"resultType":"vector","result":[` + strings.Join(rs, ",") + `]}}`
}

func ok(body string) promAnswer { return promAnswer{status: http.StatusOK, body: body} }

func startFakeProm(t *testing.T, answers ...promAnswer) (*fakeProm, PromQuerier) {
	t.Helper()
	f := &fakeProm{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	q, err := NewRolloutPrometheus(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return f, q
}

// bothSides answers every side's three queries: requests, errors and the TTFT buckets.
func bothSides() []promAnswer {
	a := func(instance, what string, body string) promAnswer {
		b := ok(body)
		b.contains = `ai_example_com_inferenceservice="` + instance + `"` + what
		return b
	}
	return []promAnswer{
		a("llama", `,handler=~"/v1/chat/completions|/v1/completions|/v1/responses|/v1/embeddings|/v1/audio/transcriptions|/v1/audio/translations|/v1/score|/v1/rerank|/pooling|/classify",status`, vector([2]string{"", "2"})),
		a("llama", `,handler`, vector([2]string{"", "300"})),
		a("llama", `}`, vector([2]string{`"le":"0.1"`, "200"}, [2]string{`"le":"0.5"`, "290"}, [2]string{`"le":"+Inf"`, "300"})),
		a("llama.canary", `,handler=~"/v1/chat/completions|/v1/completions|/v1/responses|/v1/embeddings|/v1/audio/transcriptions|/v1/audio/translations|/v1/score|/v1/rerank|/pooling|/classify",status`, vector([2]string{"", "20.5"})),
		a("llama.canary", `,handler`, vector([2]string{"", "100.5"})),
		a("llama.canary", `}`, vector([2]string{`"le":"0.1"`, "10"}, [2]string{`"le":"0.5"`, "90"}, [2]string{`"le":"+Inf"`, "100.5"})),
	}
}

var promStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestPromWindowFromPrometheusAnswers: the window of each side is its requests, errors and
// buckets as Prometheus answered them, the queries at now over the step so far.
func TestPromWindowFromPrometheusAnswers(t *testing.T) {
	f, q := startFakeProm(t, bothSides()...)
	now := promStart.Add(75*time.Second + 300*time.Millisecond)
	w, reason := promWindow(context.Background(), q, "team-a", "llama", "vllm:time_to_first_token_seconds", promStart, now)
	if w == nil {
		t.Fatalf("no window: %s", reason)
	}
	if !w.Start.Equal(promStart) {
		t.Errorf("start %s, want %s", w.Start, promStart)
	}
	if w.Stable.Requests != 300 || w.Stable.Errors != 2 || w.Canary.Requests != 100.5 || w.Canary.Errors != 20.5 {
		t.Errorf("stable %+v, canary %+v", w.Stable, w.Canary)
	}
	if w.Canary.TTFT[0.1] != 10 || w.Canary.TTFT[0.5] != 90 || w.Canary.TTFT[math.Inf(1)] != 100.5 || len(w.Canary.TTFT) != 3 {
		t.Errorf("canary buckets %v", w.Canary.TTFT)
	}
	if w.Stable.TTFT[math.Inf(1)] != 300 || len(w.Stable.TTFT) != 3 {
		t.Errorf("stable buckets %v", w.Stable.TTFT)
	}
	if len(f.queries) != 6 {
		t.Fatalf("%d queries, want 6: %q", len(f.queries), f.queries)
	}
	for i, qs := range f.queries {
		if !strings.Contains(qs, "[75s]") {
			t.Errorf("query %s: not over the step's 75s", qs)
		}
		if f.times[i] != "1767225675.3" {
			t.Errorf("query %s at %s, want now (1767225675.3)", qs, f.times[i])
		}
	}
}

// TestPromWindowWithoutErrorSeriesCountsNoError: the instrumentator makes a status's series
// at its first request, so an empty answer to the errors is none.
func TestPromWindowWithoutErrorSeriesCountsNoError(t *testing.T) {
	answers := []promAnswer{{contains: `status=~"5.."`, status: http.StatusOK, body: vector()}}
	for _, a := range bothSides() {
		if strings.HasSuffix(a.contains, ",status") {
			continue
		}
		answers = append(answers, a)
	}
	_, q := startFakeProm(t, answers...)
	w, reason := promWindow(context.Background(), q, "team-a", "llama", "vllm:time_to_first_token_seconds", promStart, promStart.Add(time.Minute))
	if w == nil {
		t.Fatalf("no window: %s", reason)
	}
	if w.Canary.Errors != 0 || w.Canary.Requests != 100.5 || w.Stable.Errors != 0 {
		t.Errorf("stable %+v, canary %+v", w.Stable, w.Canary)
	}
}

// TestPromWindowWaitsOnAnErrorOrAnEmptyAnswer: a failed query, an answer without the
// canary's requests or buckets gives no window, and the reason says which and why.
func TestPromWindowWaitsOnAnErrorOrAnEmptyAnswer(t *testing.T) {
	canaryRequests := `ai_example_com_inferenceservice="llama.canary",handler=~"/v1/chat/completions|/v1/completions|/v1/responses|/v1/embeddings|/v1/audio/transcriptions|/v1/audio/translations|/v1/score|/v1/rerank|/pooling|/classify"}`
	for _, c := range []struct {
		name   string
		answer promAnswer
		want   []string
	}{
		{"error", promAnswer{contains: canaryRequests, status: http.StatusBadRequest,
			body: `{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:2: parse error"}`},
			[]string{"the canary's pods", "bad_data", "parse error"}},
		{"unavailable", promAnswer{contains: canaryRequests, status: http.StatusServiceUnavailable,
			body: `{"status":"error","errorType":"unavailable","error":"TSDB not ready"}`},
			[]string{"the canary's pods", "503"}},
		{"empty requests", promAnswer{contains: canaryRequests, status: http.StatusOK, body: vector()},
			[]string{"the canary's pods", `ai_example_com_inferenceservice="llama.canary"`, "no http_requests_total series"}},
		{"empty buckets", promAnswer{contains: `_bucket{namespace="team-a",ai_example_com_inferenceservice="llama.canary"}`, status: http.StatusOK, body: vector()},
			[]string{"the canary's pods", "no time-to-first-token buckets"}},
		{"no +Inf", promAnswer{contains: `_bucket{namespace="team-a",ai_example_com_inferenceservice="llama.canary"}`, status: http.StatusOK,
			body: vector([2]string{`"le":"0.1"`, "3"})},
			[]string{"the canary's pods", "no +Inf bucket"}},
		{"a matrix", promAnswer{contains: canaryRequests, status: http.StatusOK,
			body: `{"status":"success","data":{"resultType":"matrix","result":[]}}`},
			[]string{"the canary's pods", "not a vector"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, q := startFakeProm(t, append([]promAnswer{c.answer}, bothSides()...)...)
			w, reason := promWindow(context.Background(), q, "team-a", "llama", "vllm:time_to_first_token_seconds", promStart, promStart.Add(time.Minute))
			if w != nil {
				t.Fatalf("a window %+v, want none", w)
			}
			for _, s := range c.want {
				if !strings.Contains(reason, s) {
					t.Errorf("reason %q does not say %q", reason, s)
				}
			}
		})
	}
	// Prometheus not answering at all.
	q, err := NewRolloutPrometheus("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if w, reason := promWindow(context.Background(), q, "team-a", "llama", "vllm:time_to_first_token_seconds", promStart, promStart.Add(time.Minute)); w != nil || !strings.Contains(reason, "the stable's pods") {
		t.Fatalf("Prometheus down: window %v, reason %q", w, reason)
	}
}

func TestNewRolloutPrometheusWantsAnHTTPURL(t *testing.T) {
	if q, err := NewRolloutPrometheus(""); q != nil || err != nil {
		t.Fatalf("empty: %v %v, want neither", q, err)
	}
	for _, bad := range []string{"prometheus:9090", "ftp://p:9090", "http://"} {
		if _, err := NewRolloutPrometheus(bad); err == nil || !strings.Contains(err.Error(), "--rollout-prometheus-url") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestPromStepStartResumesTheStoredStep: a replica without the step in memory (restarted)
// goes on from the stored stepStartedAt, Prometheus having kept the series; a step not yet
// started, or a start in the future (a skewed clock), starts now.
func TestPromStepStartResumesTheStoredStep(t *testing.T) {
	now := promStart.Add(time.Hour)
	for _, c := range []struct {
		stored string
		want   time.Time
	}{
		{promStart.Add(50 * time.Minute).Format(time.RFC3339), promStart.Add(50 * time.Minute)},
		{"", now},
		{"not a time", now},
		{now.Add(time.Minute).Format(time.RFC3339), now},
	} {
		if got := promStepStart(&crd.RolloutStatus{StepStartedAt: c.stored}, now); !got.Equal(c.want) {
			t.Errorf("stored %q: start %s, want %s", c.stored, got, c.want)
		}
	}
}
