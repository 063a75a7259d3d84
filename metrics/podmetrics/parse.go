// Package podmetrics reads each model server's queue (and KV-cache use, and time-to-first-token
// histogram) from the model pods themselves: each ready pod's /metrics, on a bounded period and concurrency, for the custom metrics API the HPA reads.
// It sits beside the operator, not in it: the informers feed it pods, custommetrics serves
// what it read.
package podmetrics

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/example/inferenceservice-operator/controller/engine"
	// Every engine the operator serves a model with: their queues are the families read.
	_ "github.com/example/inferenceservice-operator/controller/engine/sglang"
	_ "github.com/example/inferenceservice-operator/controller/engine/vllm"
)

// Queue is one engine's queue: the family its pages carry it as (vllm:num_requests_waiting),
// and the name the custom metrics API serves it under (num_requests_waiting), which is the
// name the operator's HPA for a model on that engine asks for; and the same two of the
// engine's KV-cache use (vllm:kv_cache_usage_perc as kv_cache_usage_perc), read in the same
// pass over the page for the HPAs on spec.autoscaling.metric kvCache.
// TTFTSeries is the engine's time-to-first-token histogram, read in the same pass for
// spec.autoscaling.metric ttft (its p95 over a window is served as engine.TTFTP95Name).
type Queue struct {
	Series, Metric     string
	KVSeries, KVMetric string
	TTFTSeries         string
}

// Queues are the queues of every registered engine, in the registry's order.
func Queues() []Queue {
	names := engine.Names()
	qs := make([]Queue, 0, len(names))
	for _, n := range names {
		m := engine.For(n).Metrics()
		qs = append(qs, Queue{Series: m.Queue, Metric: m.QueueName, KVSeries: m.KVCacheUsage, KVMetric: m.KVCacheName, TTFTSeries: m.TTFT})
	}
	return qs
}

// Page is what one read of a pod's /metrics gives: its engine's queue, summed over its series,
// and the engine's KV-cache use, averaged over its series (one per data-parallel rank, each
// its own cache) when the page carries it (HasKV).
type Page struct {
	Waiting float64
	Queue   Queue
	KV      float64
	HasKV   bool
	// TTFT is the engine's time-to-first-token histogram summed over its series (one per
	// served model name, or data-parallel rank), nil when the page carries none or a broken one.
	TTFT *Histogram
}

// ParseQueue is ParsePage's queue.
func ParseQueue(r io.Reader, queues []Queue) (float64, Queue, error) {
	p, err := ParsePage(r, queues)
	return p.Waiting, p.Queue, err
}

// ParsePage finds which of queues the page carries and sums it over its series (the base
// model and every adapter share one engine, so their queues add). How the adapter knows a
// pod's engine: from the page itself. A model server exports its own engine's families only
// (vLLM's vllm:*, SGLang's sglang:*), so the queue family present names the engine, and the
// reading is served under that engine's metric name only (custommetrics). A pod label would
// say the same but would change every existing vLLM pod's template, rolling every model on
// upgrade, and a tenant's image could not make it lie any more than it can its page. A page
// that carries two engines' queues is refused: which one the HPA means cannot be told.
// Only the queue, KV-cache and TTFT families' lines are handed to the exposition parser: a page
// is mostly histogram buckets, and the HPA needs only the TTFT histogram's (23 lines a served
// name in vLLM); a line costs a few prefix tests per engine. A missing or broken KV gauge (or
// TTFT histogram) leaves HasKV false (TTFT nil) and the queue served: it fails only the HPAs
// that scale on it, as a pod without a reading.
func ParsePage(r io.Reader, queues []Queue) (Page, error) {
	// The TTFT histogram's lines are parsed apart: a broken histogram must not cost the queue.
	var family, ttft bytes.Buffer
	found := -1
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 64*1024)
	for sc.Scan() {
		line := sc.Bytes()
		for i := range queues {
			if queues[i].KVSeries != "" && isFamilyLine(line, queues[i].KVSeries) {
				family.Write(line)
				family.WriteByte('\n')
				break
			}
			if isHistogramLine(line, queues[i].TTFTSeries) {
				ttft.Write(line)
				ttft.WriteByte('\n')
				break
			}
			if !isFamilyLine(line, queues[i].Series) {
				continue
			}
			if found >= 0 && found != i {
				return Page{}, fmt.Errorf("the page carries both %s and %s: one engine's queue was expected", queues[found].Series, queues[i].Series)
			}
			found = i
			family.Write(line)
			family.WriteByte('\n')
			break
		}
	}
	if err := sc.Err(); err != nil {
		return Page{}, fmt.Errorf("reading metrics: %w", err)
	}
	if found < 0 {
		return Page{}, fmt.Errorf("no engine's queue (%s) in the pod's metrics", seriesOf(queues))
	}
	q := queues[found]
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(&family)
	if err != nil {
		return Page{}, fmt.Errorf("parsing %s: %w", q.Series, err)
	}
	f, ok := families[q.Series]
	if !ok || len(f.GetMetric()) == 0 {
		return Page{}, fmt.Errorf("no %s sample in the pod's metrics", q.Series)
	}
	sum, _, ok := gaugeSum(f)
	if !ok {
		return Page{}, fmt.Errorf("%s is a %s, want a gauge", q.Series, f.GetType())
	}
	if sum != sum || sum < 0 { // NaN or negative: a broken exporter, not a queue
		return Page{}, fmt.Errorf("%s is %v", q.Series, sum)
	}
	p := Page{Waiting: sum, Queue: q}
	if kv, ok := families[q.KVSeries]; ok {
		if sum, n, ok := gaugeSum(kv); ok && n > 0 && sum == sum && sum >= 0 {
			p.KV, p.HasKV = sum/float64(n), true
		}
	}
	if ttft.Len() > 0 {
		tp := expfmt.NewTextParser(model.LegacyValidation)
		if fams, err := tp.TextToMetricFamilies(&ttft); err == nil {
			if h, ok := fams[q.TTFTSeries]; ok {
				p.TTFT = histogramSum(h)
			}
		}
	}
	return p, nil
}

// histogramSum is f's buckets summed over its series by upper bound, as
// sum by (le) (...) would, with the +Inf bucket last; nil when f is not a histogram, has
// more than maxTTFTBuckets buckets, or a count that is NaN or negative.
func histogramSum(f *dto.MetricFamily) *Histogram {
	if f.GetType() != dto.MetricType_HISTOGRAM {
		return nil
	}
	byBound := map[float64]float64{}
	var total float64
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			return nil
		}
		for _, b := range h.GetBucket() {
			if math.IsInf(b.GetUpperBound(), +1) {
				continue // the parser keeps it as a bucket too; SampleCount is its count
			}
			byBound[b.GetUpperBound()] += b.GetCumulativeCountFloat() + float64(b.GetCumulativeCount())
		}
		total += float64(h.GetSampleCount()) + h.GetSampleCountFloat()
	}
	if len(byBound)+1 > maxTTFTBuckets || total != total || total < 0 {
		return nil
	}
	out := &Histogram{Bounds: make([]float64, 0, len(byBound)+1)}
	for b := range byBound {
		out.Bounds = append(out.Bounds, b)
	}
	slices.Sort(out.Bounds)
	out.Counts = make([]float64, 0, len(out.Bounds)+1)
	for _, b := range out.Bounds {
		c := byBound[b]
		if c != c || c < 0 {
			return nil
		}
		out.Counts = append(out.Counts, c)
	}
	out.Bounds, out.Counts = append(out.Bounds, math.Inf(+1)), append(out.Counts, total)
	return out
}

// isHistogramLine is a sample of histogram series (its _bucket, _sum or _count) or its
// HELP/TYPE comment.
func isHistogramLine(line []byte, series string) bool {
	if series == "" {
		return false
	}
	return isFamilyLine(line, series) || isFamilyLine(line, series+"_bucket") || isFamilyLine(line, series+"_sum") || isFamilyLine(line, series+"_count")
}

// gaugeSum is the sum of f's samples and their count; ok is false when f is not a gauge.
func gaugeSum(f *dto.MetricFamily) (sum float64, n int, ok bool) {
	for _, m := range f.GetMetric() {
		switch {
		case m.GetGauge() != nil:
			sum += m.GetGauge().GetValue()
		case m.GetUntyped() != nil:
			sum += m.GetUntyped().GetValue()
		default:
			return 0, 0, false
		}
		n++
	}
	return sum, n, true
}

func seriesOf(queues []Queue) string {
	var b bytes.Buffer
	for i, q := range queues {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString(q.Series)
	}
	return b.String()
}

// isFamilyLine is a sample of series or its HELP/TYPE comment.
func isFamilyLine(line []byte, series string) bool {
	if rest, ok := bytes.CutPrefix(line, []byte("# ")); ok {
		if r, ok := bytes.CutPrefix(rest, []byte("HELP ")); ok {
			rest = r
		} else if r, ok := bytes.CutPrefix(rest, []byte("TYPE ")); ok {
			rest = r
		} else {
			return false
		}
		name, _, _ := bytes.Cut(rest, []byte(" "))
		return string(name) == series
	}
	if len(line) <= len(series) || string(line[:len(series)]) != series {
		return false
	}
	c := line[len(series)]
	return c == '{' || c == ' '
}
