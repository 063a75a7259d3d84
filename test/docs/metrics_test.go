package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/example/inferenceservice-operator/controller/activator"
	"github.com/example/inferenceservice-operator/metrics"
	"github.com/example/inferenceservice-operator/metrics/custommetrics"
	"github.com/example/inferenceservice-operator/metrics/podmetrics"
)

// recorder is a prometheus.Registerer that keeps the name of every series a collector
// describes, with the component that registered it: what each binary's /metrics can serve,
// whether or not a series has a sample yet.
type recorder struct {
	component string
	names     map[string]string
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r recorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = r.component
		}
	}
	return nil
}

func (r recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r recorder) Unregister(prometheus.Collector) bool { return false }

// metricName is what a code span of a metrics row must look like to be read as a metric.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// TestMetricsTablesMatchCode: docs/metrics.md's tables list every series the operator, the
// activator and the metrics adapter register (each binary's own: the Go and process collectors
// and the adapter's API server metrics aside), and none that no binary registers.
func TestMetricsTablesMatchCode(t *testing.T) {
	const page = "docs/metrics.md"
	tables, err := TablesWith(page, "", "metric")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{}
	for _, tb := range tables {
		for _, r := range tb.Rows {
			n := 0
			for _, c := range Code(r.Cells[0]) {
				if metricName.MatchString(c) {
					documented[c] = tb.Where(r)
					n++
				}
			}
			if n == 0 {
				t.Errorf("%s: a metrics row without a metric name in its first cell", tb.Where(r))
			}
		}
	}

	code := registeredSeries(t)
	for _, e := range Compare("metric", documented, code) {
		t.Error(e)
	}
	t.Logf("%d series registered, %d documented", len(code), len(documented))
}

// registeredSeries is every series the operator, the activator and the metrics adapter
// register, with the component that does.
func registeredSeries(t *testing.T) map[string]string {
	t.Helper()
	code := map[string]string{}
	op := recorder{"the operator (metrics.New, metrics/)", code}
	metrics.New(op, "test")
	op.MustRegister(metrics.NewQuotaCollector(nil))
	activator.NewMetrics(recorder{"the activator (controller/activator/metrics.go)", code})
	adapter := recorder{"the metrics adapter (metrics/podmetrics, metrics/custommetrics)", code}
	if _, err := podmetrics.New(podmetrics.Config{Period: 1, Timeout: 1, Concurrency: 1,
		Pods: func() ([]*corev1.Pod, error) { return nil, nil }, Owners: &podmetrics.OwnerCaches{}}, adapter); err != nil {
		t.Fatal(err)
	}
	adapter.MustRegister(custommetrics.NewAPIServiceInfo())
	return code
}

// TestAlertsReadRegisteredSeries: every activator_ and inferenceservice_metrics_adapter_
// series the alerts of manifests/monitoring/rules.yaml reads is one that binary registers (a
// histogram's _bucket, _sum and _count with it), so a renamed metric cannot leave an alert
// silently quiet. The operator's own series are checked with its dashboards
// (metrics/monitoring_test.go).
func TestAlertsReadRegisteredSeries(t *testing.T) {
	code := registeredSeries(t)
	b, err := os.ReadFile(filepath.Join(Root(), "manifests", "monitoring", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, prefix := range []string{"activator_", "inferenceservice_metrics_adapter_"} {
		used := regexp.MustCompile(`\b`+prefix+`[a-z_]+\b`).FindAllString(string(b), -1)
		if len(used) == 0 {
			t.Errorf("rules.yaml reads no %s series: its alerts are gone", prefix)
		}
		for _, name := range used {
			base := name
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if _, ok := code[base]; !ok {
					base = strings.TrimSuffix(base, suffix)
				}
			}
			if _, ok := code[base]; !ok {
				t.Errorf("rules.yaml reads %s, which no binary registers", name)
			}
		}
	}
}
