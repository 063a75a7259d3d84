// Package custommetrics serves the queue podmetrics reads as the custom metrics API
// (custom.metrics.k8s.io) the HPA controller asks, through sigs.k8s.io/custom-metrics-apiserver,
// and registers that API with the aggregator without taking it over from anyone else.
package custommetrics

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/metrics/pkg/apis/custom_metrics"
	"sigs.k8s.io/custom-metrics-apiserver/pkg/provider"

	"github.com/example/inferenceservice-operator/controller/engine"
	"github.com/example/inferenceservice-operator/metrics/podmetrics"
)

// Metrics are the names the operator's HPAs ask for (a Pods metric, averaged per pod): each
// engine's queue name (num_requests_waiting for vLLM, num_queue_reqs for SGLang). A pod's
// reading is served under its own engine's name only, as its page showed it
// (podmetrics.ParseQueue): during a change of engine, when the HPA asks for the new name and
// the old engine's pods still serve, those pods are left out as unread ones are (the HPA
// counts them at target when it would scale down, empty when it would scale up) rather than
// mixed in under a name their server does not export.
//
// Each engine's KV-cache use is served too, under its engine's name (kv_cache_usage_perc for
// vLLM, token_usage for SGLang), as a fraction of 1, for the HPAs of spec.autoscaling.metric
// kvCache; it comes from the same read of the page as the queue.
//
// And each pod's p95 time to first token over a window, in milliseconds, as
// time_to_first_token_p95_milliseconds (engine.TTFTP95Name, one name for both engines: their
// histograms are the same measure), for spec.autoscaling.metric ttft: computed from the
// snapshots of the pod's histogram its reads kept (podmetrics.Scraper.TTFT), over the window
// the HPA's metric selector names (window_seconds=N, DefaultTTFTWindow when it names none).
func Metrics() []string {
	qs := podmetrics.Queues()
	names := make([]string, 0, 2*len(qs)+1)
	for _, q := range qs {
		names = append(names, q.Metric)
	}
	for _, q := range qs {
		if q.KVMetric != "" {
			names = append(names, q.KVMetric)
		}
	}
	for _, q := range qs {
		if q.TTFTSeries != "" {
			return append(names, engine.TTFTP95Name)
		}
	}
	return names
}

var podsResource = schema.GroupResource{Resource: "pods"}

// Readings is what the scraper last read of a pod.
type Readings interface {
	Reading(pod *corev1.Pod, now time.Time) (podmetrics.Reading, bool)
	// TTFT is the pod's p95 time to first token over window, in milliseconds, and when it
	// was read.
	TTFT(pod *corev1.Pod, now time.Time, window time.Duration) (ms float64, at time.Time, ok bool)
}

// Provider answers the HPA with the readings of the pods its selector picks; a pod without a
// fresh reading is left out, so the HPA treats it as it treats an unready pod.
type Provider struct {
	// Pods is the informer's cache of model pods, never the API server.
	Pods     corelisters.PodLister
	Readings Readings
	Now      func() time.Time
	// metrics are Metrics(), listed once.
	metrics []string
}

// NewProvider is a Provider serving every engine's queue and KV-cache names.
func NewProvider(pods corelisters.PodLister, readings Readings, now func() time.Time) *Provider {
	return &Provider{Pods: pods, Readings: readings, Now: now, metrics: Metrics()}
}

// serves reports whether info asks for a pod metric this provider serves.
func (p *Provider) serves(info provider.CustomMetricInfo) bool {
	return info.GroupResource == podsResource && slices.Contains(p.metrics, info.Metric)
}

var _ provider.CustomMetricsProvider = (*Provider)(nil)

// GetMetricByName is one pod's queue or KV-cache use.
func (p *Provider) GetMetricByName(_ context.Context, name types.NamespacedName, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValue, error) {
	if !p.serves(info) {
		return nil, provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	}
	window, err := windowOf(info, metricSelector)
	if err != nil {
		return nil, err
	}
	pod, err := p.Pods.Pods(name.Namespace).Get(name.Name)
	if err != nil {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	v, ok := p.value(pod, info.Metric, window, p.Now())
	if !ok {
		return nil, provider.NewMetricNotFoundForError(info.GroupResource, info.Metric, name.Name)
	}
	return &v, nil
}

// GetMetricBySelector is the queue or KV-cache use of every selected model pod that has a
// reading of it.
func (p *Provider) GetMetricBySelector(_ context.Context, namespace string, selector labels.Selector, info provider.CustomMetricInfo, metricSelector labels.Selector) (*custom_metrics.MetricValueList, error) {
	if !p.serves(info) {
		return nil, provider.NewMetricNotFoundError(info.GroupResource, info.Metric)
	}
	window, err := windowOf(info, metricSelector)
	if err != nil {
		return nil, err
	}
	pods, err := p.Pods.Pods(namespace).List(selector)
	if err != nil {
		return nil, err
	}
	now := p.Now()
	list := &custom_metrics.MetricValueList{Items: make([]custom_metrics.MetricValue, 0, len(pods))}
	for _, pod := range pods {
		if v, ok := p.value(pod, info.Metric, window, now); ok {
			list.Items = append(list.Items, v)
		}
	}
	return list, nil
}

// ListAllMetrics is every engine's queue and KV-cache name, for discovery.
func (p *Provider) ListAllMetrics() []provider.CustomMetricInfo {
	infos := make([]provider.CustomMetricInfo, len(p.metrics))
	for i, m := range p.metrics {
		infos[i] = provider.CustomMetricInfo{GroupResource: podsResource, Namespaced: true, Metric: m}
	}
	return infos
}

// value is pod's reading of metric: its TTFT p95 over window, or what value gives of its last
// reading.
func (p *Provider) value(pod *corev1.Pod, metric string, window time.Duration, now time.Time) (custom_metrics.MetricValue, bool) {
	if metric == engine.TTFTP95Name {
		ms, at, ok := p.Readings.TTFT(pod, now, window)
		if !ok {
			return custom_metrics.MetricValue{}, false
		}
		return metricValue(pod.Namespace, pod.Name, metric, at, ms), true
	}
	r, ok := p.Readings.Reading(pod, now)
	if !ok {
		return custom_metrics.MetricValue{}, false
	}
	return value(pod.Namespace, pod.Name, metric, r)
}

// windowOf is the window the HPA's metric selector names for the TTFT p95 (window_seconds=N,
// N within the API's bounds), DefaultTTFTWindow when it names none; a selector that names it
// otherwise is refused, rather than served over a window the HPA did not ask for.
func windowOf(info provider.CustomMetricInfo, metricSelector labels.Selector) (time.Duration, error) {
	if info.Metric != engine.TTFTP95Name || metricSelector == nil {
		return podmetrics.DefaultTTFTWindow, nil
	}
	reqs, _ := metricSelector.Requirements()
	for _, r := range reqs {
		if r.Key() != engine.TTFTWindowLabel {
			continue
		}
		vals := r.Values().UnsortedList()
		if (r.Operator() != selection.Equals && r.Operator() != selection.DoubleEquals && r.Operator() != selection.In) || len(vals) != 1 {
			return 0, apierrors.NewBadRequest(fmt.Sprintf("%s: the metric selector must name one %s", info.Metric, engine.TTFTWindowLabel))
		}
		n, err := strconv.Atoi(vals[0])
		if err != nil || time.Duration(n)*time.Second < podmetrics.MinTTFTWindow || time.Duration(n)*time.Second > podmetrics.MaxTTFTWindow {
			return 0, apierrors.NewBadRequest(fmt.Sprintf("%s: %s=%s is not a window of %v to %v in seconds", info.Metric, engine.TTFTWindowLabel, vals[0], podmetrics.MinTTFTWindow, podmetrics.MaxTTFTWindow))
		}
		return time.Duration(n) * time.Second, nil
	}
	return podmetrics.DefaultTTFTWindow, nil
}

// value is r's reading of metric: its queue, or its KV-cache use; ok is false when r's page
// showed no such metric (another engine's, or no KV gauge).
func value(namespace, name, metric string, r podmetrics.Reading) (custom_metrics.MetricValue, bool) {
	var v float64
	switch metric {
	case r.Metric:
		v = r.Waiting
	case r.KVMetric:
		if r.KVMetric == "" {
			return custom_metrics.MetricValue{}, false
		}
		v = r.KV
	default:
		return custom_metrics.MetricValue{}, false
	}
	return metricValue(namespace, name, metric, r.At, v), true
}

func metricValue(namespace, name, metric string, at time.Time, v float64) custom_metrics.MetricValue {
	return custom_metrics.MetricValue{
		DescribedObject: custom_metrics.ObjectReference{Kind: "Pod", APIVersion: "/v1", Namespace: namespace, Name: name},
		Metric:          custom_metrics.MetricIdentifier{Name: metric},
		Timestamp:       metav1.NewTime(at),
		// Milli-units: a queue is whole requests, KV use a fraction of 1 (700m is 70%), a
		// TTFT p95 milliseconds; the API's quantities allow fractions.
		Value: *resource.NewMilliQuantity(int64(math.Round(v*1000)), resource.DecimalSI),
	}
}
