package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
		autoscaling: prometheus.NewDesc("inferenceservice_autoscaling_active", "1 for each InferenceService with an AutoscalingActive condition, with its status (True: the HPA reads its model's engine's queue, num_requests_waiting for vLLM, num_queue_reqs for SGLang; False: it cannot, or is held at its maximum above target; Unknown) and reason.",
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
	// The label pairs a scrape repeats (the states, the models, the phases, the reasons) are
	// built once; the namespace and name once per model.
	pairs := map[[2]string]*dto.LabelPair{}
	pair := func(name, value string) *dto.LabelPair {
		k := [2]string{name, value}
		if p, ok := pairs[k]; ok {
			return p
		}
		p := &dto.LabelPair{Name: &k[0], Value: &k[1]}
		pairs[k] = p
		return p
	}
	nameLabel, nsLabel := "name", "namespace"
	var states [len(gpuStates)]*dto.LabelPair
	for i, st := range gpuStates {
		states[i] = pair("state", st)
	}
	for i := range snaps {
		s := &snaps[i]
		name := &dto.LabelPair{Name: &nameLabel, Value: &s.Name}
		ns := &dto.LabelPair{Name: &nsLabel, Value: &s.Namespace}
		// Each series' labels in name order, as the registry wants them: one array for all.
		l := make([]*dto.LabelPair, 0, 2+3*len(gpuStates)+4+4)
		l = append(l, name, ns)
		base := l[0:2:2]
		series := make([]modelSeries, 0, 2+len(gpuStates)+2) // replicas, GPUs, info, autoscaling
		series = append(series, modelSeries{m.desired, base, float64(s.DesiredReplicas)}, modelSeries{m.ready, base, float64(s.ReadyReplicas)})
		for k, v := range [...]int64{s.GPUsRequested, s.GPUsAllocated, s.GPUsReady, s.GPUsPending, s.GPUsPendingAdmission, s.GPUsAdmitted} {
			n := len(l)
			l = append(l, name, ns, states[k])
			series = append(series, modelSeries{m.gpus, l[n:len(l):len(l)], float64(v)})
		}
		n := len(l)
		l = append(l, pair("model", s.Model), name, ns, pair("phase", s.Phase))
		series = append(series, modelSeries{m.info, l[n:len(l):len(l)], 1})
		if s.AutoscalingStatus != "" {
			n = len(l)
			l = append(l, name, ns, pair("reason", s.AutoscalingReason), pair("status", s.AutoscalingStatus))
			series = append(series, modelSeries{m.autoscaling, l[n:len(l):len(l)], 1})
		}
		for j := range series {
			ch <- &series[j]
		}
	}
}

// modelSeries is one gauge of a model, its label pairs shared with the model's other series
// and the scrape's other models: a scrape holds 2.3 KB a model while it lasts, not the 4.5 KB
// of const metrics with their own label pairs (TestScrapeBytesPerModel), 45 MB at 10,000.
type modelSeries struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  float64
}

func (s *modelSeries) Desc() *prometheus.Desc { return s.desc }

func (s *modelSeries) Write(out *dto.Metric) error {
	out.Label, out.Gauge = s.labels, &dto.Gauge{Value: &s.value}
	return nil
}
