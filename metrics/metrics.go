// Package metrics is beside the pipeline, told what each step observes: it exports the
// operator's Prometheus metrics onto a Registerer it is given (reconcile outcomes and latency,
// workqueue health, client-go's REST traffic, leader election, and what no other inference
// operator exports, the GPUs each model holds, wants and waits for).
package metrics

import (
	"context"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// ControllerName is the value of the controller label, as controller-runtime dashboards expect.
const ControllerName = "inferenceservice"

// Snapshot is one InferenceService's figures.
type Snapshot struct {
	Namespace, Name, Model, Phase  string
	DesiredReplicas, ReadyReplicas int32
	// GPUs requested (replicas the Deployment wants x gpusPerReplica), allocated (pods bound to
	// nodes), ready (ready pods) and pending (requested but not allocated: unschedulable or
	// refused by quota).
	GPUsRequested, GPUsAllocated, GPUsReady, GPUsPending int64
	// GPUs of pods an admission queue holds (scheduling gates: Kueue's), a part of pending, and
	// of pods past it (created without gates: admitted, scheduled or not).
	GPUsPendingAdmission, GPUsAdmitted int64
	// AutoscalingStatus and AutoscalingReason are the AutoscalingActive condition's; empty
	// when the model has none (no HPA at 0 replicas).
	AutoscalingStatus, AutoscalingReason string
}

// Reconcile results, the values of the result label (queue.Results): requeue and
// requeue_after are successes that asked for a recheck, as in controller-runtime.
var results = []string{"success", "requeue", "requeue_after", "error", "permanent_error"}

// Metrics holds every collector; the controller and the queue report to it.
type Metrics struct {
	reconcileTotal  *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	conflictRetries *prometheus.CounterVec
	apiErrors       *prometheus.CounterVec
	routesAbandoned prometheus.Counter
	fencedWrites    prometheus.Counter
	requestLatency  *prometheus.HistogramVec
	requestResult   *prometheus.CounterVec
	rateLimiter     *prometheus.HistogramVec
	requestRetries  *prometheus.CounterVec
	maxReconciles   *prometheus.GaugeVec
	models          *models
	leader          *prometheus.GaugeVec
	// conversion has no labels; a vector so that it is exported only once set: a replica that
	// never probes (no webhook, or a standby) has no conversion health to report, and a 0 would page.
	conversion *prometheus.GaugeVec
	// modelServer counts calls to model pods' vLLM API (LoRA adapters), by call and result.
	modelServer *prometheus.CounterVec
	// podLogReads counts reads of crashed containers' logs (pods/log), by result.
	podLogReads *prometheus.CounterVec
	// podEventReads counts reads of the Events of pods still being created, by result.
	podEventReads *prometheus.CounterVec
	// eventsDropped counts the operator's own Events not written, by why.
	eventsDropped *prometheus.CounterVec
	Workqueue     *WorkqueueProvider

	// startPhases are the phases of model pods' starts, by phase: where a slow start's minutes went.
	startPhases *prometheus.HistogramVec
}

// New registers the operator's collectors on reg.
func New(reg prometheus.Registerer, version string) *Metrics {
	m := &Metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total", Help: "Reconciles by result: success, requeue, requeue_after, error, permanent_error.",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_errors_total", Help: "Reconciles that returned an error.",
		}, []string{"controller"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "controller_runtime_reconcile_time_seconds", Help: "Time per reconcile, including API calls.",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"controller"}),
		conflictRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_conflict_retries_total", Help: "Writes retried after a resourceVersion conflict, by resource.",
		}, []string{"resource"}),
		apiErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_api_errors_total", Help: "Failed writes to children, by API status reason.",
		}, []string{"reason"}),
		routesAbandoned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferenceservice_operator_gateway_routes_abandoned_total", Help: "Finalizers released without a successful deregistration (namespace terminating, or --gateway-deregister-timeout passed): routes possibly left on the gateway.",
		}),
		fencedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "inferenceservice_operator_fenced_writes_total", Help: "Mutating API requests refused because the leader Lease was last renewed longer ago than the renew deadline.",
		}),
		requestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_request_duration_seconds", Help: "API request latency by verb and host.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
		}, []string{"verb", "host"}),
		requestResult: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "API requests by status code, method and host.",
		}, []string{"code", "method", "host"}),
		rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "rest_client_rate_limiter_duration_seconds", Help: "Time API requests waited on the client-side rate limiter (--kube-api-qps, --kube-api-burst), by verb and host.",
			Buckets: []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60},
		}, []string{"verb", "host"}),
		requestRetries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total", Help: "API requests client-go retried, by status code, method and host.",
		}, []string{"code", "method", "host"}),
		maxReconciles: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_max_concurrent_reconciles", Help: "Reconcile workers (--workers).",
		}, []string{"controller"}),
		models: newModels(),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status", Help: "1 while this replica holds the lease.",
		}, []string{"name"}),
		conversion: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inferenceservice_conversion_webhook_up", Help: "1 while the leader's probe reads InferenceServices through the API server in the version it does not store, so conversions work; 0 while they fail. Exported only by a leader running the conversion webhook (--webhook-bind-address), from its first probe.",
		}, nil),
		modelServer: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_model_server_requests_total", Help: "Calls to model pods' vLLM API for LoRA adapters, by call (models, load, unload) and result (ok, error). Only models with adapters are called.",
		}, []string{"call", "result"}),
		podLogReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_pod_log_reads_total", Help: "Reads of model servers' logs (pods/log), by result (ok, forbidden, error): a crashed run's tail for the decisive line its status quotes (at most two per crashed run of the pod a status names), and a serving run's head for its start's phases (one per run). None at rest.",
		}, []string{"result"}),
		podEventReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_pod_event_reads_total", Help: "Reads of the Events of a model pod still being created long after it was scheduled (a pull in progress, a volume that will not mount), by result (ok, forbidden, error). At most three pods a model, each once per --creating-evidence-after; none at rest.",
		}, []string{"result"}),
		eventsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "inferenceservice_operator_events_dropped_total", Help: "Events the operator made and did not write, by reason: queue-full (more than 1,000 waiting for the API server), namespace-share (250 of its namespace's already waiting), rejected (refused, e.g. invalid or forbidden), retries (12 tries failed on the way). Normal Events shed while the request budget is contended are not counted.",
		}, []string{"reason"}),
	}
	// Buckets from a second to about an hour (the default startup budget): a download or a
	// compile takes minutes, a process start seconds.
	m.startPhases = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "inferenceservice_start_phase_seconds", Help: "Seconds each phase of a model pod's start took (scheduled, image pulled, container started, then the model server's from its own log: process start, weights download, weights load, model load, torch.compile, CUDA graph capture, engine init, API server start), by phase. One sample per phase of each start the operator sees end.",
		Buckets: []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 2700, 3600},
	}, []string{"phase"})
	reg.MustRegister(m.startPhases)
	m.Workqueue = newWorkqueueProvider(reg)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "inferenceservice_operator_build_info", Help: "1, labelled with the operator's version.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	reg.MustRegister(m.reconcileTotal, m.reconcileErrors, m.reconcileTime, m.conflictRetries, m.apiErrors, m.routesAbandoned, m.fencedWrites,
		m.requestLatency, m.requestResult, m.rateLimiter, m.requestRetries, m.maxReconciles, m.models, m.leader, m.conversion, m.modelServer, m.podLogReads, m.podEventReads, m.eventsDropped, build)
	for _, r := range results {
		m.reconcileTotal.WithLabelValues(ControllerName, r)
	}
	m.reconcileErrors.WithLabelValues(ControllerName)
	for _, r := range []string{"ok", "forbidden", "error"} {
		m.podLogReads.WithLabelValues(r) // exported at 0: a rate over them needs a start
		m.podEventReads.WithLabelValues(r)
	}
	for _, r := range []string{"queue-full", "namespace-share", "rejected", "retries"} {
		m.eventsDropped.WithLabelValues(r)
	}
	return m
}

// PodLogRead counts one read of a crashed container's log by its result (ok, forbidden, error).
func (m *Metrics) PodLogRead(result string) { m.podLogReads.WithLabelValues(result).Inc() }

// EventDropped counts one of the operator's Events not written, by why (queue-full, namespace-share, rejected, retries).
func (m *Metrics) EventDropped(reason string) { m.eventsDropped.WithLabelValues(reason).Inc() }

// PodEventRead counts one read of a creating pod's Events by its result (ok, forbidden, error).
func (m *Metrics) PodEventRead(result string) { m.podEventReads.WithLabelValues(result).Inc() }

// StartPhase counts one phase of a model pod's start.
func (m *Metrics) StartPhase(phase string, seconds float64) {
	m.startPhases.WithLabelValues(phase).Observe(seconds)
}

// ObserveReconcile records one reconcile's result and duration.
func (m *Metrics) ObserveReconcile(result string, d time.Duration) {
	m.reconcileTotal.WithLabelValues(ControllerName, result).Inc()
	if result == "error" || result == "permanent_error" {
		m.reconcileErrors.WithLabelValues(ControllerName).Inc()
	}
	m.reconcileTime.WithLabelValues(ControllerName).Observe(d.Seconds())
}

// SetMaxConcurrentReconciles records the number of reconcile workers.
func (m *Metrics) SetMaxConcurrentReconciles(n int) {
	m.maxReconciles.WithLabelValues(ControllerName).Set(float64(n))
}

// ConflictRetry counts a write retried after a resourceVersion conflict.
func (m *Metrics) ConflictRetry(resource string) { m.conflictRetries.WithLabelValues(resource).Inc() }

// FencedWrite counts a write the leader's fence refused.
func (m *Metrics) FencedWrite() { m.fencedWrites.Inc() }

// RouteAbandoned counts a finalizer released while the gateway route may still be registered.
func (m *Metrics) RouteAbandoned() { m.routesAbandoned.Inc() }

// APIError counts a failed write by its API status reason.
func (m *Metrics) APIError(reason string) {
	if reason == "" {
		reason = "Unknown"
	}
	m.apiErrors.WithLabelValues(reason).Inc()
}

// ModelServerCall counts one call to a model pod's vLLM API; err nil is a success.
func (m *Metrics) ModelServerCall(call string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.modelServer.WithLabelValues(call, result).Inc()
}

// ObserveInferenceService records one InferenceService's figures, exported at the next scrape.
func (m *Metrics) ObserveInferenceService(s Snapshot) { m.models.observe(s) }

// ForgetInferenceService removes a deleted object's series.
func (m *Metrics) ForgetInferenceService(namespace, name string) { m.models.forget(namespace, name) }

// SetConversionUp records the conversion probe's outcome; the gauge is exported from the first.
func (m *Metrics) SetConversionUp(up bool) {
	v := 0.0
	if up {
		v = 1
	}
	m.conversion.WithLabelValues().Set(v)
}

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(name string, leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.WithLabelValues(name).Set(v)
}

// ClientGoOpts adapts client-go's REST client metrics onto these collectors; pass the result
// to k8s.io/client-go/tools/metrics.Register once per process.
func (m *Metrics) ClientGoOpts() clientmetrics.RegisterOpts {
	return clientmetrics.RegisterOpts{
		RequestLatency:     clientLatency{m.requestLatency},
		RequestResult:      clientResults{m.requestResult},
		RateLimiterLatency: clientLatency{m.rateLimiter},
		RequestRetry:       clientRetries{m.requestRetries},
	}
}

type clientLatency struct{ h *prometheus.HistogramVec }

func (a clientLatency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	a.h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type clientResults struct{ c *prometheus.CounterVec }

func (a clientResults) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

type clientRetries struct{ c *prometheus.CounterVec }

func (a clientRetries) IncrementRetry(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}
