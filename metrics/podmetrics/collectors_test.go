package podmetrics

import (
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRulesUseRegisteredMetrics: every inferenceservice_metrics_adapter_ series the alerts of
// manifests/monitoring/rules.yaml read is one the scraper registers (apiservice_info, the
// adapter command's own gauge, is not read by them), so a renamed metric cannot leave an alert
// silently quiet.
func TestRulesUseRegisteredMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newCollectors()
	if err := c.register(reg); err != nil {
		t.Fatal(err)
	}
	c.queue.WithLabelValues("a", "b")
	c.scrapes.WithLabelValues("ok")
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, mf := range mfs {
		registered[mf.GetName()] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			registered[mf.GetName()+s] = true
		}
	}
	b, err := os.ReadFile("../../manifests/monitoring/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`\binferenceservice_metrics_adapter_[a-z_]+\b`).FindAllString(string(b), -1)
	if len(used) == 0 {
		t.Fatal("rules.yaml reads no inferenceservice_metrics_adapter_ series: its alerts are gone")
	}
	for _, name := range used {
		if !registered[name] {
			t.Errorf("rules.yaml reads %s, which the metrics adapter does not export", name)
		}
	}
}
