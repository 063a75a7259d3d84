package activator

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the activator's collectors. A nil *Metrics records nothing, so the Holder and the
// Handler need no registry in tests.
type Metrics struct {
	held      *prometheus.GaugeVec
	refusedBy *prometheus.CounterVec
	deniedBy  *prometheus.CounterVec
	wakes     prometheus.Counter
	coldStart prometheus.Histogram
	writes    *prometheus.CounterVec
	responses *prometheus.CounterVec
}

// NewMetrics registers the activator's collectors on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "activator_held_requests", Help: "Requests held per model, waiting for a ready endpoint.",
		}, []string{"namespace", "name"}),
		refusedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "activator_refused_total", Help: "Requests answered 503 with Retry-After, by reason: queue_full (the model held its bound of requests), wait_timeout (no ready endpoint within the wait bound), held_total and held_namespace (the requests held in all, or for the namespace, at their bound), buffer_total and buffer_namespace (the request bodies read ahead, in all or for the namespace, at their bound).",
		}, []string{"reason"}),
		deniedBy: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "activator_denied_total", Help: "Requests refused before anything was held or read, by reason: unknown_model (404: no model, or not one the activator serves), path (404: not an inference path), source (403: the model header or path form from a caller not allowed it).",
		}, []string{"reason"}),
		wakes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "activator_wakes_total", Help: "Scale-ups asked for: one per cold start of a model.",
		}),
		// Buckets from a warm node's restart (seconds) to a GPU node's provisioning (minutes).
		coldStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "activator_cold_start_seconds", Help: "From a request's arrival at a model with no ready endpoint to its first response byte.",
			Buckets: []float64{1, 2.5, 5, 10, 20, 30, 45, 60, 90, 120, 180, 300, 600},
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "activator_annotation_writes_total", Help: "Patches of a model Service's last-request and last-cold-start annotations, by result: ok, not_found (dropped), error (retried with backoff, then dropped).",
		}, []string{"result"}),
		// Every answer of the proxy, its own refusals and the model servers' alike, for the
		// share of 5xx an alert watches (the 502s of a model server that did not answer
		// have no counter of their own).
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "activator_responses_total", Help: "Responses of the activator's proxy, by HTTP status code: its own refusals (403, 404, 503), 502 for a model server that did not answer, and what the model servers answered.",
		}, []string{"code"}),
	}
	// Every reason exported from the start, so a rate() sees the first refusal.
	for _, r := range Reasons {
		m.refusedBy.WithLabelValues(string(r))
	}
	for _, d := range []Denial{DenyNoModel, DenyPath, DenySource} {
		m.deniedBy.WithLabelValues(string(d))
	}
	for _, r := range []string{WriteOK, WriteNotFound, WriteError} {
		m.writes.WithLabelValues(r)
	}
	reg.MustRegister(m.held, m.refusedBy, m.deniedBy, m.wakes, m.coldStart, m.writes, m.responses)
	return m
}

func (m *Metrics) setHeld(k Key, n int) {
	if m != nil {
		m.held.WithLabelValues(k.Namespace, k.Name).Set(float64(n))
	}
}

// forget drops a model's series when the Holder drops its entry, so gone models leave none.
func (m *Metrics) forget(k Key) {
	if m != nil {
		m.held.DeleteLabelValues(k.Namespace, k.Name)
	}
}

func (m *Metrics) refused(r Reason) {
	if m != nil {
		m.refusedBy.WithLabelValues(string(r)).Inc()
	}
}

func (m *Metrics) denied(d Denial) {
	if m != nil {
		m.deniedBy.WithLabelValues(string(d)).Inc()
	}
}

func (m *Metrics) woke() {
	if m != nil {
		m.wakes.Inc()
	}
}

func (m *Metrics) coldStarted(d time.Duration) {
	if m != nil {
		m.coldStart.Observe(d.Seconds())
	}
}

func (m *Metrics) wrote(result string) {
	if m != nil {
		m.writes.WithLabelValues(result).Inc()
	}
}

// Instrument counts h's responses by status code (activator_responses_total); a nil *Metrics
// returns h.
func (m *Metrics) Instrument(h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	return promhttp.InstrumentHandlerCounter(m.responses, h)
}
