package metrics

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// constModels is what models exported before its series shared their label pairs: one const
// metric per series, the reference the shared form must match.
type constModels struct{ *models }

func (m constModels) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.byNS {
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

func manyModels(n int) *models {
	m := newModels()
	for i := range n {
		s := Snapshot{Namespace: fmt.Sprintf("ns%d", i%3), Name: fmt.Sprintf("m-%05d", i), Model: fmt.Sprintf("org/model-%d", i%4),
			Phase: []string{"Ready", "Progressing", "Failed"}[i%3], DesiredReplicas: int32(i % 5), ReadyReplicas: int32(i % 4),
			GPUsRequested: int64(i % 7), GPUsAllocated: int64(i % 6), GPUsReady: int64(i % 5), GPUsPending: int64(i % 3),
			GPUsPendingAdmission: int64(i % 2), GPUsAdmitted: int64(i % 4)}
		if i%4 != 0 {
			s.AutoscalingStatus, s.AutoscalingReason = []string{"True", "False", "Unknown"}[i%3], fmt.Sprintf("Reason%d", i%5)
		}
		m.observe(s)
	}
	return m
}

func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// The models' series with shared label pairs expose exactly what one const metric per series
// did, through a pedantic registry.
func TestModelSeriesAsConstMetrics(t *testing.T) {
	m := manyModels(50)
	got, want := exposition(t, m), exposition(t, constModels{m})
	if got != want {
		t.Fatalf("exposition differs:\n%s\nwant\n%s", got, want)
	}
}

// A scrape's gathered model series hold under 3 KB a model (const metrics: 4.6 KB).
func TestScrapeBytesPerModel(t *testing.T) {
	const n = 2000
	reg := prometheus.NewRegistry()
	reg.MustRegister(manyModels(n))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fams, err := reg.Gather()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(fams)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%.0f bytes a model", per)
	if per > 3000 {
		t.Fatalf("a scrape holds %.0f bytes a model, over 3000", per)
	}
}
