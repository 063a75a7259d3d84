// Reading a model server's /metrics page into a Sample: its requests and errors
// (http_requests_total) and its time-to-first-token histogram.

package controller

import (
	"bytes"
	"fmt"
	"math"
	"slices"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/inferenceservice-operator/controller/rollout"
)

// RequestsSeries is vLLM's request counter: prometheus_fastapi_instrumentator's default
// metric, which vLLM v0.11's API server mounts (Instrumentator(excluded_handlers=[/metrics,
// /health, /load, /ping, /version, /server_info]).add().instrument(app)), with labels
// handler, method and status, the status grouped by its first digit ("2xx", "5xx").
const RequestsSeries = "http_requests_total"

// countedHandlers are the inference paths a request is counted on: what the route sends
// clients to, less the listings and the tokenizer, which no new version fails differently.
var countedHandlers = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/embeddings",
	"/v1/audio/transcriptions", "/v1/audio/translations", "/v1/score", "/v1/rerank", "/pooling", "/classify",
}

// ParsePage reads, for a canary step (canary.go), the requests, errors (5xx) and the ttftSeries histogram of one page. A page
// without RequestsSeries counts no request; a page that does not parse is an error.
func ParsePage(page []byte, ttftSeries string) (rollout.Sample, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return rollout.Sample{}, fmt.Errorf("parsing metrics: %w", err)
	}
	var s rollout.Sample
	if f, ok := families[RequestsSeries]; ok {
		for _, m := range f.GetMetric() {
			handler, status := "", ""
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "handler":
					handler = l.GetValue()
				case "status":
					status = l.GetValue()
				}
			}
			if !slices.Contains(countedHandlers, handler) {
				continue
			}
			v := m.GetCounter().GetValue()
			if m.GetUntyped() != nil {
				v = m.GetUntyped().GetValue()
			}
			s.Requests += v
			if len(status) > 0 && status[0] == '5' {
				s.Errors += v
			}
		}
	}
	if f, ok := families[ttftSeries]; ok {
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			if s.TTFT == nil {
				s.TTFT = map[float64]float64{}
			}
			inf := false
			for _, b := range h.GetBucket() {
				s.TTFT[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				inf = inf || math.IsInf(b.GetUpperBound(), 1)
			}
			if !inf {
				s.TTFT[math.Inf(1)] += float64(h.GetSampleCount())
			}
		}
	}
	return s, nil
}
