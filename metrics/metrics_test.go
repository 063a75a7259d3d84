package metrics

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type quotaList []*corev1.ResourceQuota

func (l quotaList) ResourceQuotas() []*corev1.ResourceQuota { return l }

func quota(ns, name string, spec, hard, used map[string]string) *corev1.ResourceQuota {
	list := func(m map[string]string) corev1.ResourceList {
		if m == nil {
			return nil
		}
		out := corev1.ResourceList{}
		for k, v := range m {
			out[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ResourceQuotaSpec{Hard: list(spec)},
		Status:     corev1.ResourceQuotaStatus{Hard: list(hard), Used: list(used)},
	}
}

func snapshot(model, phase string, desired, ready int32, req, alloc, rdy, pend int64) Snapshot {
	return Snapshot{Namespace: "ns", Name: "a", Model: model, Phase: phase, DesiredReplicas: desired, ReadyReplicas: ready,
		GPUsRequested: req, GPUsAllocated: alloc, GPUsReady: rdy, GPUsPending: pend,
		AutoscalingStatus: "True", AutoscalingReason: "ValidMetricFound"}
}

// TestInferenceServiceSeries: series appear on the first observation, follow changes (the info
// series is replaced, not duplicated, when the phase moves) and disappear on Forget.
func TestInferenceServiceSeries(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, "test")
	other := snapshot("m", "Ready", 1, 1, 1, 1, 1, 0)
	other.Name = "b"
	m.ObserveInferenceService(other)

	progressing := snapshot("m", "Progressing", 2, 0, 4, 2, 0, 2)
	progressing.AutoscalingStatus, progressing.AutoscalingReason = "Unknown", "AwaitingReadyPod"
	m.ObserveInferenceService(progressing)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP inferenceservice_autoscaling_active 1 for each InferenceService with an AutoscalingActive condition, with its status (True: the HPA reads its model's engine's queue, num_requests_waiting for vLLM, num_queue_reqs for SGLang; False: it cannot, or is held at its maximum above target; Unknown) and reason.
# TYPE inferenceservice_autoscaling_active gauge
inferenceservice_autoscaling_active{name="a",namespace="ns",reason="AwaitingReadyPod",status="Unknown"} 1
inferenceservice_autoscaling_active{name="b",namespace="ns",reason="ValidMetricFound",status="True"} 1
# HELP inferenceservice_info 1 for each InferenceService, with its model and phase.
# TYPE inferenceservice_info gauge
inferenceservice_info{model="m",name="a",namespace="ns",phase="Progressing"} 1
inferenceservice_info{model="m",name="b",namespace="ns",phase="Ready"} 1
# HELP inferenceservice_replicas_desired spec.replicas of each InferenceService.
# TYPE inferenceservice_replicas_desired gauge
inferenceservice_replicas_desired{name="a",namespace="ns"} 2
inferenceservice_replicas_desired{name="b",namespace="ns"} 1
`), "inferenceservice_info", "inferenceservice_replicas_desired", "inferenceservice_autoscaling_active"); err != nil {
		t.Fatal(err)
	}
	value := func(metric string, labels map[string]string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != metric {
				continue
			}
		next:
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
						continue next
					}
				}
				return m.GetGauge().GetValue()
			}
		}
		return -1
	}
	count := func(metric string) int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, metric)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	gpus := func(name, state string) float64 {
		return value("inferenceservice_gpus", map[string]string{"name": name, "state": state})
	}
	if r, a, p := gpus("a", "requested"), gpus("a", "allocated"), gpus("a", "pending"); r != 4 || a != 2 || p != 2 {
		t.Fatalf("gpus requested/allocated/pending = %v/%v/%v, want 4/2/2", r, a, p)
	}
	queued := snapshot("m", "Progressing", 2, 1, 4, 2, 2, 2)
	queued.GPUsPendingAdmission, queued.GPUsAdmitted = 2, 2
	m.ObserveInferenceService(queued)
	if q, a := gpus("a", "pending_admission"), gpus("a", "admitted"); q != 2 || a != 2 {
		t.Fatalf("gpus pending_admission/admitted = %v/%v, want 2/2", q, a)
	}

	m.ObserveInferenceService(snapshot("m", "Ready", 2, 2, 4, 4, 4, 0))
	if got := count("inferenceservice_info"); got != 2 {
		t.Fatalf("info series after a phase change = %d, want 2 (old phase removed)", got)
	}
	if v := value("inferenceservice_info", map[string]string{"name": "a", "phase": "Ready"}); v != 1 {
		t.Fatalf("info Ready = %v", v)
	}
	if r, p := value("inferenceservice_replicas_ready", map[string]string{"name": "a"}), gpus("a", "pending"); r != 2 || p != 0 {
		t.Fatalf("ready %v pending %v after the change", r, p)
	}

	m.ForgetInferenceService("ns", "a")
	for _, name := range []string{"inferenceservice_info", "inferenceservice_replicas_desired", "inferenceservice_replicas_ready"} {
		if got := count(name); got != 1 {
			t.Errorf("%s: %d series after Forget, want only b's", name, got)
		}
	}
	if got := count("inferenceservice_gpus"); got != len(gpuStates) {
		t.Errorf("gpus: %d series after Forget, want b's %d", got, len(gpuStates))
	}
	// Observing again after Forget brings the series back (a re-created namesake).
	m.ObserveInferenceService(snapshot("m2", "Progressing", 1, 0, 1, 0, 0, 1))
	if v := value("inferenceservice_info", map[string]string{"name": "a", "model": "m2", "phase": "Progressing"}); v != 1 || count("inferenceservice_info") != 2 {
		t.Fatalf("info after re-creation: %v, %d series", v, count("inferenceservice_info"))
	}
}

func TestReconcileAndAPIMetrics(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, "test")
	// Every result exists at 0 before the first reconcile, so rate() works from the start.
	if got := testutil.CollectAndCount(m.reconcileTotal); got != len(results) {
		t.Fatalf("reconcile_total series at start = %d", got)
	}
	m.ObserveReconcile("success", 3*time.Millisecond)
	m.ObserveReconcile("error", time.Second)
	m.ObserveReconcile("permanent_error", time.Second)
	m.ObserveReconcile("requeue", time.Millisecond)
	for r, want := range map[string]float64{"success": 1, "error": 1, "permanent_error": 1, "requeue": 1} {
		if v := testutil.ToFloat64(m.reconcileTotal.WithLabelValues(ControllerName, r)); v != want {
			t.Errorf("reconcile_total{result=%s} = %v", r, v)
		}
	}
	if v := testutil.ToFloat64(m.reconcileErrors.WithLabelValues(ControllerName)); v != 2 {
		t.Errorf("reconcile_errors_total = %v, want 2", v)
	}
	m.APIError("")
	m.APIError("Conflict")
	m.ConflictRetry("deployments")
	if v := testutil.ToFloat64(m.apiErrors.WithLabelValues("Unknown")); v != 1 {
		t.Errorf("api_errors_total{reason=Unknown} = %v", v)
	}
	if v := testutil.ToFloat64(m.conflictRetries.WithLabelValues("deployments")); v != 1 {
		t.Errorf("conflict_retries_total = %v", v)
	}
	m.SetLeader("lease", true)
	if v := testutil.ToFloat64(m.leader.WithLabelValues("lease")); v != 1 {
		t.Errorf("leader = %v", v)
	}
	m.SetLeader("lease", false)
	if v := testutil.ToFloat64(m.leader.WithLabelValues("lease")); v != 0 {
		t.Errorf("leader after losing = %v", v)
	}
}

func TestQuotaSamples(t *testing.T) {
	for _, tc := range []struct {
		name   string
		quotas []*corev1.ResourceQuota
		want   []QuotaSample
	}{
		{name: "none"},
		{
			name:   "no GPU resource",
			quotas: []*corev1.ResourceQuota{quota("a", "q", map[string]string{"pods": "10"}, map[string]string{"pods": "10"}, map[string]string{"pods": "3"})},
		},
		{
			name: "requests form, status filled",
			quotas: []*corev1.ResourceQuota{quota("a", "gpu", map[string]string{"requests.nvidia.com/gpu": "8", "cpu": "4"},
				map[string]string{"requests.nvidia.com/gpu": "8", "cpu": "4"}, map[string]string{"requests.nvidia.com/gpu": "6", "cpu": "1"})},
			want: []QuotaSample{{"a", "gpu", "requests.nvidia.com/gpu", "hard", 8}, {"a", "gpu", "requests.nvidia.com/gpu", "used", 6}},
		},
		{
			name:   "new quota, status not yet filled: hard from spec, no used",
			quotas: []*corev1.ResourceQuota{quota("a", "gpu", map[string]string{"limits.nvidia.com/gpu": "4"}, nil, nil)},
			want:   []QuotaSample{{"a", "gpu", "limits.nvidia.com/gpu", "hard", 4}},
		},
		{
			name: "status wins over an edited spec until the quota controller catches up",
			quotas: []*corev1.ResourceQuota{quota("a", "gpu", map[string]string{"nvidia.com/gpu": "16"},
				map[string]string{"nvidia.com/gpu": "8"}, map[string]string{"nvidia.com/gpu": "0"})},
			want: []QuotaSample{{"a", "gpu", "nvidia.com/gpu", "hard", 8}, {"a", "gpu", "nvidia.com/gpu", "used", 0}},
		},
		{
			name: "several quotas and namespaces, sorted",
			quotas: []*corev1.ResourceQuota{
				quota("b", "z", nil, map[string]string{"requests.nvidia.com/gpu": "2"}, map[string]string{"requests.nvidia.com/gpu": "1"}),
				quota("a", "y", nil, map[string]string{"limits.nvidia.com/gpu": "3", "requests.nvidia.com/gpu": "3"},
					map[string]string{"limits.nvidia.com/gpu": "2", "requests.nvidia.com/gpu": "2"}),
			},
			want: []QuotaSample{
				{"a", "y", "limits.nvidia.com/gpu", "hard", 3}, {"a", "y", "limits.nvidia.com/gpu", "used", 2},
				{"a", "y", "requests.nvidia.com/gpu", "hard", 3}, {"a", "y", "requests.nvidia.com/gpu", "used", 2},
				{"b", "z", "requests.nvidia.com/gpu", "hard", 2}, {"b", "z", "requests.nvidia.com/gpu", "used", 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := QuotaSamples(tc.quotas)
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("sample %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestQuotaCollector(t *testing.T) {
	l := quotaList{quota("team", "gpus", nil, map[string]string{"requests.nvidia.com/gpu": "8"}, map[string]string{"requests.nvidia.com/gpu": "8"})}
	c := NewQuotaCollector(l)
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP inferenceservice_gpu_quota_hard GPU limit of a ResourceQuota (status.hard), by resource: requests.nvidia.com/gpu, limits.nvidia.com/gpu or nvidia.com/gpu.
# TYPE inferenceservice_gpu_quota_hard gauge
inferenceservice_gpu_quota_hard{namespace="team",resource="requests.nvidia.com/gpu",resourcequota="gpus"} 8
# HELP inferenceservice_gpu_quota_used GPUs counted against a ResourceQuota (status.used) by the API server's quota controller, by resource.
# TYPE inferenceservice_gpu_quota_used gauge
inferenceservice_gpu_quota_used{namespace="team",resource="requests.nvidia.com/gpu",resourcequota="gpus"} 8
`)); err != nil {
		t.Fatal(err)
	}
	// Read at scrape time: a deleted quota's series are gone at the next scrape.
	if n := testutil.CollectAndCount(NewQuotaCollector(quotaList{})); n != 0 {
		t.Fatalf("%d series without quotas", n)
	}
}

// fullRegistry registers every collector the operator serves and touches each vector once,
// so every family is present for linting.
func fullRegistry(t *testing.T) (*prometheus.Registry, *Metrics) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := New(reg, "test")
	reg.MustRegister(NewQuotaCollector(quotaList{quota("team", "gpus", nil,
		map[string]string{"requests.nvidia.com/gpu": "8"}, map[string]string{"requests.nvidia.com/gpu": "8"})}))
	m.ObserveReconcile("success", time.Millisecond)
	m.ConflictRetry("deployments")
	m.APIError("Conflict")
	m.ObserveInferenceService(snapshot("m", "Ready", 1, 1, 1, 1, 1, 0))
	m.SetLeader("lease", true)
	m.SetConversionUp(true) // exported only where the conversion probe runs
	m.SetMaxConcurrentReconciles(4)
	m.StartPhase("weights download", 840)
	opts := m.ClientGoOpts()
	u := url.URL{Scheme: "https", Host: "127.0.0.1:6443", Path: "/api"}
	opts.RequestLatency.Observe(context.Background(), "GET", u, time.Millisecond)
	opts.RateLimiterLatency.Observe(context.Background(), "GET", u, time.Millisecond)
	opts.RequestResult.Increment(context.Background(), "200", "GET", u.Host)
	opts.RequestRetry.IncrementRetry(context.Background(), "500", "GET", u.Host)
	q := m.Workqueue
	q.NewDepthMetric("inferenceservice").Inc()
	q.NewAddsMetric("inferenceservice").Inc()
	q.NewLatencyMetric("inferenceservice").Observe(0.001)
	q.NewWorkDurationMetric("inferenceservice").Observe(0.001)
	q.NewUnfinishedWorkSecondsMetric("inferenceservice").Set(0)
	q.NewLongestRunningProcessorSecondsMetric("inferenceservice").Set(0)
	q.NewRetriesMetric("inferenceservice").Inc()
	return reg, m
}

func TestPromlintClean(t *testing.T) {
	reg, _ := fullRegistry(t)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	t.Logf("promlint: %d families, %d problems", len(mfs), len(problems))
}
