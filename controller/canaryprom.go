// A canary step's metrics window from Prometheus (the operator's --rollout-prometheus-url)
// instead of the pods' own /metrics: at each read, instant queries at now over the step so
// far, for the stable's and the canary's pods, of the same series the pods' reads count
// (canarypage.go). The series are selected as the model's ServiceMonitor labels them
// (controller/reconcile/servicemonitor.go): namespace, and the model's InstanceLabel as
// podTargetLabels writes it (reconcile.InstanceSeriesLabel): the stable's pods carry the
// model's name, the canary's reconcile.CanaryInstance(name), so no pod name is needed.

package controller

import (
	"context"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/example/inferenceservice-operator/controller/reconcile"
	"github.com/example/inferenceservice-operator/controller/rollout"
)

// PromQuerier is the part of Prometheus' HTTP API a canary step reads: instant queries
// (/api/v1/query); promv1.API implements it.
type PromQuerier interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...promv1.Option) (model.Value, promv1.Warnings, promv1.Infos, error)
}

// NewRolloutPrometheus is the querier of the Prometheus at address (--rollout-prometheus-url:
// an http or https URL); nil when address is "".
func NewRolloutPrometheus(address string) (PromQuerier, error) {
	if address == "" {
		return nil, nil
	}
	u, err := url.Parse(address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--rollout-prometheus-url must be the http(s) URL of a Prometheus (e.g. http://prometheus-operated.monitoring.svc:9090); got %q", address)
	}
	c, err := promapi.NewClient(promapi.Config{Address: address})
	if err != nil {
		return nil, fmt.Errorf("--rollout-prometheus-url: %w", err)
	}
	return promv1.NewAPI(c), nil
}

// minPromRange is the shortest range a step's queries cover: two scrapes at the model's
// ServiceMonitor's 15s interval, so that increase() has two samples of every series.
const minPromRange = 30 * time.Second

// promRange is the range of the queries of a window from start to now: the step's elapsed
// time in whole seconds, at least minPromRange.
func promRange(start, now time.Time) time.Duration {
	return max(now.Sub(start).Round(time.Second), minPromRange)
}

// promSide is one side's queries: its requests, its errors (5xx) and its time-to-first-token
// histogram's buckets, each an increase over rng.
type promSide struct {
	requests, errors, ttft string
}

// canaryQueries are the queries of the pods whose series carry namespace ns and the model
// label instance (the model's name for the stable, reconcile.CanaryInstance for the canary);
// ttftSeries is the engine's histogram (engine.Metrics().TTFT).
func canaryQueries(ns, instance, ttftSeries string, rng time.Duration) promSide {
	sel := fmt.Sprintf("namespace=%s,%s=%s", strconv.Quote(ns), reconcile.InstanceSeriesLabel, strconv.Quote(instance))
	quoted := make([]string, len(countedHandlers))
	for i, h := range countedHandlers {
		quoted[i] = regexp.QuoteMeta(h)
	}
	handlers := "handler=~" + strconv.Quote(strings.Join(quoted, "|"))
	r := fmt.Sprintf("[%ds]", int64(rng/time.Second))
	return promSide{
		requests: fmt.Sprintf("sum(increase(%s{%s,%s}%s))", RequestsSeries, sel, handlers, r),
		errors:   fmt.Sprintf(`sum(increase(%s{%s,%s,status=~"5.."}%s))`, RequestsSeries, sel, handlers, r),
		ttft:     fmt.Sprintf("sum by (le) (increase(%s_bucket{%s}%s))", ttftSeries, sel, r),
	}
}

// promWindow reads the window of a step that started at start from Prometheus at now: the
// stable's pods are those of model name in ns, the canary's CanaryInstance(name). nil and the
// reason when a query fails or Prometheus has no series of a side (the step waits on it).
func promWindow(ctx context.Context, q PromQuerier, ns, name, ttftSeries string, start, now time.Time) (*rollout.Window, string) {
	rng := promRange(start, now)
	w := &rollout.Window{Start: start}
	for _, side := range []struct {
		what, instance string
		out            *rollout.Sample
	}{{"stable", name, &w.Stable}, {"canary", reconcile.CanaryInstance(name), &w.Canary}} {
		s, reason := promSample(ctx, q, canaryQueries(ns, side.instance, ttftSeries, rng), now)
		if reason != "" {
			return nil, fmt.Sprintf("Prometheus: the %s's pods (%s=%q): %s", side.what, reconcile.InstanceSeriesLabel, side.instance, reason)
		}
		*side.out = s
	}
	return w, ""
}

// promSample runs one side's queries at now. An empty answer to the requests or the
// histogram is a reason to wait (Prometheus does not scrape those pods, or not yet); an
// empty answer to the errors is none: the instrumentator makes a status's series at its
// first request.
func promSample(ctx context.Context, q PromQuerier, qs promSide, now time.Time) (rollout.Sample, string) {
	var s rollout.Sample
	req, reason := promVector(ctx, q, qs.requests, now)
	if reason != "" {
		return s, reason
	}
	if len(req) == 0 {
		return s, fmt.Sprintf("no %s series: %s", RequestsSeries, qs.requests)
	}
	errs, reason := promVector(ctx, q, qs.errors, now)
	if reason != "" {
		return s, reason
	}
	buckets, reason := promVector(ctx, q, qs.ttft, now)
	if reason != "" {
		return s, reason
	}
	if len(buckets) == 0 {
		return s, fmt.Sprintf("no time-to-first-token buckets: %s", qs.ttft)
	}
	s.Requests, s.Errors = sumOf(req), sumOf(errs)
	s.TTFT = map[float64]float64{}
	for _, b := range buckets {
		le, err := strconv.ParseFloat(string(b.Metric[model.BucketLabel]), 64)
		if err != nil {
			return rollout.Sample{}, fmt.Sprintf("a bucket with le %q: %s", b.Metric[model.BucketLabel], qs.ttft)
		}
		if v := float64(b.Value); !math.IsNaN(v) {
			s.TTFT[le] = v
		}
	}
	if _, ok := s.TTFT[math.Inf(1)]; !ok {
		return rollout.Sample{}, fmt.Sprintf("no +Inf bucket: %s", qs.ttft)
	}
	return s, ""
}

// promVector runs an instant query at now and returns its vector, or the reason it has none.
func promVector(ctx context.Context, q PromQuerier, query string, now time.Time) (model.Vector, string) {
	v, _, _, err := q.Query(ctx, query, now)
	if err != nil {
		return nil, fmt.Sprintf("query %s: %v", query, err)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Sprintf("query %s: a %s, not a vector", query, v.Type())
	}
	return vec, ""
}

func sumOf(v model.Vector) float64 {
	var n float64
	for _, s := range v {
		if x := float64(s.Value); !math.IsNaN(x) {
			n += x
		}
	}
	return n
}
