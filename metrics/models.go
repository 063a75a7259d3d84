package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// models exports each InferenceService's series from its last Snapshot, built at scrape time:
// one small struct per model at rest instead of seven client-side series (about 3.5 KB each
// model as GaugeVecs), and a deleted model's series go with its entry.
type models struct {
	mu   sync.Mutex
	byNS map[[2]string]Snapshot

	desired, ready, gpus, info, autoscaling *prometheus.Desc
}

// gpuStates are the values of inferenceservice_gpus' state label.
var gpuStates = [...]string{"requested", "allocated", "ready", "pending", "pending_admission", "admitted"}

func newModels() *models {
	return &models{
		byNS:    map[[2]string]Snapshot{},
		desired: prometheus.NewDesc("inferenceservice_replicas_desired", "spec.replicas of each InferenceService.", []string{"namespace", "name"}, nil),
		ready:   prometheus.NewDesc("inferenceservice_replicas_ready", "Ready model server pods of each InferenceService.", []string{"namespace", "name"}, nil),
		gpus: prometheus.NewDesc("inferenceservice_gpus", "GPUs of each InferenceService by state: requested (replicas x gpusPerReplica), allocated (pods bound to nodes), ready (ready pods), pending (requested but not allocated: unschedulable or refused by quota), pending_admission (pods held by an admission queue's scheduling gates, e.g. Kueue's: a part of pending), admitted (pods past the queue, scheduled or not).",
			[]string{"namespace", "name", "state"}, nil),
		info: prometheus.NewDesc("inferenceservice_info", "1 for each InferenceService, with its model and phase.", []string{"namespace", "name", "model", "phase"}, nil),
		autoscaling: prometheus.NewDesc("inferenceservice_autoscaling_active", "1 for each InferenceService with an AutoscalingActive condition, with its status (True: the HPA reads num_requests_waiting; False: it cannot, or is held at its maximum above target; Unknown) and reason.",
			[]string{"namespace", "name", "status", "reason"}, nil),
	}
}

func (m *models) observe(s Snapshot) {
	m.mu.Lock()
	m.byNS[[2]string{s.Namespace, s.Name}] = s
	m.mu.Unlock()
}

func (m *models) forget(namespace, name string) {
	m.mu.Lock()
	delete(m.byNS, [2]string{namespace, name})
	m.mu.Unlock()
}

func (m *models) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.desired
	ch <- m.ready
	ch <- m.gpus
	ch <- m.info
	ch <- m.autoscaling
}

func (m *models) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	snaps := make([]Snapshot, 0, len(m.byNS))
	for _, s := range m.byNS {
		snaps = append(snaps, s)
	}
	m.mu.Unlock() // send without the lock: reconciles must not wait on a slow scrape
	for _, s := range snaps {
		ch <- prometheus.MustNewConstMetric(m.desired, prometheus.GaugeValue, float64(s.DesiredReplicas), s.Namespace, s.Name)
		ch <- prometheus.MustNewConstMetric(m.ready, prometheus.GaugeValue, float64(s.ReadyReplicas), s.Namespace, s.Name)
		for i, v := range [...]int64{s.GPUsRequested, s.GPUsAllocated, s.GPUsReady, s.GPUsPending, s.GPUsPendingAdmission, s.GPUsAdmitted} {
			ch <- prometheus.MustNewConstMetric(m.gpus, prometheus.GaugeValue, float64(v), s.Namespace, s.Name, gpuStates[i])
		}
		ch <- prometheus.MustNewConstMetric(m.info, prometheus.GaugeValue, 1, s.Namespace, s.Name, s.Model, s.Phase)
		if s.AutoscalingStatus != "" {
			ch <- prometheus.MustNewConstMetric(m.autoscaling, prometheus.GaugeValue, 1, s.Namespace, s.Name, s.AutoscalingStatus, s.AutoscalingReason)
		}
	}
}
