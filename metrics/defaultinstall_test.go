package metrics

// The default install's own series against the alerting rules: what a leader and a standby
// export when no conversion webhook runs (manifests/, no --webhook-bind-address) must raise
// no alert, however long it lasts.

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// defaultReplica builds one replica's registry the way main.go does without
// --webhook-bind-address: the collectors, the quota collector, the workers gauge and the queue's
// metrics; the leader also reports leadership and a few reconciles of a Ready model.
func defaultReplica(t *testing.T, leading bool) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := New(reg, "test")
	reg.MustRegister(NewQuotaCollector(quotaList{}))
	m.SetMaxConcurrentReconciles(8)
	q := m.Workqueue
	q.NewDepthMetric("inferenceservice")
	q.NewAddsMetric("inferenceservice")
	q.NewUnfinishedWorkSecondsMetric("inferenceservice")
	q.NewLongestRunningProcessorSecondsMetric("inferenceservice")
	q.NewRetriesMetric("inferenceservice")
	if leading {
		m.SetLeader("inferenceservice-operator", true)
		for range 5 {
			m.ObserveReconcile("success", time.Millisecond)
		}
		m.ObserveInferenceService(snapshot("m", "Ready", 1, 1, 1, 1, 1, 0))
	}
	return reg
}

// TestConversionGaugeOnlyWhereProbed: without a conversion webhook nothing probes
// conversions, so the gauge is not exported at all (a 0 there would read as "conversions fail"
// and page); it appears with the probe's first outcome.
func TestConversionGaugeOnlyWhereProbed(t *testing.T) {
	reg := defaultReplica(t, true)
	const name = "inferenceservice_conversion_webhook_up"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n != 0 {
		t.Fatalf("default install exports %d %s series (%v), want none", n, name, err)
	}
	reg2 := prometheus.NewPedanticRegistry()
	m := New(reg2, "test")
	m.SetConversionUp(false)
	if err := testutil.GatherAndCompare(reg2, strings.NewReader(`
# HELP inferenceservice_conversion_webhook_up 1 while the leader's probe reads InferenceServices through the API server in the version it does not store, so conversions work; 0 while they fail. Exported only by a leader running the conversion webhook (--webhook-bind-address), from its first probe.
# TYPE inferenceservice_conversion_webhook_up gauge
inferenceservice_conversion_webhook_up 0
`), name); err != nil {
		t.Fatal(err)
	}
	m.SetConversionUp(true)
	if n, _ := testutil.GatherAndCount(reg2, name); n != 1 {
		t.Fatalf("%d series after two probes, want 1", n)
	}
}

// promtoolSeries renders every sample of fams as promtool input series held for 40 minutes
// (counters growing by their value each minute), labelled as Prometheus would scrape them.
func promtoolSeries(fams []*dto.MetricFamily, instance string) []string {
	var out []string
	add := func(name string, labels map[string]string, v float64, counter bool) {
		labels["job"], labels["instance"] = "inferenceservice-operator", instance
		keys := make([]string, 0, len(labels))
		for k := range labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var ls []string
		for _, k := range keys {
			ls = append(ls, k+"="+strconv.Quote(labels[k]))
		}
		values := fmt.Sprintf("%gx40", v)
		if counter {
			values = fmt.Sprintf("0+%gx40", v)
		}
		out = append(out, fmt.Sprintf("  - series: '%s{%s}'\n    values: '%s'", name, strings.Join(ls, ","), values))
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			base := func() map[string]string {
				l := map[string]string{}
				for _, p := range m.GetLabel() {
					l[p.GetName()] = p.GetValue()
				}
				return l
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(f.GetName(), base(), m.GetCounter().GetValue(), true)
			case dto.MetricType_GAUGE:
				add(f.GetName(), base(), m.GetGauge().GetValue(), false)
			case dto.MetricType_UNTYPED:
				add(f.GetName(), base(), m.GetUntyped().GetValue(), false)
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					l := base()
					l["le"] = strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
					add(f.GetName()+"_bucket", l, float64(b.GetCumulativeCount()), true)
				}
				l := base()
				l["le"] = "+Inf"
				add(f.GetName()+"_bucket", l, float64(h.GetSampleCount()), true)
				add(f.GetName()+"_count", base(), float64(h.GetSampleCount()), true)
				add(f.GetName()+"_sum", base(), h.GetSampleSum(), true)
			case dto.MetricType_SUMMARY:
				s := m.GetSummary()
				for _, q := range s.GetQuantile() {
					l := base()
					l["quantile"] = strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)
					add(f.GetName(), l, q.GetValue(), false)
				}
				add(f.GetName()+"_count", base(), float64(s.GetSampleCount()), true)
				add(f.GetName()+"_sum", base(), s.GetSampleSum(), true)
			}
		}
	}
	return out
}

// TestDefaultInstallRaisesNoAlert runs rules.yaml through promtool on the series a default
// install's two replicas (leader and standby, both scraped) export for 40 minutes: past every
// alert's `for:`, not one may fire.
func TestDefaultInstallRaisesNoAlert(t *testing.T) {
	promtool(t)
	var series []string
	for instance, leading := range map[string]bool{"leader": true, "standby": false} {
		fams, err := defaultReplica(t, leading).Gather()
		if err != nil {
			t.Fatal(err)
		}
		series = append(series, promtoolSeries(fams, instance)...)
		series = append(series, fmt.Sprintf("  - series: 'up{job=\"inferenceservice-operator\",instance=%q}'\n    values: '1x40'", instance))
	}
	// The default install's activator and metrics adapter, scraped (their own series at rest
	// are rules_test.yaml's healthy case: counters at 0, nothing held).
	for _, job := range []string{"inferenceservice-activator-metrics", "inferenceservice-metrics-adapter"} {
		series = append(series, fmt.Sprintf("  - series: 'up{job=%q,instance=\"a\"}'\n    values: '1x40'", job))
	}
	var rules ruleGroups
	readYAML(t, "rules.yaml", &rules)
	var checks []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				checks = append(checks, fmt.Sprintf("  - alertname: %s\n    eval_time: 40m\n    exp_alerts: []", r.Alert))
			}
		}
	}
	if len(checks) == 0 {
		t.Fatal("no alerts in rules.yaml")
	}
	rulesPath, err := filepath.Abs(filepath.Join(monitoringDir, "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	test := fmt.Sprintf("rule_files: [%q]\nevaluation_interval: 1m\ntests:\n- name: default install\n  interval: 1m\n  input_series:\n%s\n  alert_rule_test:\n%s\n",
		rulesPath, strings.Join(series, "\n"), strings.Join(checks, "\n"))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "default_install_test.yaml"), []byte(test), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d series, %d alerts checked", len(series), len(checks))
	runPromtool(t, dir, "test", "rules", "default_install_test.yaml")
}
