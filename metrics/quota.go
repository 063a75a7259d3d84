package metrics

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// GPUQuotaResources are the ResourceQuota resources that cap GPUs: the requests and limits
// forms, and the bare extended resource (which quota treats as requests).
var GPUQuotaResources = []corev1.ResourceName{"requests.nvidia.com/gpu", "limits.nvidia.com/gpu", "nvidia.com/gpu"}

// QuotaLister lists the cached ResourceQuotas of every watched namespace; informers.Set
// implements it. The returned objects belong to the cache and must not be modified.
type QuotaLister interface {
	ResourceQuotas() []*corev1.ResourceQuota
}

// QuotaCollector exports the GPU figures of ResourceQuotas at scrape time, from a cache, so a
// quota deleted or edited is reflected without bookkeeping.
type QuotaCollector struct {
	quotas     QuotaLister
	hard, used *prometheus.Desc
}

// NewQuotaCollector returns a collector reading from quotas; register it next to New's.
func NewQuotaCollector(quotas QuotaLister) *QuotaCollector {
	labels := []string{"namespace", "resourcequota", "resource"}
	return &QuotaCollector{
		quotas: quotas,
		hard: prometheus.NewDesc("inferenceservice_gpu_quota_hard",
			"GPU limit of a ResourceQuota (status.hard), by resource: requests.nvidia.com/gpu, limits.nvidia.com/gpu or nvidia.com/gpu.", labels, nil),
		used: prometheus.NewDesc("inferenceservice_gpu_quota_used",
			"GPUs counted against a ResourceQuota (status.used) by the API server's quota controller, by resource.", labels, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QuotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hard
	ch <- c.used
}

// Collect implements prometheus.Collector.
func (c *QuotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range QuotaSamples(c.quotas.ResourceQuotas()) {
		desc := c.hard
		if s.Kind == "used" {
			desc = c.used
		}
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, s.Value, s.Namespace, s.ResourceQuota, s.Resource)
	}
}

// QuotaSample is one figure of one ResourceQuota.
type QuotaSample struct {
	Namespace, ResourceQuota, Resource string
	Kind                               string // "hard" or "used"
	Value                              float64
}

// QuotaSamples extracts the GPU figures of quotas, sorted. The spec's hard is taken when the
// quota controller has not filled status yet, so a new quota shows its limit at once; used is
// only exported once the quota controller reported it.
func QuotaSamples(quotas []*corev1.ResourceQuota) []QuotaSample {
	var out []QuotaSample
	for _, q := range quotas {
		for _, r := range GPUQuotaResources {
			hard, ok := q.Status.Hard[r]
			if !ok {
				hard, ok = q.Spec.Hard[r]
			}
			if !ok {
				continue
			}
			out = append(out, QuotaSample{q.Namespace, q.Name, string(r), "hard", hard.AsApproximateFloat64()})
			if used, ok := q.Status.Used[r]; ok {
				out = append(out, QuotaSample{q.Namespace, q.Name, string(r), "used", used.AsApproximateFloat64()})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.ResourceQuota != b.ResourceQuota {
			return a.ResourceQuota < b.ResourceQuota
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		return a.Kind < b.Kind
	})
	return out
}
