// The scraper's own series: the models' queues it serves and how its reads and rounds go.

package podmetrics

import "github.com/prometheus/client_golang/prometheus"

// collectors are the series a Scraper registers with the Registerer New is given.
type collectors struct {
	queue       *prometheus.GaugeVec
	scrapes     *prometheus.CounterVec
	targets     prometheus.Gauge
	unowned     prometheus.Gauge
	passes      prometheus.Counter
	passSeconds prometheus.Histogram
}

func newCollectors() collectors {
	const ns, sub = "inferenceservice", "metrics_adapter"
	return collectors{
		queue: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "queue_waiting",
			Help: "Requests waiting for a slot, summed over a model's ready pods, as last read from their /metrics (what the HPA divides by the pod count)."},
			[]string{"namespace", "inferenceservice"}),
		scrapes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrapes_total",
			Help: "Reads of a model pod's /metrics, by result (ok, error: refused, timed out, not 200, or no engine's queue: vllm:num_requests_waiting, sglang:num_queue_reqs)."},
			[]string{"result"}),
		targets: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "scrape_targets",
			Help: "Ready model pods that an InferenceService's children control, read each period."}),
		unowned: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "unowned_pods",
			Help: "Ready pods carrying the operator's labels that no InferenceService's children control: never read."}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "scrape_passes_total",
			Help: "Rounds in which every model pod had an attempt end; its rate is the scrape period achieved (pods that do not answer are retried less often and lengthen it)."}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "scrape_pass_duration_seconds",
			Help:    "How long one round over every model pod took; each pod's reading is served as soon as it is read.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}),
	}
}

func (c collectors) register(reg prometheus.Registerer) error {
	for _, col := range []prometheus.Collector{c.queue, c.scrapes, c.targets, c.unowned, c.passes, c.passSeconds} {
		if err := reg.Register(col); err != nil {
			return err
		}
	}
	return nil
}
